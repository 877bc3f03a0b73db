"""The SkyEmu test peer: the embedded mGBA core behind SkyEmu's HTTP control server, byte for byte.

SkyEmu cannot be installed here, so the SkyEmu backend is tested against this stand-in. It
lives in `gba` because it runs the embedded core: `metabonk_gym.skyemu` is the client side, which
`gba`'s SkyEmu backend imports, and imports nothing of `gba` (no package cycle). It answers like upstream SkyEmu's `se_hcs_callback` behind cpp-httplib 0.11.4 (the versions the
shared spec was checked against):

- text replies end with a NUL byte, `Content-Type: text/html`; `/status` is JSON without one
  (`application/json`); unknown paths, and `/read_byte` without addresses, answer 404 with an
  empty body; the 5th request on a connection, or one idle for 5 s, closes it;
- query parameters are parsed like cpp-httplib (a repeated identical `key=value` pair is
  dropped, `+` is a space) and processed in key-sorted order;
- `/step?frames=N` runs N frames with the inputs set by `/input`, which persist; `/load`
  restores a state image and then emulates one frame; `/save` and `/load` answer `failed` on
  error; `/load_rom` answers `Failed to load ROM` and unloads the ROM on error;
- `/screen?format=bmp` is stb_image_write's 32-bit BMP; png and jpg are there too.

Differences, all outside what the backend uses: state images are PNGs of the screen carrying
the mGBA core state in a private chunk (SkyEmu encodes its own state in the pixels; each only
loads its own kind); memory outside the mapped regions reads 0 (no open bus); I/O writes poke
the register memory without side effects; `/run` never runs in real time; there are no cheats.

Only one emulator fits in a process, so run the peer in its own process:

    python -m metabonk_gym.gba.skyemu_peer http_server 0 ROM.gba   # SkyEmu's command line
    python -m metabonk_gym.gba.skyemu_peer --port 0 --rom ROM.gba   # the same
    metabonk skyemu-peer --port 8080                                   # bundled BonkQuest

It prints `Starting HCS: http://localhost:PORT` (as SkyEmu does) once it listens on loopback.

>>> parse_query("addr=02000000&addr=02000000&map=0&addr=0a")
[('addr', '02000000'), ('addr', '0a'), ('map', '0')]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import re
import socket
import socketserver
import struct
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.gba.backends.embedded import RetroCore
from metabonk_gym.process import ChildProcess, ChildProcessFailed
from metabonk_gym.skyemu.bmp import encode_bmp
from metabonk_gym.utils import atomic_write_bytes

#: cpp-httplib 0.11.4's keep-alive limits and request-line cap.
KEEPALIVE_MAX = 5
KEEPALIVE_TIMEOUT_S = 5
URI_MAX = 8192
MAX_HEADERS = 100
_STATUS_TEXT = {200: "OK", 400: "Bad Request", 404: "Not Found", 414: "URI Too Long"}
_METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"}
#: SkyEmu's input names (se_keybind_names) that have plain names; GBA uses the first twelve.
KEYBIND_NAMES: tuple[str, ...] = (
    "A", "B", "X", "Y", "Up", "Down", "Left", "Right", "L", "R", "Start", "Select",
    "Fold Screen (NDS)", "Tap Screen (NDS)",
    "Capture State 0", "Restore State 0", "Capture State 1", "Restore State 1",
    "Capture State 2", "Restore State 2", "Capture State 3", "Restore State 3",
    "Reset Game", "Turbo A", "Turbo B", "Turbo X", "Turbo Y", "Turbo L", "Turbo R",
    "Solar Sensor+", "Solar Sensor-", "Toggle Full Screen",
)  # fmt: skip
#: KEYINPUT bit of each GBA button name.
GBA_KEY_BITS = {
    "A": 0,
    "B": 1,
    "Select": 2,
    "Start": 3,
    "Right": 4,
    "Left": 5,
    "Up": 6,
    "Down": 7,
    "R": 8,
    "L": 9,
}
STATE_CHUNK = b"mbSt"
STATE_TAG = b"metabonk-skyemu-peer/1\0"
REWIND_CAPACITY = 4096


# ---------------------------------------------------------------------- C-like parsing
def decode_url(text: str, plus_to_space: bool) -> str:
    """cpp-httplib's `decode_url`: %XX escapes (bytes, kept as latin-1) and `+` as a space."""
    out = bytearray()
    raw = text.encode("latin-1", "replace")
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == 0x25 and _is_hex(raw[i + 1 : i + 3]):
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
            continue
        out.append(0x20 if c == 0x2B and plus_to_space else c)
        i += 1
    return out.decode("latin-1")


