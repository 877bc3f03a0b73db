"""A thin client for SkyEmu's HTTP control server, over one keep-alive connection.

What the wire looks like (facts in docs/skyemu.md and the shared spec): every command is a GET
with parameters in the query string; text replies end with a NUL byte; `/status` is JSON without
one; unknown paths and `/read_byte` without addresses answer 404. SkyEmu's HTTP library
(cpp-httplib 0.11) sorts parameters by key, drops a repeated identical `key=value` pair (so the
same address twice in one `/read_byte` gives one byte back), refuses request lines over 8192
bytes, and closes a connection after 5 requests or 5 idle seconds. The client deduplicates and
chunks addresses, and reopens the connection transparently, retrying once only when a reused
connection turned out to be closed before the request reached the server.

>>> [len(c) for c in SkyEmuClient.address_chunks(list(range(1000)), 450)]
[450, 450, 100]
"""

from __future__ import annotations

import http.client
import json
import re
import select
import socket
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from metabonk_gym.skyemu.errors import (
    START_HINT,
    SkyEmuCommandFailedError,
    SkyEmuNotFoundError,
    SkyEmuProtocolError,
    SkyEmuUnreachableError,
)

#: Addresses per `/read_byte` and pairs per `/write_byte`: well under cpp-httplib's 8192-byte
#: request-line limit (`addr=02000000&` is 14 bytes).
MAX_ADDRESSES_PER_REQUEST = 450
#: Largest reply accepted: screens are ~150 KB, state images a few MB.
MAX_REPLY_BYTES = 64 * 1024 * 1024
#: cpp-httplib closes idle keep-alive connections after 5 s; reconnect a little before that.
IDLE_RECONNECT_S = 4.0


