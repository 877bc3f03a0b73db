"""`WatchServer`: the read-only web app of `metabonk watch` (Starlette on uvicorn, in a thread).

What it serves: the page (static files in this package: no CDN, nothing built at install), a
WebSocket with every env's newest JPEG and overlay (`LiveHub`), the run's curves and state, and
the replays under its root directory (`metabonk_gym.watch.replays`). Why these rules: it runs
beside a training job, so it binds 127.0.0.1 unless told otherwise, answers only requests whose
`Host` names where it listens (DNS rebinding: a web page's own name pointed at 127.0.0.1 gets
421), wants a token from any other host (the printed URL carries it; none: 401, a wrong one: 403;
at least `MIN_TOKEN_CHARS` characters), answers GET only, serves files only from inside its root
(anything else: 404), caps every file it reads, serves the root's files sandboxed (an HTML page
there runs in an origin of its own and never sees the token), and caps connections, viewers,
header sizes and the time to send them, incoming message sizes and each viewer's bandwidth. With
`publish=True` it also takes frames from envs in other processes of the job (`/publish`,
`metabonk_gym.vector.publish`): only with its key (`publish_key`, a secret of its own, never the
page's token), and their overlays name no file the server would read.

>>> parse_address("8765"), parse_address("0.0.0.0:9000")
(('127.0.0.1', 8765), ('0.0.0.0', 9000))
>>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0")
(True, False)
>>> host_allowed("localhost:8765", "127.0.0.1"), host_allowed("evil.example:8765", "127.0.0.1")
(True, False)
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import secrets
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from metabonk_gym.errors import WatchError as WatchError  # re-exported
from metabonk_gym.memory.graph import KnowledgeGraph
from metabonk_gym.memory.report import render_map, summary
from metabonk_gym.training.explore_archive import ArchiveError
from metabonk_gym.vector.publish import MAX_MESSAGE, unpack_published
from metabonk_gym.vector.view import encode_jpeg
from metabonk_gym.watch.archivemap import archive_map
from metabonk_gym.watch.hub import LiveHub
from metabonk_gym.watch.remote import Publishers, RemoteSource
from metabonk_gym.watch.replays import (
    DatasetView,
    TooLargeError,
    confined,
    decisions,
    inside,
    inside_file,
    run_state,
    scalars,
    scan,
)

if TYPE_CHECKING:
    from starlette.exceptions import HTTPException
    from starlette.responses import Response

COOKIE = "metabonk_watch_token"
STATIC_FILES = {"app.js": "text/javascript", "style.css": "text/css", "index.html": "text/html"}
#: Defaults of the caps (see `WatchServer`).
MAX_CONNECTIONS = 32
MAX_VIEWERS = 8
MAX_INCOMING_BYTES = 4096
BANDWIDTH_BYTES_S = 6_000_000
#: A request's line and headers: at most this many bytes, sent within this many seconds (an
#: idle keep-alive connection closes after `KEEP_ALIVE_S`).
MAX_HEADER_BYTES = 16384
HEADER_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5
TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
    b"content-length: 25\r\nconnection: close\r\n\r\nrequest headers too large"
)
#: The shortest token taken (`secrets.token_urlsafe(18)`, the default, has 24 characters).
MIN_TOKEN_CHARS = 16
#: Headers of every file served from the root: a page there runs sandboxed (an opaque origin:
#: no cookie, no reading the dashboard's answers), nothing is sniffed into another type.
FILE_HEADERS = {
    "content-security-policy": "sandbox allow-scripts",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def parse_address(text: str | int) -> tuple[str, int]:
    """`PORT` or `HOST:PORT` (IPv6 as `[::1]:PORT`) as (host, port); host 127.0.0.1 by default."""
    text = str(text).strip()
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise WatchError(
            f"--watch {text!r}: give PORT or HOST:PORT, e.g. 8765 or 0.0.0.0:8765"
        ) from None
    if not 0 <= number <= 65535:
        raise WatchError(f"--watch {text!r}: port {number} is not in 0..65535")
    return host, number


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_token(token: str | None, host: str) -> None:
    """Refuse a token that opens nothing or opens to a guess (`WatchError`): an empty one (on
    any host: leave it out for none on loopback), one shorter than `MIN_TOKEN_CHARS`, or one
    with characters a URL or cookie would change.

    >>> check_token(None, "127.0.0.1"); check_token("a" * 16, "0.0.0.0")
    >>> check_token("", "0.0.0.0")
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.WatchError: --token '' would let anyone in on 0.0.0.0: leave --token out for a random one, or give one of at least 16 characters
    """
    if token is None:
        return
    if not token:
        where = "" if is_loopback(host) else f" would let anyone in on {host}"
        raise WatchError(
            f"--token ''{where or ' is no token'}: leave --token out for a random one, or give "
            f"one of at least {MIN_TOKEN_CHARS} characters"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise WatchError(
            f"--token has {len(token)} characters, too few to resist guessing: give at least "
            f"{MIN_TOKEN_CHARS}, or leave --token out for a random one"
        )
    if not all(c.isascii() and (c.isalnum() or c in "-_.~") for c in token):
        raise WatchError("--token may hold only letters, digits and - _ . ~ (it goes in URLs)")


def _host_name(value: str) -> str:
    """The name of a `Host` header (no port, no brackets, lower case, no final dot)."""
    value = value.strip().lower()
    if value.startswith("["):
        name = value[1:].partition("]")[0]
    elif value.count(":") == 1:
        name = value.partition(":")[0]
    else:
        name = value
    return name.rstrip(".")


def host_names(host: str, extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The names a request's `Host` may give for a server bound to `host` (beside an IP
    address of it, see `host_allowed`): `localhost`, the bound name, and on a bind beyond
    loopback this machine's name; `extra`: names the user allows (a DNS name, a proxy's)."""
    names = {"localhost", _host_name(host)}
    if not is_loopback(host):
        with contextlib.suppress(OSError):
            names.add(socket.gethostname().lower())
    return frozenset(n for n in names | {_host_name(e) for e in extra} if n)


