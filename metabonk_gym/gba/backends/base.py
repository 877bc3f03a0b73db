"""What every GBA emulator backend offers the env (`EmulatorBackend`), and the GBA facts they share.

The env talks to an emulator only through this Protocol; `isinstance(obj, EmulatorBackend)`
checks that an object has every member (a runtime-checkable Protocol).

>>> check_region(0x06000000, 0x18000)
>>> decode_value(bytes([0x34, 0x12]), "<u2") == 0x1234
True
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from metabonk_gym.gba.regions import GBA_REGIONS, check_region  # noqa: F401  (re-exported)
from metabonk_gym.gba.statefile import read_state
from metabonk_gym.gba.statefile import write_state_file as _write_state_file

SCREEN_SHAPE = (160, 240, 3)


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


@runtime_checkable
class EmulatorBackend(Protocol):
    """What the GBA env needs from an emulator (every member; nothing is probed with getattr)."""

    #: The backend's name (`GBAEnv(backend=...)`).
    name: ClassVar[str]
    #: True when the emulator stops frames at another scanline than the embedded core, so the
    #: env sets the game's frame counter to the embedded core's boot value after boot.
    aligns_frame_counter: ClassVar[bool]

    @property
    def max_state_bytes(self) -> int:
        """The largest state this backend makes (state files are never inflated past it)."""

    def step(self, frames: int, buttons: int) -> None:
        """Hold `buttons` (KEYINPUT-order mask) for `frames` frames."""

    def screen(self) -> np.ndarray:
        """The current frame, uint8 (160, 240, 3), a fresh array the caller may keep."""

    def read(self, address: int, type_: str) -> int:
        """One typed value (stable-retro type such as `<u2`) at a bus address."""

    def read_many(self, specs: list[tuple[int, str]]) -> list[int]:
        """Several typed values, `(address, type)` each, in one go."""

    def read_bytes(self, address: int, n: int) -> bytes:
        """`n` bytes at `address`, inside one GBA memory region."""

    def read_regions(self, spans: list[tuple[int, int]]) -> list[np.ndarray]:
        """Several `(address, n)` spans as uint8 arrays, read as cheaply as the emulator allows
        (read-only; they may be views of one copy of memory)."""

    def write(self, address: int, type_: str, value: int) -> None:
        """Write one typed value."""

    def save_state(self) -> bytes:
        """An opaque snapshot of the whole machine, restorable by `load_state`."""

    def load_state(self, state: bytes) -> None:
        """Restore a `save_state` snapshot."""

    def vet_state(self, state: bytes) -> None:
        """Make sure a state of unknown origin cannot hang or crash this process when loaded
        (raise `CorruptSavestateError` if it would); a no-op where the emulator is another
        process."""

    def power_on(self) -> None:
        """Back to the power-on state, exactly as a fresh process starts the ROM."""

    def close(self) -> None:
        """Free the emulator (idempotent)."""


#: The largest state `read_state_file` inflates when no size is given (any backend's states).
MAX_STATE_BYTES = 64 * 1024 * 1024


def read_state_file(path: Path, max_bytes: int = MAX_STATE_BYTES) -> bytes:
    """Read a stable-retro `.state` file (a gzipped core state), inflating at most `max_bytes`."""
    return read_state(path, max_bytes).state


def write_state_file(path: Path, state: bytes) -> None:
    """Write a stable-retro `.state` file atomically, with this project's checksum; the folder
    must exist."""
    _write_state_file(path, state)
