"""`RetroCore`: the embedded mGBA core of the stable-retro wheel, driven frame by frame.

It reads single variables with `Memory.extract` (about a microsecond) instead of stable-retro's
`update_ram`, which copies all of GBA memory each step (as slow as a frame).

>>> from metabonk_gym.gba.backends.base import EmulatorBackend
>>> from metabonk_gym.gba.integration import Integration
>>> core = RetroCore(Integration.bundled("BonkQuest").rom_path)
>>> isinstance(core, EmulatorBackend)
True
>>> core.step(30, 0)
>>> hex(core.read(0x02000000, "<u4"))
'0x4b4e4f42'
>>> core.close()
"""

from __future__ import annotations

import hashlib
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from metabonk_gym.errors import CorruptSavestateError, MetabonkError, RomLoadError
from metabonk_gym.gba.backends.base import check_region
from metabonk_gym.gba.backends.core_copies import SLOTS, retro_module
from metabonk_gym.gba.backends.probe import probe_state
from metabonk_gym.gba.buttons import mask_to_retro
from metabonk_gym.gba.integration import padded_rom


class RetroCore:
    """The mGBA core of the stable-retro wheel (see the module docstring).

    Args:
        rom_path: the ROM to load (a small one runs from a padded copy, see `padded_rom`).
    """

    name: ClassVar[str] = "embedded"
    aligns_frame_counter: ClassVar[bool] = False

    def __init__(self, rom_path: str | Path) -> None:
        self.rom_path = Path(rom_path)
        rom = self.rom_path.read_bytes()
        self._rom_sha = hashlib.sha1(rom).hexdigest()
        # mGBA 0.7 may take a small ROM for a multiboot image: it runs from a padded copy, a
        # temp file deleted as soon as the core has read it (nothing is left after a crash)
        self._padded = padded_rom(self.rom_path, rom)
        self._em: Any = None
        self._data: Any = None
        self._memory: Any = None
        # The first core of a process runs on stable-retro itself, others on private copies of
        # its extension and core library (`core_copies`: stable-retro allows one per copy).
        self._slot = SLOTS.take()
        try:
            self._open()
        except BaseException:
            SLOTS.release(self._slot)
            raise
        self._buttons = -1
        self._retro_masks: dict[int, np.ndarray] = {}
        self._power_on = bytes(self.emulator.get_state())
        self._screen_stale = False
        #: The largest state file this core inflates (its states' size, and a margin).
        self.max_state_bytes = len(self._power_on) + 4096

    def _open(self) -> None:
        """(Re)create the emulator on the ROM: a fresh core, as a fresh process has."""
        self._em = self._data = self._memory = None  # the old core goes first (one per copy)
        retro = retro_module(self._slot)
        folder = None
        try:
            path = self.rom_path
            if self._padded is not None:
                folder = Path(tempfile.mkdtemp(prefix="metabonk-rom-"))
                path = folder / self.rom_path.name
                path.write_bytes(self._padded)
            self._em = retro.RetroEmulator(str(path))
        except (RuntimeError, OSError, ImportError) as exc:
            if "multiple" in str(exc).lower() or not isinstance(exc, RuntimeError):
                raise MetabonkError(
                    f"another embedded mGBA core in this process failed to start ({exc}). "
                    "Close the other env first, or run several envs in subprocesses with "
                    "metabonk_gym.make_vec(env_id, n, envs_per_worker=1)."
                ) from exc
            raise RomLoadError(
                f"the mGBA core could not load {self.rom_path} ({exc}): is it a GBA ROM (.gba)? "
                "A text file, an archive or a damaged ROM cannot run; pass rom= the ROM file"
            ) from exc
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self._data = retro.GameDataGlue()
        self._em.configure_data(self._data)
        self._memory = self._data.memory

    @property
    def emulator(self) -> Any:
        """The stable-retro emulator object itself (the raw-core benchmark drives it)."""
        return self._em

    # emulation ------------------------------------------------------------------
    def step(self, frames: int, buttons: int) -> None:
        self._screen_stale = False
        if buttons != self._buttons:
            retro_mask = self._retro_masks.get(buttons)
            if retro_mask is None:
                retro_mask = self._retro_masks[buttons] = mask_to_retro(buttons)
            self._em.set_button_mask(retro_mask, 0)
            self._buttons = buttons
        em_step = self._em.step
        for _ in range(frames):
            em_step()

    def screen(self) -> np.ndarray:
        if self._screen_stale:
            return self._render()
        return self._em.get_screen()  # a new array on every call: callers may keep it

    def _render(self) -> np.ndarray:
        """The screen of a state just loaded: the core draws a frame only while it runs, so run
        one frame (no buttons) and put the machine back exactly as it was."""
        now = self._em.get_state()
        self.step(1, 0)
        frame = self._em.get_screen()
        if not self._em.set_state(now):
            raise CorruptSavestateError("the mGBA core refused its own state")
        self._buttons = -1  # the frame buffer keeps that frame until the core runs again
        return frame

    # memory ---------------------------------------------------------------------
    def read(self, address: int, type_: str) -> int:
        return int(self._memory.extract(address, type_))

    def read_many(self, specs: list[tuple[int, str]]) -> list[int]:
        extract = self._memory.extract
        return [extract(address, type_) for address, type_ in specs]

    def read_bytes(self, address: int, n: int) -> bytes:
        check_region(address, n)
        if n > 512:  # one copy of every block beats hundreds of 8-byte reads
            for start, block in self._memory.blocks.items():
                if start <= address < start + len(block):
                    return bytes(block[address - start : address - start + n])
        extract = self._memory.extract
        # extract returns "<u8" as a signed 64-bit value: mask it back to unsigned
        words = [
            extract(a, "<u8") & 0xFFFFFFFFFFFFFFFF for a in range(address, address + n - n % 8, 8)
        ]
        head = struct.pack(f"<{len(words)}Q", *words)
        tail = bytes(extract(a, "|u1") for a in range(address + n - n % 8, address + n))
        return head + tail

    def read_regions(self, spans: list[tuple[int, int]]) -> list[np.ndarray]:
        """Views into one copy of the memory blocks (~30 us for all of them)."""
        blocks = self._memory.blocks
        out: list[np.ndarray] = []
        for address, n in spans:
            check_region(address, n)
            for start, block in blocks.items():
                if start <= address and address + n <= start + len(block):
                    out.append(np.frombuffer(block, np.uint8, n, address - start))
                    break
            else:
                out.append(np.frombuffer(self.read_bytes(address, n), np.uint8))
        return out

    def write(self, address: int, type_: str, value: int) -> None:
        self._memory.assign(address, type_, int(value))

    # state ----------------------------------------------------------------------
    def save_state(self) -> bytes:
        return bytes(self._em.get_state())

    def load_state(self, state: bytes) -> None:
        check_mgba_state(state, self._power_on)
        if not self._em.set_state(state):
            raise CorruptSavestateError("the mGBA core refused the savestate")
        self._buttons = -1
        self._screen_stale = True  # the frame buffer still shows the screen before the load

    def vet_state(self, state: bytes) -> None:
        """Load and run a state of unknown origin in a throwaway process first (once per state):
        mGBA can hang on a corrupt one where nothing could interrupt it."""
        check_mgba_state(state, self._power_on)
        probe_state(self.rom_path, self._rom_sha, state)

    def power_on(self) -> None:
        """Back to the power-on state, as a fresh process starts the ROM: a new core, since
        restoring the power-on state is not exact on every ROM (some even hang after it)."""
        self._open()
        self._buttons = -1
        self._screen_stale = False

    def close(self) -> None:
        # stable-retro frees the core when the emulator object goes away.
        if self._em is not None:
            self._em = self._data = self._memory = None
            SLOTS.release(self._slot)


def check_mgba_state(state: bytes, reference: bytes) -> None:
    """Refuse a state that is not an mGBA state of this size, or was made for another ROM.

    mGBA's state starts with a version word, the BIOS checksum and the ROM's CRC32; the core
    would load garbage of the right length without complaint.
    """
    if len(state) != len(reference):
        raise CorruptSavestateError(
            f"savestate is {len(state)} bytes, but this core's states are {len(reference)} bytes"
        )
    version, ref_version = state[0:4], reference[0:4]
    if version[3] != ref_version[3] or version[0] > 0x20:
        raise CorruptSavestateError(
            f"savestate does not start with an mGBA version word ({version.hex()})"
        )
    if state[8:12] != reference[8:12]:
        raise CorruptSavestateError(
            f"savestate was made for another ROM (CRC32 {state[8:12][::-1].hex()}, "
            f"this ROM {reference[8:12][::-1].hex()})"
        )
