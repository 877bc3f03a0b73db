"""``bonklink-sim``: a reference BonkLink v1 game server around the arena game.

It is a stand-in for Megabonk with the BonkLink plugin, for tests, benchmarks and offline
training, and serves the protocol exactly as the plugin does: TCP on loopback, one client at a
time (a new client replaces the old), ``TCP_NODELAY``, no handshake.

* ``mode="realtime"`` mirrors the plugin's pacing: a tick every ``1/update_hz`` s whether or not
  an action came; each tick applies at most one pending action (else neutral input) and pushes
  one packet, with a frame on every ``update_hz/jpeg_hz``-th tick.
* ``mode="lockstep"`` is for fast training: a packet (with a frame) on connect, then exactly one
  tick and one packet per action received; frames on the same tick cadence.

It sends real health, enemies and level-up options, plus this project's ``MBST`` trailer (kills,
XP, level; ``stats=False`` turns it off). ``plugin_stubs=True`` sends the deployed plugin's
constants instead (health 100/100, no enemies, no options, no extension trailer).
Nothing is pickled, on the wire or off it: :class:`SimProcess` passes JSON to its child.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from metabonk_gym.bonklink import DEFAULT_PORT
from metabonk_gym.bonklink.codec import (
    NEUTRAL_ACTION,
    Action,
    BonkLinkProtocolError,
    encode_frame_jpeg,
    encode_frame_raw,
    encode_packet,
)
from metabonk_gym.bonklink.game import ArenaConfig, ArenaGame
from metabonk_gym.bonklink.player import make_player
from metabonk_gym.bonklink.render import FrameRenderer, Look
from metabonk_gym.bonklink.transport import ActionReader, ConnectionClosed
from metabonk_gym.process import ChildProcess, ChildProcessFailed

__all__ = [
    "BonkLinkSim",
    "FrameFormat",
    "SimMode",
    "SimProcess",
    "SimStats",
    "serve_here",
    "serve_instances",
]

SimMode = Literal["realtime", "lockstep"]
FrameFormat = Literal["jpeg", "raw_rgb"]


@dataclass
class SimStats:
    """Counters of one server. ``response_times`` (realtime mode) holds, for each action, the
    seconds from sending the packet it answers to its arrival: the client's round trip."""

    clients: int = 0
    packets: int = 0
    frames: int = 0
    actions: int = 0
    dropped_clients: int = 0
    response_times: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))

    def as_dict(self) -> dict[str, Any]:
        """Plain numbers and lists (for a control pipe or a report)."""
        return {
            "clients": self.clients,
            "packets": self.packets,
            "frames": self.frames,
            "actions": self.actions,
            "dropped_clients": self.dropped_clients,
            "response_times": list(self.response_times),
        }


#: Realtime mode keeps at most this many unplayed actions (about 2 s at 60 Hz).
MAX_PENDING_ACTIONS = 128


