"""`SkyEmuBackend`: the GBA env's `EmulatorBackend` on a SkyEmu, through its HTTP control server.

`GBAEnv(..., backend="skyemu", skyemu_url=URL)` drives a SkyEmu that is already running (GUI
with the HTTP control server enabled, or headless); `skyemu_binary=PATH` starts a headless one
per env (`SkyEmu http_server PORT ROM`, own port and ROM copy, ended on close and at exit).

Costs per env step: `/input` only when the buttons change, one `/step?frames=frameskip`, one
`/screen?format=bmp` and one `/read_byte` holding every RAM variable, all on one keep-alive
connection.

Savestates and alignment. SkyEmu's `/load` emulates one frame after restoring, so a plain
`/save` + `/load` lands one frame late. The backend keeps an *anchor* it can restore exactly
(power-on via `/load_rom`, or a `Checkpoint`: the image of the frame before, the buttons of the
missing frame, writes after it) and a log of the steps and writes since. `save_state()` returns
the anchor and the log, without touching the running game (rewinding it and replaying would
change it wherever a restore is not exact); `load_state()` restores the anchor and replays the
log. The log is cut every `CHECKPOINT_EVERY` operations by splitting one step around a `/save`,
so a load never replays more than that. On open the ROM is restarted (`/load_rom`, paused), so every
env starts from power-on like the embedded core; the env then aligns both backends on the
game's own frame counter (see `GBAEnv._boot`).

Savestate files are handled on this machine: SkyEmu reads and writes them by path, so the
server must share this machine's filesystem (a SkyEmu on another host can step and read, but
not reset).

>>> from metabonk_gym.gba.backends.skyemu import BUTTON_NAMES
>>> BUTTON_NAMES[:4]
('A', 'B', 'Select', 'Start')
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import uuid
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from metabonk_gym.gba.backends.base import SCREEN_SHAPE, check_region, decode_value
from metabonk_gym.skyemu.bmp import decode_bmp
from metabonk_gym.skyemu.client import SkyEmuClient
from metabonk_gym.skyemu.errors import (
    SkyEmuCommandFailedError,
    SkyEmuError,
    SkyEmuProtocolError,
    SkyEmuRomMismatchError,
    SkyEmuStateError,
)
from metabonk_gym.skyemu.process import SkyEmuProcess
from metabonk_gym.skyemu.state import Checkpoint, pack_state, unpack_state
from metabonk_gym.utils import atomic_write_bytes

#: SkyEmu's input names in KEYINPUT bit order (A, B, SELECT, START, RIGHT, LEFT, UP, DOWN, R, L).
BUTTON_NAMES: tuple[str, ...] = (
    "A",
    "B",
    "Select",
    "Start",
    "Right",
    "Left",
    "Up",
    "Down",
    "R",
    "L",
)
#: Cut the replay log after this many operations (bounds what one `load_state()` replays).
CHECKPOINT_EVERY = 128
#: State images kept on disk for reloading (the anchor always stays).
IMAGE_CACHE = 16
#: ROM bytes compared through the bus to check that SkyEmu runs our ROM.
ROM_BASE = 0x08000000
ROM_SAMPLES = 192

_Op = tuple[str, int, Any]  # ("step", frames, buttons) or ("write", address, data)


class SkyEmuBackend:
    """A GBA on SkyEmu's HTTP control server (see the module docstring); `open()` builds one.

    Args:
        client: the HTTP client of the server.
        rom_path: the ROM the env runs (compared with what SkyEmu runs).
        process: the SkyEmu this backend started (stopped on close), None for one you run.
        check_rom: refuse a SkyEmu that runs another ROM.
    """

    name: ClassVar[str] = "skyemu"
    #: Ask GBAEnv to set the game's frame counter to the embedded core's boot value (0) after boot.
    aligns_frame_counter: ClassVar[bool] = True
    #: The largest state file inflated for this backend (a SkyEmu image and its header).
    max_state_bytes: ClassVar[int] = 64 * 1024 * 1024

    def __init__(
        self,
        client: SkyEmuClient,
        rom_path: str | Path,
        process: SkyEmuProcess | None = None,
        check_rom: bool = True,
    ) -> None:
        self.client = client
        self.rom_path = Path(rom_path)
        self.process = process
        self._rom = self.rom_path.read_bytes()
        self.rom_sha1 = hashlib.sha1(self._rom).hexdigest()
        self._folder = (
            process.folder
            if process is not None
            else Path(tempfile.mkdtemp(prefix="metabonk-skyemu-"))
        )
        self._own_folder = process is None
        if self._own_folder:  # also removed if the env is dropped without close()
            weakref.finalize(self, shutil.rmtree, str(self._folder), True)
        self._images: OrderedDict[str, Path] = OrderedDict()  # image sha1 -> file SkyEmu can load
        self._held = -1  # buttons SkyEmu holds now (-1: unknown)
        self._screen: np.ndarray | None = None
        self._log: list[_Op] = []
        self._anchor = Checkpoint("power_on", rom_sha1=self.rom_sha1)
        self._closed = False
        try:
            self.client.ping()
            status = self.client.status()
            if check_rom:
                self._check_rom(status)
            self.server_rom_path = str(status.get("rom-path", ""))
            if not status.get("rom-loaded") or not self.server_rom_path:
                raise SkyEmuRomMismatchError(
                    f"SkyEmu at {client.url} reports no loaded ROM path in /status, so it cannot "
                    f"be restarted; load {self.rom_path} in it"
                )
            self.power_on()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(
        cls,
        rom_path: str | Path,
        skyemu_url: str | None = None,
        skyemu_binary: str | Path | None = None,
        skyemu_timeout: float = 60.0,
        skyemu_start_timeout: float = 30.0,
        skyemu_check_rom: bool = True,
    ) -> SkyEmuBackend:
        """Connect to `skyemu_url`, or start `skyemu_binary` headless on `rom_path` (a copy)."""
        if (skyemu_url is None) == (skyemu_binary is None):
            raise SkyEmuError(
                "backend='skyemu' needs exactly one of skyemu_url='http://127.0.0.1:8080' (a SkyEmu "
                "running with its HTTP control server) or skyemu_binary=PATH (metabonk starts one); "
                "see docs/skyemu.md"
            )
        if skyemu_binary is not None:
            process = SkyEmuProcess(skyemu_binary, rom_path, start_timeout=skyemu_start_timeout)
            try:
                return cls(
                    SkyEmuClient(process.url, timeout=skyemu_timeout),
                    rom_path,
                    process,
                    skyemu_check_rom,
                )
            except BaseException:
                process.stop()
                raise
        assert skyemu_url is not None
        return cls(
            SkyEmuClient(skyemu_url, timeout=skyemu_timeout), rom_path, None, skyemu_check_rom
        )

    def _check_rom(self, status: dict[str, Any]) -> None:
        """Check that SkyEmu runs this env's ROM (its header and sampled bytes, via the bus)."""
        url = self.client.url
        if not status.get("rom-loaded"):
            raise SkyEmuRomMismatchError(
                f"SkyEmu at {url} has no ROM loaded; load {self.rom_path} in it (File > Load ROM, or "
                f"{url}/load_rom?path=...), or pass skyemu_binary=PATH to let metabonk start its own"
            )
        loaded = str(status.get("rom-path", ""))
        if self.process is not None and Path(loaded).name != self.process.rom.name:
            raise SkyEmuRomMismatchError(
                f"the server on {url} runs {loaded!r}, not the SkyEmu metabonk started for {self.process.rom}: "
                "another program took the port; try again"
            )
        size = len(self._rom)
        offsets = sorted(
            {*range(0xA0, min(0xC0, size)), *(i * size // ROM_SAMPLES for i in range(ROM_SAMPLES))}
        )
        theirs = self.client.read([ROM_BASE + o for o in offsets])
        ours = bytes(self._rom[o] for o in offsets)
        if theirs != ours:
            title = theirs[: 0xAC - 0xA0].rstrip(b"\0").decode("ascii", "replace")
            raise SkyEmuRomMismatchError(
                f"SkyEmu at {url} runs a different ROM ({loaded or 'unknown path'}, header title {title!r}) "
                f"from the one this env needs: {self.rom_path} (SHA-1 {self.rom_sha1}). Load that ROM in "
                "SkyEmu, or pass skyemu_binary=PATH to let metabonk start a SkyEmu with the right one"
            )

    # ------------------------------------------------------------------ emulation
    def step(self, frames: int, buttons: int) -> None:
        """Hold `buttons` (KEYINPUT-order mask) for `frames` frames: `/input` if changed, `/step`."""
        if frames < 1:
            raise ValueError(f"frames must be >= 1, not {frames}")
        if len(self._log) >= CHECKPOINT_EVERY:
            self._checkpoint_step(frames, buttons)
            return
        self._hold(buttons)
        self.client.step(frames)
        self._log_step(frames, buttons)
        self._screen = None

    def screen(self) -> np.ndarray:
        """The current frame, uint8 (160, 240, 3), from SkyEmu's BMP."""
        if self._screen is None:
            frame = decode_bmp(self.client.screen_bmp())
            if frame.shape != SCREEN_SHAPE:
                raise SkyEmuProtocolError(
                    f"SkyEmu sent a {frame.shape[1]}x{frame.shape[0]} screen, not a GBA's 240x160"
                )
            self._screen = frame
        return self._screen.copy()

    def _hold(self, buttons: int) -> None:
        if buttons == self._held:
            return
        changed = {
            name: buttons >> bit & 1
            for bit, name in enumerate(BUTTON_NAMES)
            if self._held < 0 or (buttons ^ self._held) >> bit & 1
        }
        self.client.set_inputs(changed)
        self._held = buttons

    def _log_step(self, frames: int, buttons: int) -> None:
        last = self._log[-1] if self._log else None
        if last is not None and last[0] == "step" and last[2] == buttons:
            self._log[-1] = ("step", last[1] + frames, buttons)
        else:
            self._log.append(("step", frames, buttons))

    # ------------------------------------------------------------------ memory
    def read(self, address: int, type_: str) -> int:
        return self.read_many([(address, type_)])[0]

    def read_many(self, specs: list[tuple[int, str]]) -> list[int]:
        """Every variable in one `/read_byte` (as many as the URL limit allows)."""
        if not specs:
            return []
        addresses = [address + i for address, type_ in specs for i in range(int(type_[2]))]
        raw = self.client.read(addresses)
        out, at = [], 0
        for _, type_ in specs:
            size = int(type_[2])
            out.append(decode_value(raw[at : at + size], type_))
            at += size
        return out

    def read_bytes(self, address: int, n: int) -> bytes:
        check_region(address, n)
        return self.client.read(range(address, address + n)) if n else b""

    def read_regions(self, spans: list[tuple[int, int]]) -> list[np.ndarray]:
        """One `/read_byte` per span."""
        return [np.frombuffer(self.read_bytes(address, n), np.uint8) for address, n in spans]

    def write(self, address: int, type_: str, value: int) -> None:
        data = encode_value(int(value), type_)
        self.client.write([(address + i, b) for i, b in enumerate(data)])
        self._log.append(("write", address, data))

    # ------------------------------------------------------------------ state
    def power_on(self) -> None:
        """Restart the ROM (`/load_rom`, paused): the state right after power-on."""
        self.client.load_rom(self.server_rom_path)
        self._held = -1
        self._screen = None
        self._anchor = Checkpoint("power_on", rom_sha1=self.rom_sha1)
        self._log = []

    def save_state(self) -> bytes:
        """A snapshot that `load_state` restores exactly (the one-frame `/load` offset included):
        the anchor and the operations since, so the running game is left alone."""
        return pack_state(self._anchor.then(self._log))

    def load_state(self, state: bytes) -> None:
        """Restore a `save_state()` snapshot exactly (or a bare SkyEmu state image, one frame late)."""
        checkpoint = unpack_state(state)
        if checkpoint.rom_sha1 and checkpoint.rom_sha1 != self.rom_sha1:
            raise SkyEmuStateError(
                f"savestate was made for another ROM (SHA-1 {checkpoint.rom_sha1}, this ROM {self.rom_sha1})"
            )
        anchor = checkpoint.base()
        self._restore(anchor)
        self._anchor = anchor
        self._log = []
        self._replay(list(checkpoint.replay))
        self._log = list(checkpoint.replay)

    def vet_state(self, state: bytes) -> None:
        """Nothing to do: SkyEmu runs in its own process, and every request has a deadline."""

    def _restore(self, checkpoint: Checkpoint) -> None:
        if checkpoint.kind == "power_on":
            self.client.load_rom(self.server_rom_path)
            self._held = -1
        else:
            path = self._image_file(checkpoint.image)
            self._hold(checkpoint.buttons)
            try:
                self.client.load(str(path))
            except SkyEmuCommandFailedError as exc:
                raise SkyEmuStateError(
                    f"SkyEmu could not load the savestate image {path} ({exc}); SkyEmu states only load "
                    "in the SkyEmu build that wrote them"
                ) from exc
        for address, data in checkpoint.writes:
            self.client.write([(address + i, b) for i, b in enumerate(data)])
        self._screen = None

    def _replay(self, ops: list[_Op]) -> None:
        for kind, a, b in ops:
            if kind == "write":
                self.client.write([(a + i, byte) for i, byte in enumerate(b)])
            elif a > 0:
                self._hold(b)
                self.client.step(a)
        self._screen = None

    def _checkpoint_step(self, frames: int, buttons: int) -> None:
        """Step, but `/save` before the last frame and make that the new anchor (cuts the log)."""
        self._hold(buttons)
        if frames > 1:
            self.client.step(frames - 1)
        self._screen = None
        try:
            image = self._save_image()
        except BaseException:
            self.client.step(1)
            self._log_step(frames, buttons)
            raise
        self.client.step(1)
        self._anchor = Checkpoint("image", image, buttons, (), self.rom_sha1)
        self._log = []

    def _save_image(self) -> bytes:
        path = self._folder / f"state-{uuid.uuid4().hex}.png"
        try:
            self.client.save(str(path))
        except SkyEmuCommandFailedError as exc:
            raise SkyEmuError(
                f"SkyEmu at {self.client.url} could not write a savestate to {path} ({exc}); "
                "savestates and resets need SkyEmu on this machine, allowed to write there"
            ) from exc
        try:
            image = path.read_bytes()
        except FileNotFoundError:
            raise SkyEmuError(
                f"SkyEmu at {self.client.url} saved a state to {path} on its side, which is not on this "
                "machine: savestates and resets need SkyEmu on this machine (same filesystem)"
            ) from None
        self._remember(hashlib.sha1(image).hexdigest(), path)
        return image

    def _image_file(self, image: bytes) -> Path:
        """A file holding `image` that SkyEmu can `/load` (written once, then reused)."""
        key = hashlib.sha1(image).hexdigest()
        path = self._images.get(key)
        if path is None or not path.is_file():
            path = self._folder / f"state-{key}.png"
            atomic_write_bytes(path, image)
        self._remember(key, path)
        return path

    def _remember(self, key: str, path: Path) -> None:
        self._images[key] = path
        self._images.move_to_end(key)
        while len(self._images) > IMAGE_CACHE:
            _, old = self._images.popitem(last=False)
            old.unlink(missing_ok=True)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Close the connection; end SkyEmu if this backend started it; delete temp files."""
        if self._closed:
            return
        self._closed = True
        self.client.close()
        if self.process is not None:
            self.process.stop()
        elif self._own_folder:
            shutil.rmtree(self._folder, ignore_errors=True)


def encode_value(value: int, type_: str) -> bytes:
    """Raw bytes of a stable-retro typed value (`<u2`, `|i1`, `>n4` BCD...), the inverse of
    `decode_value`.

    >>> encode_value(0x1234, "<u2"), encode_value(-1, "|i1"), encode_value(1234, ">n2")
    (b'4\\x12', b'\\xff', b'\\x124')
    """
    order: Literal["big", "little"] = "big" if type_[0] == ">" else "little"
    kind, size = type_[1], int(type_[2])
    if kind == "n":
        digits = f"{value % 10 ** (2 * size):0{2 * size}d}"
        raw = bytes(int(digits[i]) << 4 | int(digits[i + 1]) for i in range(0, 2 * size, 2))
        return raw if order == "big" else raw[::-1]
    return (value & ((1 << (8 * size)) - 1)).to_bytes(size, order)
