"""Frames for a live viewer (`metabonk watch`), taken from running envs only while one is asked
for: a per-env request flag that the env's process reads after each step.

Why: a dashboard of sixteen training envs must not slow training when nobody watches. With
views requested (`request_views()`, what `--watch` does before any env starts), the env
functions of a vector env are wrapped (`tap_env_fns`: shared `ViewBuffers`, a frame slot, a JSON
slot and a request byte per env, made before the workers start) and an env built in this process
by training's `make_env` is wrapped too (`tap_env`, plain memory). Each env's `ViewTap` is its
outermost wrapper. A viewer's sampler sets an env's request byte at the view's rate; the env's
process, after its next step, renders one frame into the slot, writes the step's overlay
(episode return, the info's numbers, the directive in force, reward terms) as JSON and clears
the byte. An env nobody asks copies nothing: per step it reads one byte and adds one float.
Without `--watch` nothing is wrapped at all. Sources register here (`view_sources()`); the
watch hub reads them.

>>> views = ViewBuffers.create(None, 2)
>>> views.request(0); views.wanted(0)
True
>>> side = WorkerView(views, [0, 1])
>>> side.after_step(0, None, np.zeros((4, 6, 3), np.uint8), 1.5, False, {"hp": 3, "x": "no"})
>>> frame, meta = views.poll(0)
>>> frame.shape, meta["return"], meta["info"]
((4, 6, 3), 1.5, {'hp': 3})
>>> views.poll(1) is None
True
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

#: The largest frame side a slot holds; bigger frames are shrunk by an integer stride.
MAX_SIDE = 256
#: Bytes of one env's overlay JSON.
META_BYTES = 6144
#: Longest text kept for a string in the overlay (a directive's reasoning).
MAX_TEXT = 300

_state = {"requested": False, "in_worker": False}
_sources: list[Any] = []
_lock = threading.Lock()


def request_views(on: bool = True) -> None:
    """Ask every env built from now on in this process to serve frames on request (`--watch`)."""
    _state["requested"] = bool(on)


def views_requested() -> bool:
    """Whether envs built now serve frames (and not inside a vector worker: its engine does).

    >>> views_requested()
    False
    """
    return bool(_state["requested"]) and not _state["in_worker"]


def mark_worker() -> None:
    """Called in a vector env's worker process: its envs are tapped into shared slots."""
    _state["in_worker"] = True


def register_source(source: Any) -> None:
    """Make a frame source (`ViewBuffers`, `LocalView`) visible to the watch hub (held until
    it is closed)."""
    with _lock:
        _sources[:] = [src for src in _sources if not src.closed]
        _sources.append(source)


def view_sources() -> list[Any]:
    """The registered frame sources that are still open, oldest first."""
    with _lock:
        _sources[:] = [src for src in _sources if not src.closed]
        return list(_sources)


def _jsonable(value: Any, depth: int = 0) -> Any:
    """Numbers, short strings, and small dicts/lists of them; None for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if depth < 2 and isinstance(value, Mapping):
        out = {str(k): _jsonable(v, depth + 1) for k, v in list(value.items())[:40]}
        return {k: v for k, v in out.items() if v is not None}
    if depth < 2 and isinstance(value, (list, tuple)) and len(value) <= 16:
        return [_jsonable(v, depth + 1) for v in value]
    return None


def decision_log_of(env: Any) -> dict[str, str] | None:
    """The decision log a wrapper of `env` keeps (`director.log`: its folder and run id), which
    the viewer's timeline reads prompts and answers from; None without one.

    >>> import gymnasium as gym
    >>> decision_log_of(gym.make("CartPole-v1")) is None
    True
    """
    layer = env
    for _ in range(64):
        log = getattr(getattr(layer, "director", None), "log", None)
        if log is not None and getattr(log, "folder", None) is not None:
            return {"folder": str(Path(log.folder).resolve()), "run": str(getattr(log, "_run", ""))}
        layer = getattr(layer, "env", None)
        if layer is None:
            break
    return None


def overlay(
    info: Mapping[str, Any],
    ret: float,
    length: int,
    folder: str | None,
    decisions: dict[str, str] | None = None,
) -> bytes:
    """The JSON an env sends with a frame: its numbers, directive, think counters, reward terms.

    >>> json.loads(overlay({"hp": 2, "directive": {"goal": "key"}}, 1.0, 5, None))["directive"]
    {'goal': 'key'}
    """
    numbers = {
        str(k): _jsonable(v)
        for k, v in info.items()
        if isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))
    }
    data: dict[str, Any] = {"return": float(ret), "length": int(length), "info": numbers}
    for key in ("directive", "reward_terms", "think"):
        if isinstance(info.get(key), Mapping):
            data[key] = _jsonable(info[key])
    if folder:
        data["game_folder"] = folder
    if decisions:
        data["decisions"] = decisions
    blob = json.dumps(data, separators=(",", ":")).encode()
    if len(blob) > META_BYTES:  # drop the bulkiest parts first
        for key in ("think", "reward_terms", "info"):
            data.pop(key, None)
            blob = json.dumps(data, separators=(",", ":")).encode()
            if len(blob) <= META_BYTES:
                break
    return blob[:META_BYTES] if len(blob) <= META_BYTES else b"{}"


def _fit(frame: np.ndarray) -> np.ndarray:
    """An (H, W, 3) uint8 frame no side of which exceeds MAX_SIDE."""
    frame = np.asarray(frame)
    if frame.ndim == 2:
        frame = frame[:, :, None]
    if frame.ndim != 3:
        raise ValueError(f"a frame must be 2-D or 3-D, not {frame.shape}")
    if frame.shape[2] in (1, 2) or frame.shape[2] > 4:  # grayscale (a stack: the newest)
        frame = np.repeat(frame[:, :, -1:], 3, axis=2)
    frame = frame[:, :, :3]
    stride = max(1, -(-max(frame.shape[:2]) // MAX_SIDE))
    if stride > 1:
        frame = frame[::stride, ::stride]
    if frame.dtype != np.uint8:
        frame = np.clip(frame, 0, 255).astype(np.uint8)
    return frame


def env_frame(env: Any, obs: Any) -> np.ndarray | None:
    """The env's screen (`render()`), else its observation when that is an image."""
    frame: Any = None
    if env is not None and getattr(env, "render_mode", None) in ("rgb_array", None):
        with contextlib.suppress(Exception):
            frame = env.render()
    if frame is None or np.ndim(frame) < 2:
        frame = obs
        if isinstance(obs, Mapping):
            frame = next((obs[k] for k in ("pixels", "image", "frame") if k in obs), None)
    if frame is None or np.ndim(frame) not in (2, 3) or np.asarray(frame).dtype == object:
        return None
    return _fit(np.asarray(frame))


