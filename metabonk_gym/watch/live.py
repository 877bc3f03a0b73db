"""`LiveProcess`: the live dashboard in a process of its own, fed by the envs' shared view slots.

Why another process: the sampler and the web server are Python threads; in the training
process they would hold its GIL while its loop waits on the env workers, and every wake-up of
the loop would wait for them (measured: half the env steps with 16 envs and one viewer). Here the
training process keeps one small thread that, twice a second, sends the names of the open view
blocks (`metabonk_gym.vector.view`, named shared memory) over a pipe; the dashboard's process
attaches to them by name and does everything else: asking for frames, reading them, serving.
Envs in the job's other processes (a process pool's, Ray's) reach it over its `/publish` socket:
`start` puts its address and key in this process's environment (`metabonk_gym.vector.publish`),
which those processes inherit.

>>> LiveProcess("127.0.0.1", 0).url
''
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from metabonk_gym.process import die_with_parent
from metabonk_gym.vector.publish import PUBLISH_ENV, publish_environ
from metabonk_gym.vector.view import ViewBuffers, request_views, view_sources
from metabonk_gym.watch.hub import LiveHub
from metabonk_gym.watch.server import WatchError, WatchServer

#: How often the training process tells the dashboard which view blocks are open.
ANNOUNCE_S = 0.5
START_TIMEOUT_S = 60.0


def _serve(
    conn: Any,
    parent: int,
    host: str,
    port: int,
    root: str | None,
    label: str,
    token: str | None,
    fps: float,
) -> None:
    """The dashboard's process: attach to the announced view blocks, sample them, serve."""
    die_with_parent(parent)
    attached: dict[str, ViewBuffers] = {}
    order: list[str] = []

    def sources() -> list[ViewBuffers]:
        return [attached[name] for name in order if name in attached]

    hub = LiveHub(fps=fps, label=label, sources=sources)
    try:
        server = WatchServer(root, hub, host=host, port=port, token=token, publish=True).start()
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", server.port, server.url, server.token, server.publish_key))
    try:
        while True:
            if not conn.poll(1.0):
                continue
            announced = conn.recv()  # [(name, num_envs), ...] of the open blocks, oldest first
            names = [name for name, _ in announced]
            for name, n in announced:
                if name not in attached:
                    with contextlib.suppress(FileNotFoundError, OSError):
                        attached[name] = ViewBuffers.attach(name, int(n))
            order[:] = names
            for name in [k for k in attached if k not in names]:
                attached.pop(name).release()
    except (EOFError, OSError, KeyboardInterrupt):  # the training process is gone
        pass
    finally:
        server.stop()


class LiveProcess:
    """`--watch`: request views in this process and run the dashboard in a child process.

    Args:
        host, port: where the dashboard listens (port 0: any free port).
        root: the run directory for the Training and Replays tabs (None: live only).
        label: what the page calls this run.
        token: the access token (None: none on loopback, a random one elsewhere).
        fps: frames asked of each env per second while a viewer is connected.
    """

    def __init__(
        self,
        host: str,
        port: int,
        root: str | Path | None = None,
        label: str = "",
        token: str | None = None,
        fps: float = 10.0,
    ) -> None:
        self.host, self.port = host, int(port)
        self.root = str(root) if root is not None else None
        self.label, self.token, self.fps = label, token, float(fps)
        self.url = ""
        self._process: Any = None
        self._conn: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._environ: dict[str, str] = {}

    def start(self) -> LiveProcess:
        """Start the dashboard; returns once it listens (its URL in `url`)."""
        request_views(True)
        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding threads
        ours, theirs = ctx.Pipe()
        args = (theirs, os.getpid(), self.host, self.port, self.root, self.label, self.token)
        self._process = ctx.Process(
            target=_serve, args=(*args, self.fps), name="metabonk-watch", daemon=True
        )
        self._process.start()
        theirs.close()
        self._conn = ours
        if not ours.poll(START_TIMEOUT_S):
            self.stop()
            raise WatchError(f"the watch dashboard did not start within {START_TIMEOUT_S:g} s")
        try:
            message = ours.recv()
        except EOFError:
            self.stop()
            raise WatchError("the watch dashboard's process exited before it listened") from None
        if message[0] != "ready":
            self.stop()
            raise WatchError(f"the watch dashboard could not start: {message[1]}")
        _, self.port, self.url, self.token, key = message
        # the job's other processes (pools, Ray workers) send their envs' frames here
        self._environ = publish_environ(self.host, self.port, key or secrets.token_urlsafe(18))
        os.environ.update(self._environ)
        self._thread = threading.Thread(target=self._announce, name="metabonk-watch-announce")
        self._thread.daemon = True
        self._thread.start()
        return self

    def _announce(self) -> None:
        last: list[tuple[str, int]] | None = None
        while not self._stop.wait(ANNOUNCE_S if last is not None else 0.05):
            current = [(src.name, src.num_envs) for src in view_sources()]
            if current != last:
                try:
                    self._conn.send(current)
                except (OSError, ValueError):  # the dashboard is gone; training goes on
                    return
                last = current

    def stop(self) -> None:
        """Stop the dashboard (training goes on without it)."""
        self._stop.set()
        if self._environ and os.environ.get(PUBLISH_ENV) == self._environ[PUBLISH_ENV]:
            del os.environ[PUBLISH_ENV]
        if self._thread is not None:
            self._thread.join(2.0)
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
        if self._process is not None:
            self._process.join(5.0)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(2.0)

    def alive(self) -> bool:
        """Whether the dashboard's process runs."""
        return self._process is not None and self._process.is_alive()

    def __enter__(self) -> LiveProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        time.sleep(0)
