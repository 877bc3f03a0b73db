"""Frames for a live viewer (`metabonk watch`), taken from running envs only while one is asked
for: a per-env request flag that the env's process reads after each step.

Why: a dashboard of sixteen training envs must not slow training when nobody watches. With
views requested (`request_views()`, what `--watch` does before any env starts), the env
functions of a vector env are wrapped (`tap_env_fns`: shared `ViewBuffers`, a frame slot, a JSON
slot and a request byte per env, made before the workers start) and an env built in this process
by training's `make_env` is wrapped too (`tap_env`, a slot of its own); in a process the job
started otherwise (a process pool's, a Ray worker's) such envs are sent to the dashboard by
`metabonk_gym.vector.publish`. Each env's `ViewTap` is its outermost wrapper. A viewer's
sampler sets an env's request byte at the view's rate; the env's process, after its next step,
renders one frame, encodes it as JPEG into the slot, writes the step's overlay (episode return,
the info's numbers, the directive in force, reward terms) as JSON and clears the byte. The
encoding happens there, in the env's process, so the training loop's process only copies a few
kilobytes per frame and never holds its GIL long (a watcher thread that did would stall the
loop's every wake-up). An env nobody asks copies nothing: per step it reads one byte and adds
one float.
Without `--watch` nothing is wrapped at all. Sources register here (`view_sources()`); the
watch hub reads them.

>>> views = ViewBuffers.create(None, 2)
>>> views.request(0); views.wanted(0)
True
>>> side = WorkerView(views, [0, 1])
>>> side.after_step(0, None, np.zeros((4, 6, 3), np.uint8), 1.5, False, {"hp": 3, "x": "no"})
>>> jpeg, meta = views.poll(0)
>>> jpeg[:2], meta["return"], meta["info"]
(b'\xff\xd8', 1.5, {'hp': 3})
>>> views.poll(1) is None
True
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.vector.publish import ensure_publisher, publish_target

#: The largest frame side a slot holds; bigger frames are shrunk by an integer stride.
MAX_SIDE = 256
#: Bytes of one env's overlay JSON.
META_BYTES = 6144
#: Longest text kept for a string in the overlay (a directive's reasoning).
MAX_TEXT = 300
#: Bytes of one env's JPEG slot.
JPEG_BYTES = 256 * 1024
#: Frames smaller than this on their short side are enlarged (nearest neighbour) before JPEG.
MIN_SIDE = 120
JPEG_QUALITY = 70
#: An env serves at most one frame per this many of its steps: the view's rate follows the
#: training's (on a machine where an env makes 12 steps a second, 10 frames a second would be a
#: frame almost every step; at 40 steps a second this still allows 13).
MIN_STEPS_PER_FRAME = 3


def encode_jpeg(frame: np.ndarray, quality: int = JPEG_QUALITY, shrink: int = 1) -> bytes:
    """An RGB frame as JPEG bytes: every `shrink`-th pixel (a grid tile costs a quarter at 2),
    else enlarged by an integer factor when it is tiny.

    >>> encode_jpeg(np.zeros((8, 8, 3), np.uint8))[:2]
    b'\\xff\\xd8'
    """
    from PIL import Image

    if shrink > 1 and min(frame.shape[:2]) >= shrink * MIN_SIDE // 2:
        frame = frame[::shrink, ::shrink]
        factor = 1
    else:
        factor = max(1, -(-MIN_SIDE // max(1, min(frame.shape[:2]))))
    if factor > 1:
        frame = np.repeat(np.repeat(frame, factor, axis=0), factor, axis=1)
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame)).save(out, "JPEG", quality=quality)
    return out.getvalue()


_state = {"requested": False, "in_worker": False}
_sources: list[Any] = []
_created: list[Any] = []  # blocks this process made (unlinked at exit at the latest)
_lock = threading.Lock()


def request_views(on: bool = True) -> None:
    """Ask every env built from now on in this process to serve frames on request (`--watch`)."""
    _state["requested"] = bool(on)


def views_requested() -> bool:
    """Whether envs built now serve frames: asked for here (`request_views`), or this process
    was started by a watched job (a process pool's, Ray's: `metabonk_gym.vector.publish`); never
    inside a vector env's worker (its engine taps its envs).

    >>> views_requested()
    False
    """
    asked = bool(_state["requested"]) or publish_target() is not None
    return asked and not _state["in_worker"]


def mark_worker() -> None:
    """Called in a vector env's worker process: its envs are tapped into shared slots, and the
    blocks it inherited by fork are its parent's to unlink, not its own."""
    _state["in_worker"] = True
    for views in _created:
        views.owner_of_block = False
    _created.clear()
    _sources.clear()