def host_allowed(value: str, bound: str, names: frozenset[str] | None = None) -> bool:
    """Whether a request's `Host` header names the server bound to `bound`: a name of
    `host_names` or an IP address it answers on (any one for a wildcard bind, a loopback one
    for a loopback bind). A web page's own name never passes: DNS rebinding gets nothing."""
    name = _host_name(value)
    if name in (names if names is not None else host_names(bound)):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if bound in ("", "0.0.0.0", "::"):
        return True
    if is_loopback(bound):
        return address.is_loopback
    with contextlib.suppress(ValueError):
        return address == ipaddress.ip_address(bound)
    return False


def pack_frame(index: int, seq: int, jpeg: bytes) -> bytes:
    """One frame of a live binary message: u16 env, u32 sequence number, u32 length, the JPEG
    (little-endian); a message holds one or more.

    >>> unpack_frames(pack_frame(3, 7, b"ab") + pack_frame(4, 1, b"c"))
    [(3, 7, b'ab'), (4, 1, b'c')]
    """
    return struct.pack("<HII", index, seq & 0xFFFFFFFF, len(jpeg)) + jpeg


def unpack_frames(message: bytes) -> list[tuple[int, int, bytes]]:
    """The (env, sequence number, JPEG) records of a live binary message."""
    out, offset = [], 0
    while offset + 10 <= len(message):
        index, seq, size = struct.unpack_from("<HII", message, offset)
        out.append((index, seq, message[offset + 10 : offset + 10 + size]))
        offset += 10 + size
    return out


def _static(name: str) -> bytes:
    return (resources.files("metabonk_gym.watch") / "static" / name).read_bytes()


#: A route's handler: the request in, a response out (`WatchServer._routes`).
Endpoint = Callable[[Any], Awaitable["Response"]]


def _http_error(status: int, text: str) -> HTTPException:
    from starlette.exceptions import HTTPException

    return HTTPException(status, text)


def _not_found() -> HTTPException:
    return _http_error(404, "not found")


def _json(data: Any, loose: bool = False) -> Response:
    """`data` as JSON; `loose`: what JSON cannot hold (a path, a date) as its text."""
    from starlette.responses import JSONResponse

    return JSONResponse(json.loads(json.dumps(data, default=str)) if loose else data)


def _jpeg(data: bytes, no_store: bool = False) -> Response:
    from starlette.responses import Response

    headers = {"cache-control": "no-store"} if no_store else None
    return Response(data, media_type="image/jpeg", headers=headers)


