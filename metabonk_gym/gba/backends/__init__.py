"""The GBA env's emulator backends, side by side: the embedded mGBA core and SkyEmu over HTTP.

`open_backend(name, rom, **kwargs)` opens one by the name `GBAEnv(backend=...)` takes; every
backend satisfies the runtime-checkable `EmulatorBackend` Protocol.

>>> sorted(BACKENDS)
['embedded', 'skyemu']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metabonk_gym.gba.backends.base import (
    GBA_REGIONS,
    SCREEN_SHAPE,
    EmulatorBackend,
    check_region,
    decode_value,
    read_state_file,
    write_state_file,
)
from metabonk_gym.gba.backends.embedded import RetroCore
from metabonk_gym.gba.backends.skyemu import SkyEmuBackend

__all__ = [
    "BACKENDS",
    "GBA_REGIONS",
    "SCREEN_SHAPE",
    "EmulatorBackend",
    "RetroCore",
    "SkyEmuBackend",
    "check_region",
    "decode_value",
    "open_backend",
    "read_state_file",
    "write_state_file",
]

#: Backend name -> class.
BACKENDS: dict[str, type] = {"embedded": RetroCore, "skyemu": SkyEmuBackend}


def open_backend(name: str, rom_path: Path, **kwargs: Any) -> EmulatorBackend:
    """Open backend `name` on `rom_path`; `kwargs` are the backend's own options
    (SkyEmu: `skyemu_url`, `skyemu_binary`, ...; the embedded core takes none)."""
    if name == "embedded":
        if kwargs:
            raise TypeError(f"unexpected arguments for the embedded backend: {', '.join(kwargs)}")
        return RetroCore(rom_path)
    if name == "skyemu":
        return SkyEmuBackend.open(rom_path, **kwargs)
    raise ValueError(f"backend must be 'embedded' or 'skyemu', not {name!r}")
