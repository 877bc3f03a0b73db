"""`Machine`: the emulator a RAM search, a watch or a probe drives: play a script, snapshot RAM.

Two kinds: the embedded mGBA core on the ROM (from power-on or a saved state; its state is
kept in the search session between commands), or a SkyEmu already running the ROM, read and
driven through its HTTP control server while its user plays in its window (`skyemu_url=`; the
game is never restarted). Snapshots are the bus regions of `REGIONS` joined end to end.

>>> region_spans(["ewram", "iwram"])
[(33554432, 262144), (50331648, 32768)]
>>> locate(0x03000010, region_spans(["ewram", "iwram"]))
262160
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from metabonk_gym.errors import IntegrateError
from metabonk_gym.gba.backends import GBA_REGIONS, RetroCore, decode_value
from metabonk_gym.gba.backends.base import check_region
from metabonk_gym.gba.backends.skyemu import BUTTON_NAMES, ROM_BASE
from metabonk_gym.integrate.script import Step
from metabonk_gym.skyemu.bmp import decode_bmp
from metabonk_gym.skyemu.client import SkyEmuClient

#: Region names -> bus address (sizes from `GBA_REGIONS`). RAM is EWRAM and IWRAM.
REGIONS: dict[str, int] = {
    "ewram": 0x02000000,
    "iwram": 0x03000000,
    "io": 0x04000000,
    "palette": 0x05000000,
    "vram": 0x06000000,
    "oam": 0x07000000,
}
DEFAULT_REGIONS = ("ewram", "iwram")


def region_spans(names: Sequence[str]) -> list[tuple[int, int]]:
    """(address, size) of each named region, in order; a one-line error names an unknown one."""
    spans = []
    for name in names:
        if name.lower() not in REGIONS:
            raise IntegrateError(f"unknown memory region {name!r}: give {', '.join(REGIONS)}")
        start = REGIONS[name.lower()]
        spans.append((start, GBA_REGIONS[start]))
    return spans


def locate(address: int, spans: Sequence[tuple[int, int]]) -> int:
    """The offset of bus `address` in a snapshot of `spans`; a one-line error if it is outside."""
    offset = 0
    for start, size in spans:
        if start <= address < start + size:
            return offset + address - start
        offset += size
    covered = ", ".join(f"0x{s:08X}-0x{s + n - 1:08X}" for s, n in spans)
    raise IntegrateError(f"address 0x{address:08X} is outside the searched RAM ({covered})")


def address_of(offset: int, spans: Sequence[tuple[int, int]]) -> int:
    """The bus address of snapshot offset `offset` (the inverse of `locate`)."""
    for start, size in spans:
        if offset < size:
            return start + offset
        offset -= size
    raise IntegrateError(f"snapshot offset {offset} is past the snapshot")


def check_ram_address(address: int, type_: str) -> None:
    """A one-line error unless a `type_` value at `address` lies in GBA memory the core maps
    (EWRAM, IWRAM, I/O, palette, VRAM, OAM)."""
    try:
        check_region(address, int(type_[2]))
    except ValueError:
        raise IntegrateError(
            f"address 0x{address:08X} is outside RAM: a variable lives in EWRAM "
            "(0x02000000-0x0203FFFF), IWRAM (0x03000000-0x03007FFF) or I/O, VRAM, OAM"
        ) from None


class Core(Protocol):
    """What a machine needs of an emulator (`RetroCore` and `SkyEmuLive` have it)."""

    def step(self, frames: int, buttons: int) -> None: ...
    def screen(self) -> np.ndarray: ...
    def read_regions(self, spans: list[tuple[int, int]]) -> list[np.ndarray]: ...
    def write(self, address: int, type_: str, value: int) -> None: ...
    def save_state(self) -> bytes: ...
    def load_state(self, state: bytes) -> None: ...
    def close(self) -> None: ...


class SkyEmuLive:
    """A SkyEmu its user plays, read and stepped over HTTP; never restarted (`save_state` is
    refused: the game lives in SkyEmu's window).

    Args:
        url: the SkyEmu HTTP control server, e.g. http://127.0.0.1:8080.
        rom: the ROM bytes SkyEmu must be running (checked on the header and sampled bytes).
        timeout: seconds one request may take.
    """

    def __init__(self, url: str, rom: bytes, timeout: float = 30.0) -> None:
        self.client = SkyEmuClient(url, timeout=timeout)
        self.url = url
        self._held = -1
        try:
            self.client.ping()
            offsets = sorted({*range(0xA0, 0xC0), *(i * len(rom) // 192 for i in range(192))})
            theirs = self.client.read([ROM_BASE + o for o in offsets])
        except Exception as exc:
            self.client.close()
            raise IntegrateError(
                f"no SkyEmu answers at {url} ({exc}): start it with its HTTP control server"
            ) from exc
        if theirs != bytes(rom[o] for o in offsets):
            self.client.close()
            raise IntegrateError(
                f"the SkyEmu at {url} runs another ROM than this game folder's rom.gba: load that ROM in it"
            )

    def step(self, frames: int, buttons: int) -> None:
        if buttons != self._held:
            self.client.set_inputs(
                {name: buttons >> bit & 1 for bit, name in enumerate(BUTTON_NAMES)}
            )
            self._held = buttons
        if frames:
            self.client.step(frames)

    def screen(self) -> np.ndarray:
        return decode_bmp(self.client.screen_bmp())

    def read_regions(self, spans: list[tuple[int, int]]) -> list[np.ndarray]:
        return [np.frombuffer(self.client.read(range(a, a + n)), np.uint8) for a, n in spans]

    def write(self, address: int, type_: str, value: int) -> None:
        size = int(type_[2])
        raw = int(value).to_bytes(
            size, "big" if type_[0] == ">" else "little", signed=type_[1] == "i"
        )
        self.client.write([(address + i, b) for i, b in enumerate(raw)])

    def save_state(self) -> bytes:
        raise IntegrateError("a SkyEmu session plays in SkyEmu's window: save states there")

    def load_state(self, state: bytes) -> None:
        raise IntegrateError("a SkyEmu session plays in SkyEmu's window: load states there")

    def close(self) -> None:
        self.client.close()


#: The emulators the RAM tools run on: the embedded mGBA core, or a SkyEmu someone plays in.
BACKENDS: tuple[str, ...] = ("embedded", "skyemu")


def check_backend(backend: object) -> str:
    """`backend` when it is one of `BACKENDS`, else a one-line `IntegrateError` (a session that
    stored any other word ran the embedded core while saying it was that backend).

    >>> check_backend("skyemu")
    'skyemu'
    """
    if backend not in BACKENDS:
        raise IntegrateError(f"--backend must be embedded or skyemu, not {backend!r}")
    return str(backend)


class Machine:
    """An emulator on one ROM, for searches and probes (see the module docstring).

    Args:
        core: the emulator (`RetroCore` or `SkyEmuLive`).
        kind: "embedded" or "skyemu".
    """

    def __init__(self, core: Core, kind: str) -> None:
        self.core = core
        self.kind = kind
        self.frames = 0  # frames run since this machine was opened

    @classmethod
    def open(
        cls,
        rom: str | Path,
        backend: str = "embedded",
        skyemu_url: str | None = None,
        state: bytes | None = None,
    ) -> Machine:
        """The embedded core on `rom` (at `state`, else power-on), or the SkyEmu at `skyemu_url`."""
        check_backend(backend)
        if backend == "skyemu":
            if not skyemu_url:
                raise IntegrateError("--backend skyemu needs --skyemu-url http://127.0.0.1:PORT")
            return cls(SkyEmuLive(skyemu_url, Path(rom).read_bytes()), "skyemu")
        core = RetroCore(rom)
        machine = cls(core, "embedded")
        if state is not None:
            core.load_state(state)
        return machine

    def run(
        self,
        steps: Sequence[Step],
        on_frame: Callable[[Machine, int], None] | None = None,
        every: int = 1,
    ) -> None:
        """Play `steps`; `on_frame(machine, buttons)` is called every `every` frames (after them)."""
        for buttons, frames in steps:
            if on_frame is None:
                self.core.step(frames, buttons)
                self.frames += frames
                continue
            left = frames
            while left > 0:
                n = min(every, left)
                self.core.step(n, buttons)
                self.frames += n
                left -= n
                on_frame(self, buttons)

    def snapshot(self, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """A copy of the memory of `spans`, joined end to end (uint8)."""
        parts = self.core.read_regions(list(spans))
        return np.concatenate([np.asarray(p, np.uint8) for p in parts])

    def read(self, address: int, type_: str) -> int:
        """One typed value (a snapshot of just its bytes)."""
        raw = self.core.read_regions([(address, int(type_[2]))])[0]
        return decode_value(bytes(raw), type_)

    def screen(self) -> np.ndarray:
        return self.core.screen()

    def save_state(self) -> bytes:
        return self.core.save_state()

    def close(self) -> None:
        self.core.close()

    def __enter__(self) -> Machine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