def register_source(source: Any) -> None:
    """Make a frame source (`ViewBuffers`) visible to the watch hub (held until it is closed)."""
    with _lock:
        _prune()
        _sources.append(source)
    ensure_publisher(view_sources)  # a watched job's other process: send them to its dashboard


def view_sources() -> list[Any]:
    """The registered frame sources that are still open, oldest first (closed ones are
    released: their shared memory is unlinked)."""
    with _lock:
        _prune()
        return list(_sources)


def _prune() -> None:
    keep = []
    for src in _sources:
        if src.closed:
            src.release()
        else:
            keep.append(src)
    _sources[:] = keep


@atexit.register
def _release_created() -> None:
    for views in list(_created):
        views.release()


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


class _PlainBlock:
    """A view block in this process's memory, with `SharedMemory`'s `buf`, `name`, `close` and
    `unlink` (the last two: nothing to do)."""

    def __init__(self, size: int) -> None:
        self.buf = memoryview(bytearray(size))
        self.name = f"plain-{id(self):x}"

    def close(self) -> None:
        pass

    def unlink(self) -> None:
        pass


class ViewBuffers:
    """One vector env's view slots in named shared memory (see the module docstring): the
    training process creates them, its env workers and the watch server's process attach by
    name (`attach`); the creator unlinks them when they close (`release`).

    Args:
        n: the number of envs (one slot each).
        shm: the shared memory block (`create` and `attach` make it).
        owner_of_block: this process created the block (and unlinks it).
    """

    # the arrays in the block (`_layout`): request byte, sequence number, JPEG length, overlay
    # length, JPEG bytes and overlay bytes of each env
    want: np.ndarray
    seq: np.ndarray
    shape: np.ndarray
    meta_len: np.ndarray
    frames: np.ndarray
    meta: np.ndarray
    #: one env's own slots in this process (a `ViewTap` without an engine), closed with it
    local: bool = False

    def __init__(self, n: int, shm: Any, owner_of_block: bool = False) -> None:
        self.num_envs = n
        self.shm = shm
        self.name = str(shm.name)
        self.owner_of_block = owner_of_block
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

    @staticmethod
    def _layout(n: int) -> dict[str, tuple[int, int, Any, tuple[int, ...]]]:
        """name -> (offset, bytes, dtype, shape) of each array in the block (8-byte aligned)."""
        parts = [
            ("want", np.int8, (n,)),
            ("seq", np.int64, (n,)),
            ("shape", np.int32, (n, 2)),
            ("meta_len", np.int32, (n,)),
            ("frames", np.uint8, (n, JPEG_BYTES)),
            ("meta", np.uint8, (n, META_BYTES)),
        ]
        out, offset = {}, 0
        for name, dtype, shape in parts:
            size = int(np.prod(shape)) * np.dtype(dtype).itemsize
            out[name] = (offset, size, dtype, shape)
            offset += -(-size // 8) * 8
        return out

    @classmethod
    def size(cls, n: int) -> int:
        offset, size, _, _ = list(cls._layout(n).values())[-1]
        return offset + size

    @classmethod
    def create(cls, ctx: Any, n: int, shared: bool = True) -> ViewBuffers:
        """Allocate slots for `n` envs (`ctx` is accepted for symmetry with the engine's
        arrays; named shared memory needs none); `shared=False`: in this process's own memory
        (a process that publishes its envs: nobody attaches, and nothing outlives a worker
        killed without a chance to unlink).

        >>> ViewBuffers.create(None, 1, shared=False).name.startswith("plain-")
        True
        """
        size = cls.size(n)
        shm = shared_memory.SharedMemory(create=True, size=size) if shared else _PlainBlock(size)
        views = cls(n, shm, owner_of_block=True)
        _created.append(views)
        return views

    @classmethod
    def attach(cls, name: str, n: int) -> ViewBuffers:
        """The slots of `n` envs in the block `name` (another process's)."""
        # (attaching registers the name with the resource tracker this process shares with the
        # creator, a no-op: the creator unregisters it when it unlinks)
        return cls(n, shared_memory.SharedMemory(name=name))

    def _map(self) -> None:
        for name, (offset, _size, dtype, shape) in self._layout(self.num_envs).items():
            array = np.frombuffer(self.shm.buf, dtype, int(np.prod(shape)), offset)
            setattr(self, name, array.reshape(shape))

    def __getstate__(self) -> dict[str, Any]:
        return {"num_envs": self.num_envs, "name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        ViewBuffers.__init__(
            self, state["num_envs"], shared_memory.SharedMemory(name=state["name"])
        )

    def release(self) -> None:
        """Drop the arrays and the mapping; the creating process also unlinks the block."""
        for name in self._layout(self.num_envs):
            self.__dict__.pop(name, None)
        with contextlib.suppress(Exception):
            self.shm.close()
        if self.owner_of_block:
            with contextlib.suppress(Exception):
                self.shm.unlink()
            self.owner_of_block = False
        with contextlib.suppress(ValueError):
            _created.remove(self)

    # the viewer's side ------------------------------------------------------------------------
    def request(self, i: int, shrink: int = 1) -> None:
        """Ask env `i` for a frame after its next step, every `shrink`-th pixel of it (1: whole;
        2: a grid tile, a quarter of the encoding work)."""
        self.want[i] = max(1, min(int(shrink), 4))

    def wanted(self, i: int) -> bool:
        return bool(self.want[i])

    def poll(self, i: int, last_seq: int = 0) -> tuple[bytes, dict[str, Any]] | None:
        """Env `i`'s newest frame (JPEG bytes, b"" when it has none) and overlay when one
        arrived since `last_seq` (and no request is pending: the env writes only while the byte
        is set), else None."""
        if self.want[i] or int(self.seq[i]) <= last_seq:
            return None
        size = int(self.shape[i, 0])
        frame = self.frames[i, :size].tobytes()
        try:
            meta = json.loads(bytes(self.meta[i, : int(self.meta_len[i])]))
        except ValueError:
            meta = {}
        meta["seq"] = int(self.seq[i])
        return frame, meta

    # the env's side ---------------------------------------------------------------------------
    def write(self, i: int, frame: np.ndarray | None, meta: bytes) -> None:
        """Store env `i`'s frame (as JPEG, shrunk as requested) and overlay, then clear its
        request."""
        shrink = max(1, int(self.want[i]))
        jpeg = encode_jpeg(frame, shrink=shrink) if frame is not None else b""
        if len(jpeg) > JPEG_BYTES:
            jpeg = b""
        self.frames[i, : len(jpeg)] = np.frombuffer(jpeg, np.uint8)
        self.shape[i] = (len(jpeg), 0)
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
        self.since = [MIN_STEPS_PER_FRAME] * len(self.ids)  # steps since the last frame

    def after_step(
        self, local: int, env: Any, obs: Any, reward: float, done: bool, info: Mapping[str, Any]
    ) -> None:
        """Count the step; serve a frame when one is asked for (and `MIN_STEPS_PER_FRAME` steps
        passed since the last)."""
        self.returns[local] += float(reward)
        self.lengths[local] += 1
        self.since[local] += 1
        if self.buffers.want[self.ids[local]] and self.since[local] >= MIN_STEPS_PER_FRAME:
            self.since[local] = 0
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


class ViewTap(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Serves this env's frames to a live viewer on request (see the module docstring).

    Args:
        env: the env to watch.
        buffers: the view slots (None: a slot of its own, registered here).
        index: this env's slot in `buffers`.
    """

    def __init__(self, env: gym.Env, buffers: ViewBuffers | None = None, index: int = 0) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, index=index)
        gym.Wrapper.__init__(self, env)
        if buffers is None:
            # (a publishing process's slot stays in its own memory: `metabonk_gym.vector.publish`)
            buffers, index = ViewBuffers.create(None, 1, shared=publish_target() is None), 0
            buffers.local = True
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
        if getattr(self.view, "local", False):  # its own slot: unlinked now, not at exit (a
            self.view.closed = True  # forked worker that leaves by os._exit runs no atexit)
            self.view.release()
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