class ViewBuffers:
    """One engine's shared view slots (see the module docstring).

    Args:
        n: the number of envs (one slot each).
        arrays: the shared arrays (`create` makes them).
    """

    def __init__(self, n: int, arrays: dict[str, Any]) -> None:
        self.num_envs = n
        self.arrays = arrays
        self._closed = False
        self.owner: Any = None  # a weak reference to the vector env: closed with it
        self._map()

    @property
    def closed(self) -> bool:
        """Whether these slots' envs are gone (marked, or their owner closed or collected)."""
        if self._closed:
            return True
        owner = self.owner() if self.owner is not None else None
        return self.owner is not None and (owner is None or bool(getattr(owner, "closed", False)))

    @closed.setter
    def closed(self, value: bool) -> None:
        self._closed = bool(value)

    @classmethod
    def create(cls, ctx: Any, n: int) -> ViewBuffers:
        """Allocate slots for `n` envs (`ctx`: a multiprocessing context, None: the default)."""
        ctx = ctx or multiprocessing.get_context()
        arrays = {
            "want": ctx.RawArray("b", n),
            "seq": ctx.RawArray("l", n),
            "shape": ctx.RawArray("i", 2 * n),
            "frames": ctx.RawArray("B", n * MAX_SIDE * MAX_SIDE * 3),
            "meta_len": ctx.RawArray("i", n),
            "meta": ctx.RawArray("B", n * META_BYTES),
        }
        return cls(n, arrays)

    def _map(self) -> None:
        a, n = self.arrays, self.num_envs
        self.want = np.frombuffer(a["want"], np.int8)
        self.seq = np.frombuffer(a["seq"], np.int64)
        self.shape = np.frombuffer(a["shape"], np.int32).reshape(n, 2)
        self.frames = np.frombuffer(a["frames"], np.uint8).reshape(n, MAX_SIDE * MAX_SIDE * 3)
        self.meta_len = np.frombuffer(a["meta_len"], np.int32)
        self.meta = np.frombuffer(a["meta"], np.uint8).reshape(n, META_BYTES)

    def __getstate__(self) -> dict[str, Any]:
        return {"num_envs": self.num_envs, "arrays": self.arrays}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.num_envs, self.arrays = state["num_envs"], state["arrays"]
        self._closed, self.owner = False, None
        self._map()

    # the viewer's side ------------------------------------------------------------------------
    def request(self, i: int) -> None:
        """Ask env `i` for a frame after its next step."""
        self.want[i] = 1

    def wanted(self, i: int) -> bool:
        return bool(self.want[i])

    def poll(self, i: int, last_seq: int = 0) -> tuple[np.ndarray | None, dict[str, Any]] | None:
        """Env `i`'s newest frame and overlay when one arrived since `last_seq` (and no request
        is pending: the env writes only while the byte is set), else None."""
        if self.want[i] or int(self.seq[i]) <= last_seq:
            return None
        h, w = (int(v) for v in self.shape[i])
        frame = self.frames[i, : h * w * 3].reshape(h, w, 3).copy() if h * w else None
        try:
            meta = json.loads(bytes(self.meta[i, : int(self.meta_len[i])]))
        except ValueError:
            meta = {}
        meta["seq"] = int(self.seq[i])
        return frame, meta

    # the env's side ---------------------------------------------------------------------------
    def write(self, i: int, frame: np.ndarray | None, meta: bytes) -> None:
        """Store env `i`'s frame and overlay, then clear its request."""
        if frame is not None:
            h, w = frame.shape[:2]
            self.frames[i, : h * w * 3] = frame.reshape(-1)
            self.shape[i] = (h, w)
        self.meta[i, : len(meta)] = np.frombuffer(meta, np.uint8)
        self.meta_len[i] = len(meta)
        self.seq[i] += 1
        self.want[i] = 0