def _is_hex(pair: bytes) -> bool:
    return len(pair) == 2 and all(chr(b) in "0123456789abcdefABCDEF" for b in pair)


def parse_query(query: str) -> list[tuple[str, str]]:
    """cpp-httplib's `parse_query_text` followed by the std::multimap's key order."""
    seen: set[str] = set()
    params: list[tuple[str, str]] = []
    for kv in query.split("&"):
        if kv in seen:
            continue
        seen.add(kv)
        key, val = "", ""
        for piece in kv.split("="):
            if not piece:
                continue  # cpp-httplib's split() skips empty pieces
            if not key:
                key = piece
            else:
                val = piece
        if key:
            params.append((decode_url(key, True), decode_url(val, True)))
    return sorted(
        params, key=lambda kv: kv[0].encode("latin-1")
    )  # stable: repeats keep their order


def c_atoi(text: str) -> int:
    """C's atoi: optional spaces and sign, then digits; 0 when there are none."""
    s = text.lstrip(" \t\n\r\f\v")
    sign = -1 if s.startswith("-") else 1
    if s.startswith(("+", "-")):
        s = s[1:]
    digits = ""
    for ch in s:
        if not ch.isdigit():
            break
        digits += ch
    value = sign * int(digits) if digits else 0
    return max(-(2**31), min(2**31 - 1, value))


def c_atof(text: str) -> float:
    """C's atof for the values `/input` gets (a leading number, else 0)."""
    s = text.strip()
    for end in range(len(s), 0, -1):
        try:
            return float(s[:end])
        except ValueError:
            continue
    return 0.0


def hex_to_int(text: str) -> int:
    """SkyEmu's `se_hex_string_to_int`: every character shifts, only hex digits add (64-bit)."""
    num = 0
    for ch in text:
        num = (num << 4) & 0xFFFFFFFFFFFFFFFF
        if ch in "0123456789abcdefABCDEF":
            num += int(ch, 16)
    return num


# ---------------------------------------------------------------------- PNG with a state
def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def state_png(rgb: np.ndarray, payload: bytes) -> bytes:
    """A PNG of the screen carrying `payload` in a private ancillary chunk."""
    height, width = rgb.shape[:2]
    rows = b"".join(b"\0" + rgb[y].tobytes() for y in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + _png_chunk(STATE_CHUNK, STATE_TAG + zlib.compress(payload, 1))
        + _png_chunk(b"IDAT", zlib.compress(rows, 1))
        + _png_chunk(b"IEND", b"")
    )