class BonkLinkSim:
    """The server. ``start()`` serves on a daemon thread and returns the bound port (``port=0``
    picks a free one); ``serve_forever()`` serves on the calling thread; ``stop()`` ends both."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        host: str = "127.0.0.1",
        mode: SimMode = "realtime",
        frame_format: FrameFormat = "jpeg",
        plugin_stubs: bool = False,
        update_hz: int = 60,
        jpeg_hz: int = 10,
        seed: int | None = None,
        stats: bool = True,
        input_snapshot: bool = False,
        jpeg_quality: int = 75,
        width: int = 320,
        height: int = 180,
        send_timeout: float = 2.0,
        human: str | None = None,
        speed: float = 1.0,
        look: Look = "plain",
    ) -> None:
        """Configure the server (nothing is bound until :meth:`bind` or :meth:`start`).

        Args:
            port: TCP port to listen on (0: a free one; read it from :attr:`port`).
            host: address to bind (loopback, as the plugin does).
            mode: ``"realtime"`` (ticks at ``update_hz``) or ``"lockstep"`` (a tick per action).
            frame_format: ``"jpeg"`` or ``"raw_rgb"`` frames (the plugin's FrameFormat).
            plugin_stubs: send the deployed plugin's constants instead of the game's values.
            update_hz: ticks per second (the plugin's UpdateHz).
            jpeg_hz: frames per second (the plugin's JpegHz); 0 sends no frames.
            seed: seed of the game (None: fresh entropy).
            stats: append the ``MBST`` trailer (kills, XP, level).
            input_snapshot: append the ``HINP`` trailer (the applied input).
            jpeg_quality: JPEG quality of the frames.
            width: frame width in pixels (the plugin's capture size).
            height: frame height in pixels.
            send_timeout: seconds a client may stall a send before it is dropped.
            human: a scripted person at the game's keyboard (``"scripted"``,
                :mod:`.player`): realtime only; its input is applied on every tick without a
                pending client action and reported in the ``HINP`` trailer when
                ``input_snapshot`` is on, as the plugin reports a real player's.
            speed: realtime ticks run this many times faster than ``update_hz`` (the game's
                clock still advances ``1/update_hz`` a tick): recording a scripted human fast.
            look: how frames are drawn (:mod:`.render`): ``"plain"`` or ``"detailed"`` (the
                player's input visible as a game shows it: for learning from video).
        """
        if mode not in ("realtime", "lockstep"):
            raise ValueError(f"mode must be 'realtime' or 'lockstep', not {mode!r}")
        if frame_format not in ("jpeg", "raw_rgb"):
            raise ValueError(f"frame_format must be 'jpeg' or 'raw_rgb', not {frame_format!r}")
        if update_hz <= 0 or jpeg_hz < 0:
            raise ValueError("update_hz must be positive and jpeg_hz non-negative")
        if not 0.0 < speed <= 1000.0:
            raise ValueError(f"speed must be in (0, 1000], not {speed}")
        if human is not None and mode != "realtime":
            raise ValueError("a human plays in realtime mode (the client sends no actions)")
        self.player = make_player(human, seed) if human is not None else None
        self.speed = float(speed)
        self.host = host
        self.mode = mode
        self.frame_format = frame_format
        self.plugin_stubs = plugin_stubs
        self.send_stats = stats
        self.input_snapshot = input_snapshot
        self.update_hz = update_hz
        self.jpeg_quality = jpeg_quality
        self.send_timeout = send_timeout
        #: Ticks between frames; 0 disables frames (the plugin's ``EnableJpeg = false``).
        self.frame_every = max(1, round(update_hz / jpeg_hz)) if jpeg_hz else 0
        config = ArenaConfig(update_hz=update_hz, capture_width=width, capture_height=height)
        self.game = ArenaGame(seed=seed, config=config)
        self.renderer = FrameRenderer(width, height, look=look)
        self.stats = SimStats()
        self._requested_port = port
        self._listener: socket.socket | None = None
        self._client: socket.socket | None = None
        self._reader: ActionReader | None = None
        self._selector: selectors.BaseSelector | None = None
        # Actions waiting for a realtime tick. Capped: a client that sends faster than UpdateHz
        # loses its oldest actions instead of growing the server's memory without bound.
        self._pending: deque[Action] = deque(maxlen=MAX_PENDING_ACTIONS)
        self._sent_at: deque[float] = deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        """The bound port (binds first if needed)."""
        return self.bind()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port) (binds first if needed)."""
        self.bind()
        assert self._listener is not None
        host, port = self._listener.getsockname()[:2]
        return host, port

    def bind(self) -> int:
        """Create the listening socket (loopback by default) and return its port."""
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self._requested_port))
            listener.listen(4)
            listener.setblocking(False)
            self._listener = listener
        return self._listener.getsockname()[1]

    def start(self) -> int:
        """Serve on a daemon thread; return the bound port."""
        port = self.bind()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self.serve_forever, name=f"bonklink-sim:{port}", daemon=True
            )
            self._thread.start()
        return port

    def stop(self) -> None:
        """Stop serving and close every socket (idempotent)."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._thread is None or not self._thread.is_alive():
            self._wake_r.close()
            self._wake_w.close()
        self._close_all()

    def __enter__(self) -> BonkLinkSim:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self, duration: float | None = None) -> None:
        """Serve on this thread until :meth:`stop` (or for ``duration`` seconds)."""
        self.bind()
        assert self._listener is not None
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "accept")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._selector = selector
        end = None if duration is None else time.monotonic() + duration
        try:
            if self.mode == "lockstep":
                self._serve_lockstep(selector, end)
            else:
                self._serve_realtime(selector, end)
        finally:
            self._close_all()

    def _close_all(self) -> None:
        with self._lock:
            self._drop_client(count=False)
            if self._selector is not None:
                with contextlib.suppress(Exception):
                    self._selector.close()
                self._selector = None
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    # ------------------------------------------------------------------ loops

    def _serve_lockstep(self, selector: selectors.BaseSelector, end: float | None) -> None:
        while not self._stop.is_set():
            timeout = None if end is None else end - time.monotonic()
            if timeout is not None and timeout <= 0:
                return
            for key, _ in selector.select(timeout):
                if key.data == "accept":
                    if self._accept():  # a frame only on its beat, as the plugin's captures
                        self._send_packet(NEUTRAL_ACTION, with_frame=self._frame_due())
                elif key.data == "client":
                    for action in self._read_actions():
                        self.game.tick(action)
                        self._send_packet(action, self._frame_due())
                        if self._client is None:
                            break

    def _serve_realtime(self, selector: selectors.BaseSelector, end: float | None) -> None:
        period = 1.0 / (self.update_hz * self.speed)
        next_tick = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if end is not None and now >= end:
                return
            if now < next_tick:
                for key, _ in selector.select(next_tick - now):
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "client":
                        self._pending.extend(self._read_actions())
                continue
            # The plugin's network thread: at most one pending action per tick, else neutral.
            if self._pending:
                action = self._pending.popleft()
            elif self.player is not None:
                action = self.player.act(self.game)
            else:
                action = NEUTRAL_ACTION
            self.game.tick(action)
            if self._client is not None:
                self._send_packet(action, self._frame_due())
            next_tick += period
            if time.monotonic() - next_tick > 0.25:  # far behind (a stall): do not burst
                next_tick = time.monotonic()

    def _frame_due(self) -> bool:
        return self.frame_every > 0 and self.game.ticks % self.frame_every == 0

    # ------------------------------------------------------------------ clients

    def _accept(self) -> bool:
        assert self._listener is not None and self._selector is not None
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return False
        self._drop_client(count=False)  # one client at a time: the new one replaces the old
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.send_timeout)
        self._client = sock
        self._reader = ActionReader(sock)
        self._selector.register(sock, selectors.EVENT_READ, "client")
        self._pending.clear()
        self._sent_at.clear()
        self.stats.clients += 1
        return True

    def _drop_client(self, count: bool = True) -> None:
        sock, self._client, self._reader = self._client, None, None
        if sock is None:
            return
        if count:
            self.stats.dropped_clients += 1
        if self._selector is not None:
            with contextlib.suppress(Exception):
                self._selector.unregister(sock)
        sock.close()

    def _read_actions(self) -> list[Action]:
        """Read what the client sent; return the complete actions (drops a misbehaving client)."""
        reader = self._reader
        if reader is None:
            return []
        actions: list[Action] = []
        try:
            reader.fill()
            arrived = time.perf_counter()
            while (action := reader.pop()) is not None:
                actions.append(action)
                if self._sent_at:
                    self.stats.response_times.append(arrived - self._sent_at.popleft())
        except (ConnectionClosed, OSError, BonkLinkProtocolError):
            self._drop_client()
        self.stats.actions += len(actions)
        return actions

    def _send_packet(self, action: Action, with_frame: bool) -> None:
        sock = self._client
        if sock is None:
            return
        game = self.game
        snapshot = game.snapshot_of(action) if self.input_snapshot else None
        state = game.state(plugin_stubs=self.plugin_stubs, stats=self.send_stats, snapshot=snapshot)
        frame = b""
        if with_frame:
            image = self.renderer.render(game)
            if self.frame_format == "jpeg":
                frame = encode_frame_jpeg(image, self.jpeg_quality)
            else:
                frame = encode_frame_raw(image)
            self.stats.frames += 1
        packet = encode_packet(state, frame)
        try:
            sock.sendall(packet)
        except OSError:  # gone, or not reading for send_timeout seconds
            self._drop_client()
            return
        self._sent_at.append(time.perf_counter())
        self.stats.packets += 1


# ---------------------------------------------------------------------- out of process


class SimProcess:
    """A :class:`BonkLinkSim` in a child Python process, so that it does not share the GIL with
    the client: used by the benchmark, training's sim swarm and ``bonklink-sim --instances n``.

    The child is ``python -m metabonk_gym.bonklink.sim`` with its keyword arguments as JSON, a
    :class:`~metabonk_gym.process.ChildProcess` (it dies with this process). It prints the bound
    port as a JSON line, and its stats as another when it gets SIGTERM; both go to a log file in
    a temp dir that :meth:`stop` removes. (A subprocess, not multiprocessing: nothing is pickled
    and no main module is re-imported.)

    >>> with SimProcess(port=0, mode="lockstep", jpeg_hz=0) as sim:
    ...     sim.port > 0
    True
    >>> sorted(sim.stats)[:3]
    ['actions', 'clients', 'dropped_clients']
    """

    def __init__(self, **sim_kwargs: Any) -> None:
        """Keep the :class:`BonkLinkSim` keyword arguments; :meth:`start` starts the child.

        Args:
            sim_kwargs: passed to :class:`BonkLinkSim` in the child (JSON values only).
        """
        self.sim_kwargs = sim_kwargs
        self.port: int | None = None
        self.stats: dict[str, Any] = {}
        self._child: ChildProcess | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    def _lines(self) -> list[dict[str, Any]]:
        """The JSON objects the child printed so far (its whole log: stats can be long)."""
        if self._folder is None:
            return []
        try:
            text = (Path(self._folder.name) / "sim.log").read_text("utf-8", "replace")
        except OSError:
            return []
        found = []
        for line in text.splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                reply = json.loads(line)
                if isinstance(reply, dict):
                    found.append(reply)
        return found

    def _reported(self) -> bool:
        return any("port" in reply or "error" in reply for reply in self._lines())

    def start(self, timeout: float = 60.0) -> int:
        """Start the child and return the port it bound (``OSError`` if it cannot serve)."""
        self._folder = tempfile.TemporaryDirectory(prefix="metabonk-bonklink-sim-")
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._child = ChildProcess.start(
                [sys.executable, "-m", "metabonk_gym.bonklink.sim", json.dumps(self.sim_kwargs)],
                name="bonklink-sim",
                env=env,
                log_path=Path(self._folder.name) / "sim.log",
            )
            self._child.wait_ready(self._reported, timeout_s=timeout)
        except ChildProcessFailed as exc:
            self.stop()
            raise OSError(f"bonklink-sim process failed to start: {exc}") from exc
        reply = next(r for r in self._lines() if "port" in r or "error" in r)
        if not isinstance(reply.get("port"), int):
            self.stop()
            raise OSError(f"bonklink-sim process failed to start: {reply.get('error')}")
        self.port = reply["port"]
        return reply["port"]

    def stop(self, timeout: float = 10.0) -> dict[str, Any]:
        """Stop the child (SIGTERM: it prints its stats and exits); return its stats (empty if
        it could not report). Idempotent."""
        child, self._child = self._child, None
        if child is not None:
            child.stop(timeout_s=timeout)
            stats = [reply for reply in self._lines() if "packets" in reply]
            self.stats = stats[-1] if stats else {}
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None
        return self.stats

    def __enter__(self) -> SimProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_instances(
    port: int,
    instances: int,
    seed: int | None,
    seconds: float | None,
    announce: Callable[[int], None],
    **sim_kwargs: Any,
) -> None:
    """Serve `instances` games, each a :class:`SimProcess` on port `port + i` (seeded `seed + i`),
    for `seconds` (None: until Ctrl-C, which ends them quietly); `announce(bound_port)` as each
    starts. An instance that cannot start raises an `OSError` naming its port; every instance
    started stops before this returns or raises (``bonklink-sim --instances n``)."""
    procs: list[SimProcess] = []
    try:
        for i in range(instances):
            proc = SimProcess(port=port + i, seed=None if seed is None else seed + i, **sim_kwargs)
            try:
                bound = proc.start()
            except OSError as exc:
                raise OSError(f"instance on port {port + i}: {exc}") from exc
            procs.append(proc)
            announce(bound)
        end = None if seconds is None else time.monotonic() + seconds
        while end is None or time.monotonic() < end:
            time.sleep(0.2 if end is None else max(0.0, min(0.2, end - time.monotonic())))
    except KeyboardInterrupt:
        pass
    finally:
        for proc in procs:
            proc.stop()


def serve_here(sim: BonkLinkSim, seconds: float | None) -> None:
    """Serve `sim` (already bound) on this thread for `seconds` (None: until Ctrl-C, which ends
    it quietly), then stop it."""
    try:
        sim.serve_forever(seconds)
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()


def _child_main(argv: list[str]) -> int:
    """Entry of :class:`SimProcess`'s child: serve until SIGTERM (or ^C), then print stats."""
    kwargs = json.loads(argv[0]) if argv else {}
    sim = BonkLinkSim(**kwargs)
    try:
        port = sim.start()
    except OSError as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(json.dumps({"port": port}), flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        while not done.wait(0.5):
            pass
    sim.stop()
    print(json.dumps(sim.stats.as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_child_main(sys.argv[1:]))