class WorkerView:
    """The env process's side of `ViewBuffers` for the envs it steps (episode returns too).

    Args:
        buffers: the engine's view slots.
        env_ids: the global index of each local env.
    """

    def __init__(self, buffers: ViewBuffers, env_ids: list[int]) -> None:
        self.buffers = buffers
        self.ids = list(env_ids)
        self.returns = [0.0] * len(self.ids)
        self.lengths = [0] * len(self.ids)
        self.folders: list[str | None] = [None] * len(self.ids)
        self.logs: list[dict[str, str] | None] = [None] * len(self.ids)

    def after_step(
        self, local: int, env: Any, obs: Any, reward: float, done: bool, info: Mapping[str, Any]
    ) -> None:
        """Count the step; serve a frame when one is asked for."""
        self.returns[local] += float(reward)
        self.lengths[local] += 1
        gid = self.ids[local]
        if self.buffers.want[gid]:
            self.capture(local, env, obs, info)
        if done:
            self.returns[local], self.lengths[local] = 0.0, 0

    def capture(self, local: int, env: Any, obs: Any, info: Mapping[str, Any]) -> None:
        if self.folders[local] is None and env is not None:
            game = getattr(getattr(env, "unwrapped", env), "game_data", None)
            self.folders[local] = str(getattr(game, "folder", "")) or ""
            self.logs[local] = decision_log_of(env)
        meta = overlay(
            info, self.returns[local], self.lengths[local], self.folders[local], self.logs[local]
        )
        self.buffers.write(self.ids[local], env_frame(env, obs), meta)


class LocalView(ViewBuffers):
    """View slots for one env in this process (eval and play): plain memory, same protocol."""

    def __init__(self) -> None:
        super().__init__(
            1,
            {
                "want": bytearray(1),
                "seq": bytearray(8),
                "shape": bytearray(8),
                "frames": bytearray(MAX_SIDE * MAX_SIDE * 3),
                "meta_len": bytearray(4),
                "meta": bytearray(META_BYTES),
            },
        )


class ViewTap(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Serves this env's frames to a live viewer on request (see the module docstring).

    Args:
        env: the env to watch.
        buffers: the view slots (None: a `LocalView` of its own, registered here).
        index: this env's slot in `buffers`.
    """

    def __init__(self, env: gym.Env, buffers: ViewBuffers | None = None, index: int = 0) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, index=index)
        gym.Wrapper.__init__(self, env)
        if buffers is None:
            buffers, index = LocalView(), 0
            register_source(buffers)
        self.view = buffers
        self._side = WorkerView(buffers, [index])

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._side.returns[0], self._side.lengths[0] = 0.0, 0
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._side.after_step(0, self.env, obs, float(reward), False, info)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        if isinstance(self.view, LocalView):
            self.view.closed = True
        super().close()


def tap_env(env: gym.Env) -> gym.Env:
    """`env` wrapped in `ViewTap` when views are requested in this process, else `env`.

    >>> import gymnasium as gym
    >>> type(tap_env(gym.make("CartPole-v1"))).__name__
    'TimeLimit'
    """
    return ViewTap(env) if views_requested() else env


def _build_tapped(env_fn: Callable[[], gym.Env], buffers: ViewBuffers, index: int) -> gym.Env:
    """Run in the env's process: build the env (not tapped again there) and tap it."""
    mark_worker()
    return ViewTap(env_fn(), buffers, index)


def tap_env_fns(
    env_fns: Sequence[Callable[[], gym.Env]], ctx: Any = None
) -> list[Callable[[], gym.Env]]:
    """The env functions of a vector env, each tapping its env into one shared slot when views
    are requested (the slots are registered as one source); else the functions unchanged.

    >>> import gymnasium as gym
    >>> fns = [lambda: gym.make("CartPole-v1")]
    >>> tap_env_fns(fns) == fns
    True
    """
    if not views_requested():
        return list(env_fns)
    buffers = ViewBuffers.create(ctx, len(env_fns))
    register_source(buffers)
    return [partial(_build_tapped, fn, buffers, i) for i, fn in enumerate(env_fns)]


def bind_views(env_fns: Sequence[Any], owner: Any) -> None:
    """Tie the view slots of tapped env functions to their vector env (`owner`, with a
    `closed` attribute): the viewer drops them when it closes or is collected."""
    for fn in env_fns:
        if isinstance(fn, partial) and fn.func is _build_tapped:
            fn.args[1].owner = weakref.ref(owner)