def _query_ints(request: Any, *names: str) -> list[int]:
    """The query's integers `names` (0 where missing; not one: 400)."""
    try:
        return [int(request.query_params.get(n, "0")) for n in names]
    except ValueError:
        raise _http_error(400, "episode and step are integers") from None


def _train_state(base: Path) -> dict[str, Any]:
    """The training view's data: the runs under `base`, their state and curves."""
    found = scan(base)
    out: dict[str, Any] = {"runs": run_state(base, found["runs"], found["pbt"])}
    try:
        out["scalars"] = scalars(base, found["tensorboard"])
    except ImportError:
        out["scalars"], out["error"] = {}, "tensorboard is not installed"
    return out


class _Gate:
    """ASGI middleware: the Host check, the token check (`/publish` checks its own key) and
    the connection cap."""

    def __init__(
        self, app: Any, token: str | None, max_connections: int, host: str, names: frozenset[str]
    ) -> None:
        self.app = app
        self.token = token
        self.max_connections = max_connections
        self.host = host
        self.names = names
        self.active = 0

    def _host_ok(self, scope: dict[str, Any]) -> bool:
        hosts = [value for name, value in scope.get("headers", []) if name == b"host"]
        return len(hosts) == 1 and host_allowed(hosts[0].decode("latin-1"), self.host, self.names)

    def _given(self, scope: dict[str, Any]) -> str | None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if query.get("token"):
            return query["token"][0]
        for name, value in scope.get("headers", []):
            if name == b"cookie":
                cookie: SimpleCookie = SimpleCookie()
                with contextlib.suppress(Exception):
                    cookie.load(value.decode("latin-1"))
                if COOKIE in cookie:
                    return cookie[COOKIE].value
        return None

    async def _refuse(self, scope: dict[str, Any], send: Any, status: int, text: str) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4000 + status})
            return
        body = text.encode()
        headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self._host_ok(scope):
            await self._refuse(
                scope, send, 421, "this dashboard answers only to the host names it listens on"
            )
            return
        if self.token is not None and scope.get("path") != "/publish":
            given = self._given(scope)
            if given is None:
                await self._refuse(
                    scope, send, 401, "a token is needed: open the URL printed by metabonk"
                )
                return
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                await self._refuse(scope, send, 403, "wrong token")
                return
        if self.active >= self.max_connections:
            await self._refuse(scope, send, 503, "too many connections")
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1


