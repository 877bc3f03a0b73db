"""`LiveHub`: samples frames and overlays from this process's envs while a viewer is connected,
and keeps what the page shows (latest JPEG per env, decision timeline, map positions, heat).

Why a sampler thread: frames are asked for at the view's rate (`fps`) through each env's request
flag (`metabonk_gym.vector.view`), and only while `viewers > 0`; with nobody watching it sleeps
and the envs copy nothing. The envs hand over JPEGs they encoded themselves, so this thread only
copies bytes and reads small JSON, and yields the GIL between envs: the training loop's thread
must not wait for it.

>>> hub = LiveHub(fps=10)
>>> hub.snapshot()["envs"]
[]
>>> hub.ingest(0, np.zeros((4, 6, 3), np.uint8), {"return": 2.0, "length": 3, "info": {"hp": 3},
...     "directive": {"goal": "get key", "action": "go_to", "target": {"x": 1, "y": 2}}})
>>> snap = hub.snapshot()["envs"][0]
>>> snap["return"], snap["directive"]["goal"], len(hub.timeline(0))
(2.0, 'get key', 1)
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.think.log import LOG_NAME, DecisionLogNotFoundError, read_decisions
from metabonk_gym.vector.view import encode_jpeg, view_sources
from metabonk_gym.watch.replays import MAX_LOG_BYTES
from metabonk_gym.watch.worldmap import MapSpec, load_map_spec

#: Decisions kept per env in its timeline, and how many of them keep their frame.
TIMELINE_LEN = 200
TIMELINE_FRAMES = 40
#: Up to this many envs every frame is whole; past it, grid tiles are every other pixel.
FULL_UP_TO = 4


def _directive_key(directive: Any) -> str | None:
    if not isinstance(directive, dict):
        return None
    parts = {k: directive.get(k) for k in ("goal", "action", "target", "source", "reasoning")}
    return json.dumps(parts, sort_keys=True)


@dataclass
class EnvView:
    """What the page knows about one env."""

    jpeg: bytes = b""
    seq: int = 0
    source_seq: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    timeline: deque = field(default_factory=lambda: deque(maxlen=TIMELINE_LEN))
    timeline_frames: dict[int, bytes] = field(default_factory=dict)
    events: int = 0
    last_key: str | None = None
    position: tuple[int, int] | None = None
    updated: float = 0.0


class LiveHub:
    """Live state of the envs of this process for `WatchServer` (see the module docstring).

    Args:
        fps: frames asked of each env per second while a viewer is connected.
        quality: JPEG quality of frames handed over as arrays (envs encode their own).
        label: what the page calls this run (the command, the run directory).
        sources: returns the frame sources to sample (default: this process's, `view_sources`;
            the dashboard's own process passes the blocks it attached to).
    """

    def __init__(
        self,
        fps: float = 10.0,
        quality: int = 75,
        label: str = "",
        sources: Callable[[], list[Any]] = view_sources,
    ) -> None:
        if not fps > 0:
            raise ValueError(f"fps must be > 0, not {fps}")
        self.fps = float(fps)
        self.quality = int(quality)
        self.label = label
        self.sources = sources
        self.viewers = 0
        self.envs: list[EnvView] = []
        self.map_spec: MapSpec | None = None
        self.map_folder: str | None = None
        self.heat: Counter = Counter()
        self.frames_encoded = 0
        #: envs some viewer looks at closely (viewer id -> env): whole frames; the rest, shown
        #: as grid tiles, at every other pixel once there are more than `FULL_UP_TO` envs
        self.focus: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._slots: list[tuple[Any, int]] = []

    # viewers ----------------------------------------------------------------------------------
    def connect(self) -> None:
        with self._lock:
            self.viewers += 1

    def disconnect(self, viewer: int | None = None) -> None:
        with self._lock:
            self.viewers = max(0, self.viewers - 1)
            self.focus.pop(viewer if viewer is not None else -1, None)

    def set_focus(self, viewer: int, index: int | None) -> None:
        """Viewer `viewer` looks closely at env `index` (None: at none): whole frames for it.

        >>> hub = LiveHub(); hub.set_focus(1, 3); hub.focus
        {1: 3}
        """
        with self._lock:
            if index is None:
                self.focus.pop(viewer, None)
            else:
                self.focus[viewer] = int(index)

    # sampling ---------------------------------------------------------------------------------
    def start(self) -> LiveHub:
        """Start the sampler thread (a daemon: it never keeps the process alive)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="metabonk-watch-hub", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def _run(self) -> None:
        period = 1.0 / self.fps
        while not self._stop.is_set():
            started = time.monotonic()
            if self.viewers > 0:
                with contextlib.suppress(Exception):  # a closing engine: try again next tick
                    self.sample_once()
            self._stop.wait(max(0.005, period - (time.monotonic() - started)))

    def sample_once(self) -> int:
        """Collect the frames that arrived and ask every env for its next; returns how many."""
        slots = [(src, i) for src in self.sources() for i in range(src.num_envs)]
        if [(id(s), i) for s, i in slots] != [(id(s), i) for s, i in self._slots]:
            self._slots = slots
            with self._lock:
                while len(self.envs) < len(slots):
                    self.envs.append(EnvView())
                del self.envs[len(slots) :]
                for view in self.envs:
                    view.source_seq = 0
        got = 0
        for index, (src, i) in enumerate(slots):
            view = self.envs[index]
            result = src.poll(i, view.source_seq)
            if result is not None:
                frame, meta = result
                view.source_seq = int(meta.get("seq", 0))
                self.ingest(index, frame, meta)
                got += 1
                time.sleep(0)  # let the training loop's thread take the GIL between envs
            if not src.wanted(i):
                whole = len(slots) <= FULL_UP_TO or index in self.focus.values()
                src.request(i, 1 if whole else 2)
        return got

    def ingest(self, index: int, frame: bytes | np.ndarray | None, meta: dict[str, Any]) -> None:
        """Take one env's frame (JPEG bytes, or an RGB array to encode) and overlay."""
        if isinstance(frame, np.ndarray):
            frame = encode_jpeg(frame, self.quality)
        jpeg = frame or b""
        with self._lock:
            while len(self.envs) <= index:
                self.envs.append(EnvView())
            view = self.envs[index]
            if jpeg:
                view.jpeg = jpeg
                self.frames_encoded += 1
            view.seq += 1
            view.meta = meta
            view.updated = time.time()
            key = _directive_key(meta.get("directive"))
            if key is not None and key != view.last_key:
                view.last_key = key
                think = meta.get("think") or {}
                view.timeline.append(
                    {
                        "id": view.events,
                        "time": view.updated,
                        "step": meta.get("length"),
                        "return": meta.get("return"),
                        "directive": meta.get("directive"),
                        "latency_s": think.get("last_latency_s"),
                        "calls": think.get("calls"),
                        "fallbacks": think.get("fallbacks"),
                        "error": think.get("last_error"),
                    }
                )
                if jpeg:
                    view.timeline_frames[view.events] = jpeg
                    for old in [
                        k for k in view.timeline_frames if k <= view.events - TIMELINE_FRAMES
                    ]:
                        del view.timeline_frames[old]
                view.events += 1
            folder = meta.get("game_folder")
            if folder and folder != self.map_folder:
                self.map_folder = folder
                with contextlib.suppress(Exception):
                    self.map_spec = load_map_spec(folder)
                self.heat.clear()
            if self.map_spec is not None:
                view.position = self.map_spec.place(meta.get("info") or {})
                if view.position is not None:
                    self.heat[view.position] += 1

    # what the page reads ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Every env's overlay (no frames) as JSON-ready data."""
        with self._lock:
            envs = []
            for index, view in enumerate(self.envs):
                meta = view.meta
                info = meta.get("info") or {}
                envs.append(
                    {
                        "index": index,
                        "seq": view.seq,
                        "return": meta.get("return"),
                        "length": meta.get("length"),
                        "hp": info.get("hp"),
                        "won": info.get("won"),
                        "lost": info.get("lost"),
                        "info": info,
                        "directive": meta.get("directive"),
                        "reward_terms": meta.get("reward_terms"),
                        "think": meta.get("think"),
                        "position": view.position,
                        "source": meta.get("source"),
                        "age_s": round(time.time() - view.updated, 2) if view.updated else None,
                    }
                )
            return {"label": self.label, "viewers": self.viewers, "fps": self.fps, "envs": envs}

    def frame(self, index: int) -> tuple[int, bytes]:
        """Env `index`'s newest JPEG and its sequence number ((0, b"") when none yet)."""
        with self._lock:
            if not 0 <= index < len(self.envs):
                return 0, b""
            return self.envs[index].seq, self.envs[index].jpeg

    def timeline(self, index: int) -> list[dict[str, Any]]:
        """Env `index`'s decisions, oldest first; `has_frame` says whether its frame is kept."""
        with self._lock:
            if not 0 <= index < len(self.envs):
                return []
            view = self.envs[index]
            return [{**e, "has_frame": e["id"] in view.timeline_frames} for e in view.timeline]

    def decision_log(self, index: int) -> dict[str, str] | None:
        """Env `index`'s decision log (folder and run id), when its thinker keeps one."""
        with self._lock:
            if not 0 <= index < len(self.envs):
                return None
            log = self.envs[index].meta.get("decisions")
            return log if isinstance(log, dict) and log.get("folder") else None

    def decisions(self, index: int, limit: int = 100) -> list[dict[str, Any]]:
        """Env `index`'s newest think calls from its decision log (prompt, answer, directive,
        latency, fallback, outcome, frame), oldest first; [] without a log."""
        log = self.decision_log(index)
        if log is None:
            return []
        path = Path(log["folder"]) / LOG_NAME
        try:
            if path.stat().st_size > MAX_LOG_BYTES:
                return []
            records = read_decisions(log["folder"])
        except (OSError, ValueError, DecisionLogNotFoundError):
            return []
        return [r for r in records if not log.get("run") or r.get("run") == log["run"]][-limit:]

    def timeline_frame(self, index: int, event: int) -> bytes | None:
        with self._lock:
            if not 0 <= index < len(self.envs):
                return None
            return self.envs[index].timeline_frames.get(event)

    def world_map(self) -> dict[str, Any]:
        """The map spec, every env's map cell and the visit counts (`heat`)."""
        with self._lock:
            spec = self.map_spec
            return {
                "spec": spec.to_dict() if spec is not None else None,
                "positions": [v.position for v in self.envs],
                "heat": [[x, y, n] for (x, y), n in self.heat.items()],
            }