def state_from_png(data: bytes) -> bytes | None:
    """The payload `state_png` stored, or None if `data` is not such a PNG."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return None
    at = 8
    while at + 12 <= len(data):
        (length,) = struct.unpack_from(">I", data, at)
        kind = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        if kind == STATE_CHUNK and body.startswith(STATE_TAG):
            try:
                return zlib.decompress(body[len(STATE_TAG) :])
            except zlib.error:
                return None
        at += 12 + length
    return None


# ---------------------------------------------------------------------- the emulator side
class PeerEmulator:
    """What `se_hcs_callback` does, on the embedded mGBA core (see the module docstring)."""

    def __init__(self, rom_path: str | Path) -> None:
        """Load `rom_path` (a .gba file) into the embedded core, paused as headless SkyEmu is."""
        self.lock = threading.Lock()  # SkyEmu serialises requests with emulation
        self.core: Any = None
        self.rom = b""
        self.rom_path = ""
        self.rom_loaded = False
        self.run_mode = "PAUSE"
        self.inputs = dict.fromkeys(KEYBIND_NAMES, 0.0)
        if not self.load_rom(str(rom_path)):
            raise SystemExit(f"cannot load ROM {rom_path}")
        self.run_mode = "PAUSE"  # headless SkyEmu starts paused

    # ROM ------------------------------------------------------------------
    def load_rom(self, path: str) -> bool:
        try:
            data = Path(path).read_bytes()
        except OSError:
            data = b""
        if not data:
            self.rom_loaded = False
            return False
        if self.core is not None and data == self.rom:
            self.core.power_on()
        else:
            if self.core is not None:
                self.core.close()
                self.core = None
            try:
                self.core = RetroCore(path)
            except Exception:
                self.rom_loaded = False
                return False
        self.rom, self.rom_path, self.rom_loaded = data, str(Path(path).resolve()), True
        self.run_mode = "RUN"
        return True

    # buses ----------------------------------------------------------------
    def read8(self, address: int) -> int:
        address &= 0xFFFFFFFF
        region = address >> 24
        if 0x08 <= region <= 0x0D:
            offset = address & 0x01FFFFFF
            if offset < len(self.rom):
                return self.rom[offset]
            return (address >> 1 >> (8 * (address & 1))) & 0xFF
        mapped = self._ram_address(address)
        if mapped is None or self.core is None:
            return 0
        return int(self.core.read(mapped, "|u1"))

    def write8(self, address: int, value: int) -> None:
        mapped = self._ram_address(address & 0xFFFFFFFF)
        if mapped is not None and self.core is not None:
            self.core.write(mapped, "|u1", value & 0xFF)

    @staticmethod
    def _ram_address(address: int) -> int | None:
        """The canonical address of a RAM/IO byte, with the GBA's mirrors; None if unmapped."""
        region = address >> 24
        if region == 0x02:
            return 0x02000000 | (address & 0x3FFFF)
        if region == 0x03:
            return 0x03000000 | (address & 0x7FFF)
        if region == 0x04:
            return address if address < 0x04000400 else None
        if region in (0x05, 0x07):
            return (region << 24) | (address & 0x3FF)
        if region == 0x06:
            offset = address & 0x1FFFF
            return 0x06000000 | (offset - 0x8000 if offset >= 0x18000 else offset)
        return None

    # emulation --------------------------------------------------------------
    def buttons(self) -> int:
        return sum(
            1 << bit for name, bit in GBA_KEY_BITS.items() if self.inputs.get(name, 0.0) > 0.5
        )

    def run(self, frames: int) -> None:
        if self.rom_loaded and frames > 0:
            self.core.step(frames, self.buttons())

    def screen(self) -> np.ndarray:
        return np.asarray(self.core.screen(), dtype=np.uint8)

    def save_image(self) -> bytes:
        state = self.core.save_state()
        return state_png(self.screen(), hashlib.sha1(self.rom).digest() + state)

    def load_image(self, data: bytes) -> bool:
        payload = state_from_png(data)
        if payload is None or payload[:20] != hashlib.sha1(self.rom).digest():
            return False
        try:
            self.core.load_state(payload[20:])
        except Exception:
            return False
        return True

    # the callback -------------------------------------------------------------
    def handle(self, path: str, params: list[tuple[str, str]]) -> tuple[bytes, str] | None:
        """(body, mime type) for a command, or None where SkyEmu answers 404."""
        with self.lock:
            return self._handle(path, params)

    def _handle(self, path: str, params: list[tuple[str, str]]) -> tuple[bytes, str] | None:
        text: str | None = None
        if path == "/ping":
            text = "pong"
        elif path == "/load_rom":
            for key, value in params:
                if key == "path":
                    self.load_rom(value)
                if key == "pause" and c_atoi(value):
                    self.run_mode = "PAUSE"
            text = "ok" if self.rom_loaded else "Failed to load ROM"
        elif path == "/setting":
            text = "ok" if self.rom_loaded else "Failed to load ROM"
        elif path == "/step":
            frames = 1
            for key, value in params:
                if key == "frames":
                    frames = c_atoi(value)
            self.run(1 if frames < 0 else frames)
            text = "ok"
        elif path == "/run":
            self.run_mode = "RUN"
            text = "ok"
        elif path == "/screen":
            if not self.rom_loaded:
                text = "Failed (no ROM loaded)"
            else:
                return self._screen(params)
        elif path == "/read_byte":
            digits = []
            for key, value in params:
                if key == "addr":
                    byte = self.read8(hex_to_int(value)) if self.rom_loaded else 0
                    digits.append(f"{byte:02x}")
            if not digits:
                return None  # SkyEmu returns no result: cpp-httplib answers 404
            return ("".join(digits) + "\0").encode(), "text/html"
        elif path == "/write_byte":
            for key, value in params:
                if key != "map" and self.rom_loaded:
                    self.write8(hex_to_int(key), hex_to_int(value) & 0xFF)
            text = "ok"
        elif path == "/input":
            for key, value in params:
                if key in self.inputs:
                    self.inputs[key] = c_atof(value)
            text = "ok"
        elif path == "/status":
            return self._status().encode(), "application/json"
        elif path == "/save":
            okay = False
            for key, value in params:
                if key == "path" and self.rom_loaded:
                    target = Path(value)
                    if target.parent.is_dir():  # SkyEmu fails on a missing folder
                        try:
                            atomic_write_bytes(target, self.save_image())
                            okay = True
                        except OSError:
                            pass
            text = "ok" if okay else "failed"
        elif path == "/load":
            okay = False
            for key, value in params:
                if key == "path" and self.rom_loaded:
                    with contextlib.suppress(OSError):
                        okay = self.load_image(Path(value).read_bytes()) or okay
            if okay:
                self.run(1)  # SkyEmu emulates one frame after restoring a state
            text = "ok" if okay else "failed"
        elif path == "/cheats":
            return b"No cheats enabled\0", "text/plain"
        if text is None:
            return None
        return text.encode() + b"\0", "text/html"

    def _screen(self, params: list[tuple[str, str]]) -> tuple[bytes, str]:
        embed, fmt = False, "png"
        for key, value in params:
            if key == "embed_state":
                embed = c_atoi(value) != 0
            if key == "format" and value in ("BMP", "bmp"):
                fmt = "bmp"
            if key == "format" and value in ("JPG", "jpg"):
                fmt = "jpg"
        rgb = self.screen()
        if embed:
            return self.save_image(), "image/png"
        if fmt == "bmp":
            return encode_bmp(rgb), "image/bmp"
        from PIL import Image

        buffer = io.BytesIO()
        if fmt == "jpg":
            Image.fromarray(rgb).save(buffer, format="JPEG", quality=95)
            return buffer.getvalue(), "image/jpg"
        Image.fromarray(rgb).save(buffer, format="PNG")
        return buffer.getvalue(), "image/png"

    def _status(self) -> str:
        lines = [
            "{",
            '  "emulator": "SkyEmu (metabonk-skyemu-peer)",',
            f'  "run-mode": "{self.run_mode}",',
            f'  "rom-loaded" : {"true" if self.rom_loaded else "false"},',
        ]
        if self.rom_loaded:
            lines.append(f'  "rom-path": "{self.rom_path}",')
            lines.append(f'  "save-path": "{Path(self.rom_path).with_suffix(".sav")}",')
        lines += [
            '  "rewind-info" : {',
            '    "entries-used" : 0,',
            f'    "capacity" : {REWIND_CAPACITY},',
            '    "percent_full" : 0.0',
            "  },",
            '  "inputs": {',
        ]
        items = [f'    "{name}": {value:f}' for name, value in self.inputs.items()]
        lines.append(",\n".join(items))
        lines += ["  }", "}"]
        return "\n".join(lines)