class SkyEmuClient:
    """One SkyEmu HTTP control server: raw commands, NUL-stripped text, decoded errors.

    Args:
        url: the server, e.g. `http://127.0.0.1:8080` (loopback only).
        timeout: seconds to wait for one reply.
    """

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"skyemu_url must look like 'http://127.0.0.1:8080', not {url!r}")
        shown = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        self.url = f"http://{shown}:{parts.port or 80}"
        self.host = parts.hostname
        self.port = parts.port or 80
        self.timeout = float(timeout)
        self._conn: http.client.HTTPConnection | None = None
        self._last_used = 0.0
        self._on_connection = 0
        self.requests = 0  # total sent, for tests and benchmarks
        self.requests_by_endpoint: Counter[str] = Counter()

    # ------------------------------------------------------------------ transport
    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(
        self, endpoint: str, params: Iterable[tuple[str, str]] = ()
    ) -> tuple[int, str, bytes]:
        """GET `endpoint?params` and return (status, content type, body)."""
        query = "&".join(
            f"{k}={v}"
            if k.isalnum() and v.isalnum()
            else f"{quote(k, safe='')}={quote(v, safe='/:')}"
            for k, v in params
        )
        target = f"{endpoint}?{query}" if query else endpoint
        for attempt in (0, 1):
            reused = self._prepare()
            conn = self._conn
            assert conn is not None
            try:
                conn.request("GET", target)
                response = conn.getresponse()
                body = self._read_body(response, endpoint)
            except (ConnectionRefusedError, socket.gaierror) as exc:
                self.close()
                raise SkyEmuUnreachableError(
                    f"cannot reach SkyEmu at {self.url} ({exc}). {START_HINT}"
                ) from exc
            except TimeoutError as exc:
                self.close()
                raise SkyEmuUnreachableError(
                    f"SkyEmu at {self.url} did not answer {endpoint} within {self.timeout:.0f} s; "
                    "is it paused in a dialog, or busy? Raise skyemu_timeout= for slow machines"
                ) from exc
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self.close()
                if reused and attempt == 0:
                    continue  # the server had closed the idle connection: the request never ran
                raise SkyEmuUnreachableError(
                    f"SkyEmu at {self.url} closed the connection during {endpoint} ({exc!r}); "
                    f"did it exit or crash? {START_HINT}"
                ) from exc
            except (http.client.HTTPException, OSError) as exc:
                self.close()
                raise SkyEmuUnreachableError(
                    f"HTTP error talking to SkyEmu at {self.url}: {exc!r}"
                ) from exc
            self.requests += 1
            self.requests_by_endpoint[endpoint] += 1
            self._last_used = time.monotonic()
            self._on_connection += 1
            if response.will_close:
                self.close()
            return response.status, response.getheader("Content-Type", ""), body
        raise AssertionError("unreachable")

    def _prepare(self) -> bool:
        """Open a connection if needed; True when an already-used connection is reused."""
        conn = self._conn
        if conn is not None and conn.sock is not None and self._on_connection > 0:
            idle = time.monotonic() - self._last_used
            readable = select.select([conn.sock], [], [], 0)[0]
            if idle > IDLE_RECONNECT_S or readable:  # readable while idle = closed by the server
                self.close()
                conn = None
            else:
                return True
        if conn is None or conn.sock is None:
            self.close()
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                conn.connect()
            except (ConnectionRefusedError, socket.gaierror, TimeoutError, OSError) as exc:
                raise SkyEmuUnreachableError(
                    f"cannot reach SkyEmu at {self.url} ({exc}). {START_HINT}"
                ) from exc
            assert conn.sock is not None
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._conn = conn
            self._on_connection = 0
        return False

    @staticmethod
    def _read_body(response: http.client.HTTPResponse, endpoint: str) -> bytes:
        length = response.getheader("Content-Length")
        if length is not None and (not length.isdigit() or int(length) > MAX_REPLY_BYTES):
            response.close()
            raise SkyEmuProtocolError(
                f"{endpoint} announced a reply of {length!r} bytes (limit {MAX_REPLY_BYTES})"
            )
        body = response.read(MAX_REPLY_BYTES + 1)
        if len(body) > MAX_REPLY_BYTES:
            raise SkyEmuProtocolError(f"{endpoint} sent more than {MAX_REPLY_BYTES} bytes")
        return body

    # ------------------------------------------------------------------ replies
    def call(self, endpoint: str, params: Iterable[tuple[str, str]] = ()) -> bytes:
        """A command's body; 404 and other statuses become errors naming the endpoint."""
        status, _, body = self.request(endpoint, params)
        if status == 404:
            raise SkyEmuNotFoundError(
                f"SkyEmu at {self.url} answered 404 to {endpoint}: either this is not SkyEmu's HTTP "
                "control server, or its build has no such endpoint (SkyEmu also answers 404 to "
                "/read_byte without addresses). Use a SkyEmu build with the HTTP control server "
                "(upstream docs/HTTP_CONTROL_SERVER.md)"
            )
        if status != 200:
            raise SkyEmuProtocolError(
                f"SkyEmu at {self.url} answered HTTP {status} to {endpoint}: {body[:200]!r}"
            )
        return body

    def text(self, endpoint: str, params: Iterable[tuple[str, str]] = ()) -> str:
        """A text reply without its trailing NUL byte."""
        body = self.call(endpoint, params)
        if body.endswith(b"\0"):
            body = body[:-1]
        try:
            return body.decode("ascii")
        except UnicodeDecodeError:
            raise SkyEmuProtocolError(f"{endpoint} sent a non-text reply: {body[:80]!r}") from None

    def ok(self, endpoint: str, params: Iterable[tuple[str, str]] = ()) -> None:
        """Run a command that answers `ok`; `failed` replies raise SkyEmuCommandFailedError."""
        params = list(params)
        reply = self.text(endpoint, params)
        if reply == "ok":
            return
        if reply.lower().startswith("failed"):
            shown = "&".join(f"{k}={v}" for k, v in params)
            raise SkyEmuCommandFailedError(
                f"SkyEmu at {self.url} replied {reply!r} to {endpoint}?{shown}"
            )
        raise SkyEmuProtocolError(
            f"SkyEmu at {self.url} replied {reply!r} to {endpoint}, expected 'ok'"
        )

    # ------------------------------------------------------------------ commands
    def ping(self) -> None:
        """Check that a SkyEmu HTTP control server answers (`pong`)."""
        reply = self.text("/ping")
        if reply != "pong":
            raise SkyEmuProtocolError(
                f"{self.url}/ping answered {reply[:80]!r}, not 'pong': is this SkyEmu's HTTP control server?"
            )

    def status(self) -> dict[str, Any]:
        """`/status` as a dict (SkyEmu does not escape paths in it; a regex reads those)."""
        body = self.call("/status").rstrip(b"\0").decode("utf-8", "replace")
        try:
            value = json.loads(body)
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
        out: dict[str, Any] = {}
        for key in ("emulator", "run-mode", "rom-path", "save-path"):
            match = re.search(rf'"{key}"\s*:\s*"(.*)",?\s*$', body, re.MULTILINE)
            if match:
                out[key] = match.group(1)
        loaded = re.search(r'"rom-loaded"\s*:\s*(true|false)', body)
        if loaded is None:
            raise SkyEmuProtocolError(
                f"{self.url}/status is not SkyEmu's status JSON: {body[:200]!r}"
            )
        out["rom-loaded"] = loaded.group(1) == "true"
        return out

    def step(self, frames: int) -> None:
        """Run exactly `frames` frames (only the last is drawn), then pause."""
        if frames < 1:
            raise ValueError(f"frames must be >= 1, not {frames}")
        self.ok("/step", [("frames", str(int(frames)))])

    def set_inputs(self, values: dict[str, int]) -> None:
        """Set SkyEmu inputs (`A`, `Up`, `Start`...) to 0/1; they persist for later frames."""
        self.ok("/input", [(name, str(int(value))) for name, value in values.items()])

    def read(self, addresses: Sequence[int]) -> bytes:
        """One byte per address, in order, in as few `/read_byte` calls as the URL limit allows."""
        unique = list(dict.fromkeys(addresses))  # SkyEmu drops repeated addr= pairs
        values: dict[int, int] = {}
        for chunk in self.address_chunks(unique, MAX_ADDRESSES_PER_REQUEST):
            reply = self.text("/read_byte", [("addr", f"{a:08x}") for a in chunk])
            if len(reply) != 2 * len(chunk):
                raise SkyEmuProtocolError(
                    f"/read_byte of {len(chunk)} addresses answered {len(reply)} hex digits: {reply[:40]!r}"
                )
            try:
                values.update(zip(chunk, bytes.fromhex(reply)))
            except ValueError:
                raise SkyEmuProtocolError(
                    f"/read_byte answered non-hex text {reply[:40]!r}"
                ) from None
        return bytes(values[a] for a in addresses)

    def write(self, pairs: Sequence[tuple[int, int]]) -> None:
        """Write bytes: (address, value) pairs (SkyEmu applies them in address order)."""
        for chunk in self.address_chunks(list(pairs), MAX_ADDRESSES_PER_REQUEST):
            self.ok("/write_byte", [(f"{a:08x}", f"{v & 0xFF:02x}") for a, v in chunk])

    def screen_bmp(self) -> bytes:
        """The current frame as SkyEmu's BMP."""
        status, content_type, body = self.request("/screen", [("format", "bmp")])
        if status == 200 and body[:2] == b"BM":
            return body
        reply = body.rstrip(b"\0").decode("ascii", "replace")
        if status == 200 and reply.lower().startswith("failed"):
            raise SkyEmuCommandFailedError(f"SkyEmu at {self.url} answered {reply!r} to /screen")
        if status == 404:
            self.call("/screen")  # raises the 404 error
        raise SkyEmuProtocolError(
            f"/screen?format=bmp answered HTTP {status} {content_type}: {body[:40]!r}"
        )

    def save(self, path: str) -> None:
        """Save a state image to `path` on SkyEmu's side."""
        self.ok("/save", [("path", path)])

    def load(self, path: str) -> None:
        """Load a state image from `path` on SkyEmu's side (SkyEmu then runs one frame)."""
        self.ok("/load", [("path", path)])

    def load_rom(self, path: str) -> None:
        """Load (power on) the ROM at `path` on SkyEmu's side, paused."""
        reply = self.text("/load_rom", [("path", path), ("pause", "1")])
        if reply != "ok":
            raise SkyEmuCommandFailedError(
                f"SkyEmu at {self.url} answered {reply!r} to /load_rom?path={path} (and has unloaded its ROM)"
            )

    @staticmethod
    def address_chunks(items: list[Any], size: int) -> list[list[Any]]:
        """`items` cut into lists of at most `size`."""
        return [items[i : i + size] for i in range(0, len(items), size)]
