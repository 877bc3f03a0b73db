"""Emulator backends behind the GBA env: the embedded mGBA core (stable-retro) and, elsewhere,
SkyEmu over HTTP. The env talks only to this small interface.

The embedded core reads single variables with `Memory.extract` (about a microsecond) instead of
stable-retro's `update_ram`, which copies all of GBA memory each step (as slow as a frame).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path
from typing import Protocol

import numpy as np

from metabonk_gym.errors import CorruptSavestateError, MetabonkError
from metabonk_gym.gba.buttons import mask_to_retro

#: The GBA bus regions the cores expose: start address -> size in bytes.
GBA_REGIONS: dict[int, int] = {
    0x02000000: 0x40000,  # EWRAM
    0x03000000: 0x8000,  # IWRAM
    0x04000000: 0x400,  # I/O registers
    0x05000000: 0x400,  # palette
    0x06000000: 0x18000,  # VRAM
    0x07000000: 0x400,  # OAM
}

SCREEN_SHAPE = (160, 240, 3)


def check_region(address: int, n: int) -> None:
    """Raise ValueError unless [address, address+n) lies inside one GBA memory region."""
    for start, size in GBA_REGIONS.items():
        if start <= address and address + n <= start + size:
            return
    regions = ", ".join(f"0x{s:08X}-0x{s + z - 1:08X}" for s, z in GBA_REGIONS.items())
    raise ValueError(f"cannot read {n} bytes at 0x{address:08X}: outside the GBA regions {regions}")


def decode_value(raw: bytes, type_: str) -> int:
    """Decode a stable-retro typed value (`<u2`, `|i1`, `>n4` BCD...) from raw bytes."""
    order = ">" if type_[0] == ">" else "<"
    kind, size = type_[1], int(type_[2])
    if kind == "n":  # binary-coded decimal, as stable-retro's 'n' type
        digits = raw if order == ">" else raw[::-1]
        value = 0
        for byte in digits:
            value = value * 100 + (byte >> 4) * 10 + (byte & 0xF)
        return value
    return int.from_bytes(raw[:size], "big" if order == ">" else "little", signed=kind == "i")


class EmulatorBackend(Protocol):
    """What the GBA env needs from an emulator."""

    def step(self, frames: int, buttons: int) -> None:
        """Hold `buttons` (KEYINPUT-order mask) for `frames` frames."""

    def screen(self) -> np.ndarray:
        """The current frame, uint8 (160, 240, 3)."""

    def read(self, address: int, type_: str) -> int: ...

    def read_many(self, specs: list[tuple[int, str]]) -> list[int]: ...

    def read_bytes(self, address: int, n: int) -> bytes: ...

    def write(self, address: int, type_: str, value: int) -> None: ...

    def save_state(self) -> bytes:
        """An opaque snapshot of the whole machine, restorable by `load_state`."""

    def load_state(self, state: bytes) -> None: ...

    def close(self) -> None: ...


class RetroCore:
    """The mGBA core of the stable-retro wheel, driven frame by frame.

    >>> from metabonk_gym.gba.integration import Integration
    >>> core = RetroCore(Integration.bundled("BonkQuest").rom_path)
    >>> core.step(30, 0)
    >>> hex(core.read(0x02000000, "<u4"))
    '0x4b4e4f42'
    >>> core.close()
    """

    name = "embedded"

    def __init__(self, rom_path: str | Path) -> None:
        import stable_retro

        try:
            self._em = stable_retro.RetroEmulator(str(rom_path))
        except RuntimeError as exc:
            if "multiple" in str(exc).lower():
                raise MetabonkError(
                    "stable-retro allows one emulator per process and one is already open here. "
                    "Close the other env first, or run several envs in subprocesses with "
                    "metabonk_gym.make_vec(env_id, n) (or SB3's SubprocVecEnv)."
                ) from exc
            raise
        self._data = stable_retro._retro.GameDataGlue()
        self._em.configure_data(self._data)
        self._memory = self._data.memory
        self._buttons = -1
        self._retro_masks: dict[int, np.ndarray] = {}
        self._power_on = self._em.get_state()

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
        self._em = None  # type: ignore[assignment]
        self._memory = None


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


def read_state_file(path: Path) -> bytes:
    """Read a stable-retro `.state` file (a gzipped core state)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise CorruptSavestateError(f"savestate file not found: {path}") from None
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise CorruptSavestateError(
            f"savestate {path} is not a gzipped core state ({exc}); re-create it with "
            "env.unwrapped.save_state(path)"
        ) from exc


def write_state_file(path: Path, state: bytes) -> None:
    """Write a stable-retro `.state` file atomically (temp file, then rename)."""
    from metabonk_gym.utils import atomic_write_bytes

    atomic_write_bytes(Path(path), gzip.compress(state, mtime=0))
