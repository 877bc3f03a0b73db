"""Frames of envs in other processes (a process pool's, Ray's) sent to a live viewer's dashboard.

Why: `--watch` serves the envs of its own process and of its vector env's workers through named
shared memory (`metabonk_gym.vector.view`); envs that a process pool, a Ray Tune trial or an RLlib
env runner builds live in processes the dashboard never hears of, and a Ray worker may run on
another host. So `--watch` also puts the dashboard's publish address in the environment
(`PUBLISH_ENV`: a WebSocket URL, a key, the dashboard's owner process), which process pools and
Ray workers inherit (a Ray cluster gets it through the job's `runtime_env`). An env built in such
a process is tapped as any other (`ViewTap`), and the first one starts this process's
`Publisher`: a daemon thread that connects out to the dashboard (loopback unless `--watch` named
another host; the key is a secret of the dashboard's own, never its viewers' token), says how
many envs the process holds, and
then only waits: the dashboard tells it when a viewer is connected (`{"on": true, "fps": 10,
"shrink": [...]}`); from then until it is told off, at the view's rate, it sets each local env's
request byte and sends each frame that env encoded (one binary message: `pack_published`). With
nobody watching it sends nothing and the envs copy nothing. If the dashboard is unreachable or
goes away, the thread retries every few seconds and training is never touched.

>>> blob = pack_published(2, 7, b"jpeg", b'{"return":1}')
>>> unpack_published(blob)
(2, 7, b'jpeg', b'{"return":1}')
>>> target = {"url": "ws://127.0.0.1:1/publish", "key": "k", "owner": -1}
>>> publish_target({PUBLISH_ENV: json.dumps(target)})["key"]
'k'
>>> publish_target({}) is None
True
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

#: The environment variable `--watch` sets for the processes its job starts (JSON: url, key,
#: owner: the pid whose envs the dashboard already reads from shared memory).
PUBLISH_ENV = "METABONK_WATCH_PUBLISH"
#: The largest frame and overlay a publisher may send, and how many envs one process may hold.
MAX_JPEG = 256 * 1024
MAX_META = 6144
MAX_ENVS = 256
#: The largest message a publisher sends (header, JPEG, overlay) and a dashboard's control one.
MAX_MESSAGE = 14 + MAX_JPEG + MAX_META
MAX_CONTROL = 4096
#: Seconds between tries to reach the dashboard.
RETRY_S = 3.0
_HEADER = struct.Struct("<HIII")


def pack_published(index: int, seq: int, jpeg: bytes, meta: bytes) -> bytes:
    """One published frame: u16 env (in the publishing process), u32 sequence number, u32 JPEG
    length, u32 overlay length, the JPEG, the overlay JSON (little-endian)."""
    return _HEADER.pack(index, seq & 0xFFFFFFFF, len(jpeg), len(meta)) + jpeg + meta


def unpack_published(blob: bytes) -> tuple[int, int, bytes, bytes]:
    """(env, sequence number, JPEG, overlay) of a published frame; ValueError when its lengths
    do not add up or exceed the caps (`MAX_JPEG`, `MAX_META`, `MAX_ENVS`).

    >>> unpack_published(b"xx")
    Traceback (most recent call last):
    ValueError: a published frame needs a 14-byte header, not 2 bytes
    """
    if len(blob) < _HEADER.size:
        raise ValueError(f"a published frame needs a 14-byte header, not {len(blob)} bytes")
    index, seq, size, meta_size = _HEADER.unpack_from(blob)
    if index >= MAX_ENVS or size > MAX_JPEG or meta_size > MAX_META:
        raise ValueError(f"a published frame over the caps (env {index}, {size}+{meta_size} B)")
    if _HEADER.size + size + meta_size != len(blob):
        raise ValueError(f"a published frame of {len(blob)} B says {size}+{meta_size} B")
    body = blob[_HEADER.size :]
    return index, seq, body[:size], body[size:]


def publish_target(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The dashboard this process's envs publish to (`PUBLISH_ENV`), None when there is none, it
    is malformed, or this is the process whose envs the dashboard reads directly."""
    text = (os.environ if environ is None else environ).get(PUBLISH_ENV)
    if not text:
        return None
    try:
        data = json.loads(text)
        url, key, owner = str(data["url"]), str(data["key"]), int(data.get("owner", -1))
    except (ValueError, TypeError, KeyError):
        return None
    if owner == os.getpid() or not url.startswith(("ws://", "wss://")):
        return None
    return {"url": url, "key": key, "owner": owner}