def guarded_h11(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol with limits before any request is read: a connection that has not
    sent a whole request line and headers `header_timeout_s` after it opened (or after its last
    answer) is closed, so half-open and idle sockets cannot pile up, and one that sends more
    than `MAX_HEADER_BYTES` before its headers end gets 431 and is closed (h11's own limit
    counts only what it has not parsed yet)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _pending = 0  # bytes received since the last request's headers

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._sync()

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:
                self._pending += len(data)
                if self._pending > MAX_HEADER_BYTES:
                    self._cancel()
                    self.transport.write(TOO_LARGE)
                    self.transport.close()
                    return
            super().data_received(data)
            self._sync()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._sync()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel()
            super().connection_lost(exc)

        def _waiting(self) -> bool:
            """Whether the connection owes a request's headers (and is still this protocol's:
            an upgraded WebSocket is not)."""
            transport = self.transport
            return (
                transport is not None
                and transport.get_protocol() is self
                and not transport.is_closing()
                and self.conn.their_state is h11.IDLE
            )

        def _sync(self) -> None:
            if not self._waiting():
                self._cancel()
                if self.conn.their_state is not h11.IDLE:
                    self._pending = 0
            elif self._deadline is None:  # (more bytes do not move the deadline)
                self._deadline = self.loop.call_later(header_timeout_s, self._expire)

        def _cancel(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if self._waiting():
                self.transport.close()

    return GuardedH11


class WatchServer:
    """The dashboard and replay viewer (see the module docstring).

    Args:
        root: the directory whose runs and replays are served (None: live view only; one
            that does not exist yet, a new run's, is served once it does).
        hub: the live envs of this process (None: replays only).
        host, port: where to listen (port 0: any free port); 127.0.0.1 by default.
        token: the access token; None: none on loopback, a random one on any other host.
        max_connections: concurrent requests and sockets (publishers' come on top).
        max_viewers: concurrent live streams.
        bandwidth: bytes per second of frames sent to one viewer at most.
        publish: take frames from the job's other processes (`/publish`, with `publish_key`);
            their envs join `hub`'s after its own.
        allowed_hosts: host names the `Host` header may give beside those of `host_names`
            (a DNS name of this machine, a proxy's).
        header_timeout_s: seconds a connection has to send a request's headers.
    """

    def __init__(
        self,
        root: str | Path | None = None,
        hub: LiveHub | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        max_connections: int = MAX_CONNECTIONS,
        max_viewers: int = MAX_VIEWERS,
        bandwidth: int = BANDWIDTH_BYTES_S,
        publish: bool = False,
        allowed_hosts: tuple[str, ...] = (),
        header_timeout_s: float = HEADER_TIMEOUT_S,
    ) -> None:
        check_token(token, host)
        self.root = Path(root).expanduser().resolve() if root is not None else None
        if self.root is not None and self.root.exists() and not self.root.is_dir():
            raise WatchError(f"{root} is not a directory")  # (a run dir may come later)
        self.hub = hub
        self.host = host
        self.port = int(port)
        if token is None and not is_loopback(host):
            token = secrets.token_urlsafe(18)
        self.token = token
        self.host_names = host_names(host, tuple(allowed_hosts))
        self.header_timeout_s = float(header_timeout_s)
        self.max_viewers = int(max_viewers)
        self.bandwidth = int(bandwidth)
        self.max_connections = int(max_connections)
        self.publishers: Publishers | None = None
        self.publish_key: str | None = None
        if publish and hub is not None:
            self.publishers = Publishers()
            self.publish_key = secrets.token_urlsafe(24)  # never the page's token
            own, publishers = hub.sources, self.publishers
            hub.sources = lambda: [*own(), *publishers.sources()]
        self._datasets: dict[str, DatasetView] = {}
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.app = self._build()

    # --------------------------------------------------------------------------------- routes
    # A route is a path and an async method that takes the request. Each `_*_routes` method
    # lists one group's routes beside its handlers; `_routes` joins the groups (paths do not
    # overlap, so their order is free) and `_build` makes the app. Handlers answer with
    # `_json`, `_jpeg` or a starlette response and refuse with `_not_found`/`_http_error`.
    def _build(self) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route, WebSocketRoute

        routes: list[Any] = [Route(path, endpoint) for path, endpoint in self._routes()]
        routes += [WebSocketRoute("/ws", self._stream), WebSocketRoute("/publish", self._publish)]
        app = Starlette(routes=routes)
        return _Gate(app, self.token, self._connection_cap(), self.host, self.host_names)

    def _routes(self) -> list[tuple[str, Endpoint]]:
        """Every HTTP route, group by group."""
        return [
            *self._page_routes(),
            *self._live_routes(),
            *self._run_routes(),
            *self._dataset_routes(),
            *self._memory_routes(),
        ]

    def _path(self, request: Any) -> Path | None:
        rel = request.query_params.get("path", "")
        if self.root is None or not self.root.is_dir():
            return None
        return self.root if rel in ("", ".") else inside(self.root, rel)

    # The page: its HTML (which takes the token into a cookie), its static files, what it shows.
    def _page_routes(self) -> list[tuple[str, Endpoint]]:
        return [
            ("/", self._index),
            ("/static/{name}", self._static_file),
            ("/api/info", self._info),
        ]

    async def _index(self, request: Any) -> Response:
        from starlette.responses import Response

        response = Response(_static("index.html"), media_type="text/html")
        given = request.query_params.get("token")
        if given:
            response.set_cookie(COOKIE, given, httponly=True, samesite="strict")
        response.headers["cache-control"] = "no-store"
        response.headers["referrer-policy"] = "no-referrer"  # (its URL may hold the token)
        return response

    async def _static_file(self, request: Any) -> Response:
        from starlette.responses import Response

        name = request.path_params["name"]
        if name not in STATIC_FILES:
            raise _not_found()
        return Response(_static(name), media_type=STATIC_FILES[name])

    async def _info(self, request: Any) -> Response:
        return _json(
            {
                "live": self.hub is not None,
                "label": self.hub.label if self.hub is not None else "",
                "root": self.root.name if self.root is not None else None,
                "replays": self.root is not None,
            }
        )

    # The live envs of `hub` (404 without one): their state, frames, timelines, model calls, map.
    def _live_routes(self) -> list[tuple[str, Endpoint]]:
        return [
            ("/api/live", self._live),
            ("/api/live/frame/{i:int}", self._live_frame),
            ("/api/live/timeline/{i:int}", self._timeline),
            ("/api/live/timeline/{i:int}/{e:int}", self._timeline_frame),
            ("/api/live/calls/{i:int}", self._calls),
            ("/api/live/calls/{i:int}/frame", self._call_frame),
            ("/api/map", self._world_map),
        ]

    def _live_hub(self) -> LiveHub:
        if self.hub is None:
            raise _not_found()
        return self.hub

    async def _live(self, request: Any) -> Response:
        return _json(self._live_hub().snapshot())

    async def _live_frame(self, request: Any) -> Response:
        _, jpeg = self._live_hub().frame(request.path_params["i"])
        if not jpeg:
            raise _not_found()
        return _jpeg(jpeg, no_store=True)

    async def _timeline(self, request: Any) -> Response:
        return _json(self._live_hub().timeline(request.path_params["i"]))

    async def _timeline_frame(self, request: Any) -> Response:
        params = request.path_params
        jpeg = self._live_hub().timeline_frame(params["i"], params["e"])
        if not jpeg:
            raise _not_found()
        return _jpeg(jpeg)

    async def _calls(self, request: Any) -> Response:
        records = await asyncio.to_thread(self._live_hub().decisions, request.path_params["i"])
        return _json(records, loose=True)

    async def _call_frame(self, request: Any) -> Response:
        from starlette.responses import FileResponse

        log = self._live_hub().decision_log(request.path_params["i"])
        rel = request.query_params.get("file", "")
        path = inside(Path(log["folder"]), rel) if log is not None else None
        if path is None or not path.is_file() or path.suffix != ".png":
            raise _not_found()
        return FileResponse(path, media_type="image/png")

    async def _world_map(self, request: Any) -> Response:
        return _json(self._live_hub().world_map())

    # The root directory's runs (404 without one): what is there, training curves, model
    # calls, and its files (served sandboxed).
    def _run_routes(self) -> list[tuple[str, Endpoint]]:
        return [
            ("/api/scan", self._scan),
            ("/api/train", self._train),
            ("/api/decisions", self._decisions),
            ("/api/archive", self._archive),
            ("/files/{path:path}", self._files),
        ]

    def _root_dir(self) -> Path:
        if self.root is None or not self.root.is_dir():
            raise _not_found()
        return self.root

    async def _scan(self, request: Any) -> Response:
        return _json(await asyncio.to_thread(scan, self._root_dir()))

    async def _train(self, request: Any) -> Response:
        return _json(await asyncio.to_thread(_train_state, self._root_dir()))

    async def _decisions(self, request: Any) -> Response:
        rel = request.query_params.get("path", "")
        try:
            records = await asyncio.to_thread(decisions, self._root_dir(), rel)
        except (FileNotFoundError, NotADirectoryError):
            raise _not_found() from None
        except TooLargeError as exc:
            raise _http_error(413, str(exc)) from None
        return _json(records, loose=True)

    async def _archive(self, request: Any) -> Response:
        """An explorer archive's cells on the world map (`watch.archivemap`)."""
        rel = request.query_params.get("path", "")
        try:
            return _json(await asyncio.to_thread(archive_map, self._root_dir(), rel))
        except FileNotFoundError:
            raise _not_found() from None
        except TooLargeError as exc:
            raise _http_error(413, str(exc)) from None
        except ArchiveError as exc:
            raise _http_error(422, str(exc)[:400]) from None

    async def _files(self, request: Any) -> Response:
        from starlette.responses import FileResponse, RedirectResponse

        path = inside_file(self._root_dir(), request.path_params["path"])
        if path is None:
            raise _not_found()
        given = request.query_params.get("token")
        if given:  # a page must not read the token from its own URL: the cookie carries it
            response: Response = RedirectResponse(request.url.path, status_code=303)
            response.set_cookie(COOKIE, given, httponly=True, samesite="strict")
        else:
            response = FileResponse(path)
        response.headers.update(FILE_HEADERS)
        return response

    # A recorded Minari dataset under the root (`?path=`): its episodes, a step, a frame.
    def _dataset_routes(self) -> list[tuple[str, Endpoint]]:
        return [
            ("/api/dataset", self._dataset_episodes),
            ("/api/dataset/step", self._dataset_step),
            ("/api/dataset/frame", self._dataset_frame),
        ]

    def _dataset(self, request: Any) -> DatasetView:
        """The dataset at `?path=` (the last four opened stay open)."""
        folder = self._path(request)
        if folder is None or not (folder / "data").is_dir():
            raise _not_found()
        key = str(folder)
        if key not in self._datasets:
            if self.root is None or not confined(self.root, folder / "data"):
                raise _not_found()  # (a file in it links out of the root)
            if len(self._datasets) >= 4:
                self._datasets.pop(next(iter(self._datasets)))
            try:
                self._datasets[key] = DatasetView(folder)
            except TooLargeError as exc:
                raise _http_error(413, str(exc)) from None
        return self._datasets[key]

    async def _dataset_episodes(self, request: Any) -> Response:
        view = await asyncio.to_thread(self._dataset, request)
        return _json({"episodes": await asyncio.to_thread(view.episodes)})

    async def _dataset_step(self, request: Any) -> Response:
        view = await asyncio.to_thread(self._dataset, request)
        episode, step = _query_ints(request, "episode", "step")
        try:
            data = await asyncio.to_thread(view.step, episode, step)
        except IndexError:
            raise _not_found() from None
        return _json(data)

    async def _dataset_frame(self, request: Any) -> Response:
        view = await asyncio.to_thread(self._dataset, request)
        episode, step = _query_ints(request, "episode", "step")
        try:
            image = await asyncio.to_thread(view.frame, episode, step)
        except IndexError:
            raise _not_found() from None
        if image is None:
            raise _not_found()
        return _jpeg(await asyncio.to_thread(encode_jpeg, image))

    # A knowledge graph under the root (`?path=`, opened read-only): its summary and its map.
    def _memory_routes(self) -> list[tuple[str, Endpoint]]:
        return [("/api/memory", self._memory), ("/api/memory/map", self._memory_map)]

    def _with_graph(self, request: Any, read: Callable[[Any], Any]) -> Any:
        """`read(graph)` on the graph at `?path=`, closed after."""
        path = self._path(request)
        if path is None or self.root is None or not confined(self.root, path):
            raise _not_found()
        graph = KnowledgeGraph(str(path), read_only=True)
        try:
            return read(graph)
        finally:
            with contextlib.suppress(Exception):
                graph.close()

    async def _memory(self, request: Any) -> Response:
        return _json(await asyncio.to_thread(self._with_graph, request, summary), loose=True)

    async def _memory_map(self, request: Any) -> Response:
        def draw(graph: Any) -> bytes:
            return encode_jpeg(render_map(graph), 90)

        return _jpeg(await asyncio.to_thread(self._with_graph, request, draw))

    async def _stream(self, websocket: Any) -> None:
        """Every env's newest frame at the view's rate within the bandwidth cap (binary
        messages of `pack_frame` records), and the overlays (text: JSON) four times a second."""
        from starlette.websockets import WebSocketDisconnect

        hub = self.hub
        if hub is None or hub.viewers >= self.max_viewers:
            await websocket.close(code=1013)
            return
        await websocket.accept()
        hub.connect()
        sent: dict[int, int] = {}
        budget, last = float(self.bandwidth), time.monotonic()
        next_state = 0.0
        period = 1.0 / hub.fps

        viewer = id(websocket)

        async def drain() -> None:
            # read-only: the page may only say which env it looks at closely ({"focus": i or
            # null}: whole frames for it); anything else is read and dropped
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    raise WebSocketDisconnect(message.get("code", 1000))
                size = len(message.get("text") or "") + len(message.get("bytes") or b"")
                if size > MAX_INCOMING_BYTES:  # (the socket takes publishers' frames too)
                    await websocket.close(code=1009)
                    raise WebSocketDisconnect(1009)
                with contextlib.suppress(ValueError, TypeError, AttributeError):
                    focus = json.loads(message.get("text") or "null")["focus"]
                    hub.set_focus(viewer, None if focus is None else int(focus))

        reader = asyncio.create_task(drain())
        try:
            while not reader.done():
                now = time.monotonic()
                budget = min(float(self.bandwidth), budget + (now - last) * self.bandwidth)
                last = now
                if now >= next_state:
                    await websocket.send_text(json.dumps(hub.snapshot(), default=str))
                    next_state = now + 0.25
                batch = []  # every new frame in one message: per-message work is per tick
                for index in range(len(hub.envs)):
                    seq, jpeg = hub.frame(index)
                    if not jpeg or sent.get(index) == seq or budget < len(jpeg):
                        continue
                    batch.append(pack_frame(index, seq, jpeg))
                    sent[index] = seq
                    budget -= len(jpeg)
                if batch:
                    await websocket.send_bytes(b"".join(batch))
                await asyncio.sleep(period / 2)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        finally:
            reader.cancel()
            hub.disconnect(viewer)

    def _connection_cap(self) -> int:
        """Connections at once: the page's, and the publishers' beside them."""
        publishers = self.publishers.limit if self.publishers is not None else 0
        return self.max_connections + publishers

    async def _publish(self, websocket: Any) -> None:
        """Frames from the envs of another process of the job (`metabonk_gym.vector.publish`):
        its first message names it, then `{"envs": n}` and binary frames; this side tells it
        when to sample (`RemoteSource.control`, sent when it changes)."""
        from starlette.websockets import WebSocketDisconnect

        given = websocket.query_params.get("token") or ""
        key, group, hub = self.publish_key, self.publishers, self.hub
        if key is None or group is None or hub is None:
            await websocket.close(code=4404)
            return
        if not hmac.compare_digest(given.encode(), key.encode()):
            await websocket.close(code=4403)
            return
        await websocket.accept()
        try:
            hello = json.loads(await asyncio.wait_for(websocket.receive_text(), 10.0))
            label = str(hello.get("label", ""))
        except (asyncio.TimeoutError, ValueError, TypeError, AttributeError, KeyError):
            await websocket.close(code=1008)
            return
        except (WebSocketDisconnect, RuntimeError):
            return
        source = group.add(label)
        if source is None:
            await websocket.close(code=1013)
            return

        async def steer(source: RemoteSource) -> None:
            sent: dict[str, Any] | None = None
            while True:
                control = source.control(hub.fps)
                if control != sent:
                    await websocket.send_text(json.dumps(control))
                    sent = control
                await asyncio.sleep(0.2)

        steering = asyncio.create_task(steer(source))
        try:
            while not steering.done():
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                if message.get("bytes") is not None:
                    with contextlib.suppress(ValueError):
                        source.ingest(*unpack_published(message["bytes"]))
                elif message.get("text") is not None:
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        source.set_envs(int(json.loads(message["text"])["envs"]))
        except (WebSocketDisconnect, RuntimeError, OSError, KeyError):
            pass
        finally:
            steering.cancel()
            group.remove(source)

    # ------------------------------------------------------------------------------ running
    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "[::]") else host
        query = f"/?token={self.token}" if self.token else "/"
        return f"http://{shown}:{self.port}{query}"

    def _config(self) -> Any:
        import uvicorn

        return uvicorn.Config(
            self.app,
            host=self.host,
            port=self.port,
            log_level="warning",
            access_log=False,
            ws_max_size=MAX_MESSAGE if self.publishers is not None else MAX_INCOMING_BYTES,
            # h11 (httptools has no header size limit), with a deadline for the headers; open
            # sockets are not capped here (idle ones would turn every request into a 503): the
            # gate caps requests in progress, the deadline the sockets that send nothing
            http=guarded_h11(self.header_timeout_s),
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
            timeout_keep_alive=KEEP_ALIVE_S,
            lifespan="off",
        )

    def start(self, timeout_s: float = 20.0) -> WatchServer:
        """Serve in a background thread (a daemon); returns once it listens."""
        import uvicorn

        self._server = uvicorn.Server(self._config())
        self._server.install_signal_handlers = lambda: None  # the main program owns Ctrl-C
        self._thread = threading.Thread(target=self._server.run, name="metabonk-watch", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise WatchError(f"the watch server could not listen on {self.host}:{self.port}")
            if time.monotonic() > deadline:
                raise WatchError(f"the watch server did not start within {timeout_s:g} s")
            time.sleep(0.02)
        sockets = [s for server in self._server.servers for s in server.sockets]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        if self.hub is not None:
            self.hub.start()
        return self

    def stop(self) -> None:
        """Stop serving (open streams are closed)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self.hub is not None:
            self.hub.stop()

    def __enter__(self) -> WatchServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