# ---------------------------------------------------------------------- HTTP, as cpp-httplib
class _Handler(socketserver.StreamRequestHandler):
    """HTTP/1.1 with cpp-httplib 0.11.4's framing, keep-alive limits and header order."""

    server: PeerServer

    def handle(self) -> None:
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connection.settimeout(KEEPALIVE_TIMEOUT_S)
        for count in range(KEEPALIVE_MAX, 0, -1):
            try:
                if not self._one(close=count == 1):
                    return
            except (TimeoutError, OSError):
                return

    def _one(self, close: bool) -> bool:
        line = self.rfile.readline(URI_MAX + 64)
        if not line:
            return False
        if len(line) > URI_MAX:
            self._respond(414, b"", "", True)
            return False
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            raw = self.rfile.readline(8192 + 2)
            if raw in (b"\r\n", b"\n", b""):
                break
            if len(headers) >= MAX_HEADERS:
                self._respond(400, b"", "", True)
                return False
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        parts = line.decode("latin-1").rstrip("\r\n").split(" ")
        parts = [p for p in parts if p]
        if not line.endswith(b"\r\n") or len(parts) != 3 or parts[0] not in _METHODS:
            self._respond(400, b"", "", True)
            return False
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            self._respond(400, b"", "", True)
            return False
        length = headers.get("content-length", "0")
        if length.isdigit() and int(length) > 0:
            self.rfile.read(min(int(length), 1 << 20))  # the pre-routing handler never sees bodies
        target = target.split("#", 1)[0]
        pieces = [p for p in target.split("?") if p]
        if len(pieces) > 2:
            self._respond(400, b"", "", True)
            return False
        path = decode_url(pieces[0] if pieces else "", False)
        params = parse_query(pieces[1]) if len(pieces) == 2 else []
        close = close or headers.get("connection", "").lower() == "close"
        result = self.server.emulator.handle(path, params)
        if result is None:
            self._respond(404, b"", "", close, head=method == "HEAD")
        else:
            self._respond(200, result[0], result[1], close, head=method == "HEAD")
        return not close

    def _respond(
        self, status: int, body: bytes, mime: str, close: bool, head: bool = False
    ) -> None:
        headers = [("Connection", "close")] if close else []
        headers.append(("Content-Length", str(len(body))))
        if body:
            headers.append(("Content-Type", mime))
        if not close:
            headers.append(("Keep-Alive", f"timeout={KEEPALIVE_TIMEOUT_S}, max={KEEPALIVE_MAX}"))
        head_text = f"HTTP/1.1 {status} {_STATUS_TEXT[status]}\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers
        )
        self.wfile.write(head_text.encode("latin-1") + b"\r\n" + (b"" if head else body))
        self.wfile.flush()


class PeerServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """The peer's HTTP server: loopback only, a thread per connection."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, emulator: PeerEmulator, port: int = 0) -> None:
        """Bind 127.0.0.1:`port` (0: a free one) for `emulator`; `serve_forever()` serves it."""
        self.emulator = emulator
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


def serve(rom: str | Path, port: int = 0, announce: Any = None) -> None:
    """Serve `rom` on `port` (0: any free port) until interrupted; print SkyEmu's start line."""
    server = PeerServer(PeerEmulator(rom), port)
    line = f"Starting HCS: http://localhost:{server.port}"
    (announce or (lambda text: print(text, flush=True)))(line)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    """`skyemu_peer http_server PORT ROM` (SkyEmu's command line) or `--port P --rom ROM`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["http_server"]:
        if len(args) != 3:
            print("usage: skyemu_peer http_server <port> <rom.gba>", file=sys.stderr)
            return 2
        serve(args[2], int(args[1]))
        return 0
    parser = argparse.ArgumentParser(
        description="SkyEmu HTTP control server stand-in on the embedded mGBA core"
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--rom", required=True, help="the .gba ROM to serve")
    opts = parser.parse_args(args)
    serve(opts.rom, opts.port)
    return 0


_START_LINE = re.compile(r"Starting HCS: http://localhost:(\d+)")


class PeerProcess:
    """The peer in a child process (one emulator per process) that dies with this one: `url`,
    then `stop()` or `with`.

    >>> from metabonk_gym.gba.integration import Integration
    >>> from metabonk_gym.skyemu.client import SkyEmuClient
    >>> with PeerProcess(Integration.bundled("BonkQuest").rom_path) as peer:
    ...     SkyEmuClient(peer.url).text("/ping")
    'pong'
    """

    def __init__(self, rom: str | Path, timeout: float = 60.0) -> None:
        """Start the peer on a free port and wait until it listens.

        Args:
            rom: the .gba ROM to serve.
            timeout: seconds to wait for its start line.
        """
        self.proc = ChildProcess.start(
            [sys.executable, "-m", "metabonk_gym.gba.skyemu_peer", "--port", "0"]
            + ["--rom", str(rom)],
            name="skyemu-peer",
        )
        self.port = 0
        try:
            self.proc.wait_ready(self._started, timeout_s=timeout)
        except ChildProcessFailed as exc:
            self.stop()
            raise RuntimeError(f"the SkyEmu peer did not start: {exc}") from exc
        self.url = f"http://127.0.0.1:{self.port}"

    def _started(self) -> bool:
        match = _START_LINE.search(self.proc.log_tail())
        if match is not None:
            self.port = int(match.group(1))
        return match is not None

    def stop(self) -> None:
        """End the peer process (idempotent)."""
        self.proc.stop(timeout_s=10.0)

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    raise SystemExit(main())
