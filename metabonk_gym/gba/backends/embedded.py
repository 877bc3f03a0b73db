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

import struct
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from metabonk_gym.errors import CorruptSavestateError, MetabonkError
from metabonk_gym.gba.backends.base import check_region
from metabonk_gym.gba.backends.core_copies import SLOTS, retro_module
from metabonk_gym.gba.buttons import mask_to_retro


class RetroCore:
    """The mGBA core of the stable-retro wheel (see the module docstring).

    Args:
        rom_path: the ROM to load (stable-retro allows one core per process).
    """

    name: ClassVar[str] = "embedded"
    aligns_frame_counter: ClassVar[bool] = False

    def __init__(self, rom_path: str | Path) -> None:
        # The first core of a process runs on stable-retro itself, others on private copies of
        # its extension and core library (`core_copies`: stable-retro allows one per copy).
        self._slot = SLOTS.take()
        try:
            retro = retro_module(self._slot)
            self._em = retro.RetroEmulator(str(rom_path))
        except (RuntimeError, OSError, ImportError) as exc:
            SLOTS.release(self._slot)
            if "multiple" in str(exc).lower() or not isinstance(exc, RuntimeError):
                raise MetabonkError(
                    f"another embedded mGBA core in this process failed to start ({exc}). "
                    "Close the other env first, or run several envs in subprocesses with "
                    "metabonk_gym.make_vec(env_id, n, envs_per_worker=1)."
                ) from exc
            raise
        self._data = retro.GameDataGlue()
        self._em.configure_data(self._data)
        self._memory = self._data.memory
        self._buttons = -1
        self._retro_masks: dict[int, np.ndarray] = {}
        self._power_on = self._em.get_state()

    @property
    def emulator(self) -> Any:
        """The stable-retro emulator object itself (the raw-core benchmark drives it)."""
        return self._em

    # emulation ------------------------------------------------------------------
    def step(self, frames: int, buttons: int) -> None:
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
        return self._em.get_screen()  # a new array on every call: callers may keep it

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

    def power_on(self) -> None:
        """Back to the power-on state (as after loading the ROM)."""
        self.load_state(self._power_on)

    def close(self) -> None:
        # stable-retro frees the core when the emulator object goes away.
        if self._em is not None:
            self._em = None  # type: ignore[assignment]
            self._memory = None
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