def reachable_host(host: str) -> str:
    """The address other processes reach a server bound to `host` at: itself, or for a wildcard
    bind this host's outward address (no packet is sent), else loopback.

    >>> reachable_host("127.0.0.1"), reachable_host("10.1.2.3")
    ('127.0.0.1', '10.1.2.3')
    """
    if host not in ("", "0.0.0.0", "::"):
        return host
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))  # UDP connect: picks a route, sends nothing
        return str(probe.getsockname()[0])
    return "127.0.0.1"


def publish_environ(host: str, port: int, key: str, owner: int | None = None) -> dict[str, str]:
    """The environment entry that points this job's other processes at a dashboard.

    >>> publish_environ("127.0.0.1", 8765, "k", owner=1)[PUBLISH_ENV]
    '{"url": "ws://127.0.0.1:8765/publish", "key": "k", "owner": 1}'
    """
    where = reachable_host(host)
    where = f"[{where}]" if ":" in where else where
    data = {"url": f"ws://{where}:{int(port)}/publish", "key": key, "owner": owner or os.getpid()}
    return {PUBLISH_ENV: json.dumps(data)}


class Publisher:
    """This process's link to the dashboard (see the module docstring).

    Args:
        url, key: the dashboard's publish WebSocket and its key (`publish_target`).
        sources: returns this process's frame sources (`view_sources`).
        label: what the dashboard calls this process (host and pid by default).
    """

    def __init__(
        self, url: str, key: str, sources: Callable[[], list[Any]], label: str = ""
    ) -> None:
        self.url, self.key, self.sources = url, key, sources
        self.label = label or f"{socket.gethostname()} pid {os.getpid()}"
        self.sent = 0
        self.connected = False
        self.error: str | None = None
        self.sessions = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Publisher:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="metabonk-watch-publish", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._session()
            except Exception as exc:  # unreachable or gone: say so once, try again later
                if self.error is None and not self.sessions:  # (one that went: the job ends)
                    print(f"watch: cannot publish to {self.url}: {exc!r}", file=sys.stderr)
                self.error = repr(exc)
            self.connected = False
            self._stop.wait(RETRY_S)

    def _session(self) -> None:
        from websockets.sync.client import connect

        url = f"{self.url}?token={quote(self.key)}"
        with connect(
            url,
            open_timeout=10,
            close_timeout=2,
            max_size=MAX_CONTROL,
            compression=None,  # JPEGs do not deflate
            proxy=None,
        ) as ws:
            self.connected = True
            self.sessions += 1
            ws.send(json.dumps({"label": self.label, "envs": 0}))
            on, fps, shrink, count = False, 10.0, [], 0
            seqs: dict[tuple[int, int], int] = {}
            while not self._stop.is_set():
                try:
                    message = ws.recv(timeout=1.0 / fps if on else 1.0)
                except TimeoutError:
                    message = None
                if isinstance(message, str):
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        control = json.loads(message)
                        on = bool(control.get("on"))
                        fps = min(60.0, max(0.5, float(control.get("fps", fps))))
                        shrink = [int(s) for s in control.get("shrink", [])][:MAX_ENVS]
                slots = [(s, i) for s in self.sources() for i in range(s.num_envs)][:MAX_ENVS]
                if len(slots) != count:
                    count = len(slots)
                    ws.send(json.dumps({"envs": count}))
                if on:
                    self._serve(ws, slots, shrink, seqs)

    def _serve(self, ws: Any, slots: list[tuple[Any, int]], shrink: list[int], seqs: dict) -> None:
        """Send the frames that arrived since the last tick and ask every env for its next."""
        for index, (src, i) in enumerate(slots):
            key = (id(src), i)
            with contextlib.suppress(Exception):  # a source closing under us: skip it
                got = src.poll(i, seqs.get(key, 0))
                if got is not None:
                    jpeg, meta = got
                    seqs[key] = int(meta.pop("seq", 0))
                    blob = json.dumps(meta, separators=(",", ":")).encode()[:MAX_META]
                    ws.send(pack_published(index, seqs[key], jpeg[:MAX_JPEG], blob))
                    self.sent += 1
                if not src.wanted(i):
                    src.request(i, shrink[index] if index < len(shrink) else 1)


_publisher: dict[int, Publisher] = {}


def ensure_publisher(sources: Callable[[], list[Any]]) -> Publisher | None:
    """Start this process's publisher once, when `PUBLISH_ENV` points it at a dashboard."""
    target = publish_target()
    if target is None:
        return None
    pid = os.getpid()
    if pid not in _publisher:  # (a forked child starts its own)
        try:  # here, not in the thread: a fork while that thread imported would leave the
            # child a half-imported module (an RLlib runner forks its vector env's workers)
            import websockets.sync.client  # noqa: F401
        except ImportError:
            return None
        _publisher.clear()
        _publisher[pid] = Publisher(target["url"], target["key"], sources).start()
    return _publisher[pid]
