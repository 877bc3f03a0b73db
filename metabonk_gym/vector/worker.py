"""The loop a vector-engine worker process runs: it steps its envs and writes their results into
shared memory, so that the main process never receives a frame through a pipe.

A worker owns one or more envs (`env_fns`). The main process wakes it with a one-byte command on
its command pipe (`b"s"` plus the local indices of the envs to step; other commands are pickled
tuples, which only this project's own processes send), reads actions from and writes
observations, rewards, done flags and requested info values into shared arrays, and announces
each finished env by writing its global index (two bytes, an atomic pipe write) into one
completion pipe that every worker shares. Anything that is not a number (an episode's final
info, an exception, a reply to `call`, observations of spaces that shared memory cannot hold)
goes back pickled on the worker's own reply pipe, right after its completion bytes (the main
process reads it when it sees them, so a payload of any size never fills a pipe nobody reads). This is the design of PufferLib's vector module (shared buffers, the main
process waits on flags, pool mode), which cannot be installed here (its build downloads files);
it is written with the standard library. Everything else (`make_vec`'s gymnasium front, the
SB3 VecEnv of training, parallel eval) uses only `VecEngine`'s interface, so swapping PufferLib
in later replaces `engine.py` and this file behind it, and nothing else.

>>> from metabonk_gym.vector.worker import decode_step_command, STEP
>>> decode_step_command(STEP + bytes([0, 2]))
[0, 2]
"""

from __future__ import annotations

import os
import pickle
import signal
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import read_from_shared_memory, write_to_shared_memory

from metabonk_gym.process import adopt_inherited_objects, die_with_parent, record_crash_stack
from metabonk_gym.vector.view import mark_worker

#: The command byte of a step; the bytes after it are the local indices of the envs to step.
#: `STEP` announces each env as it finishes (pool mode); `STEP_ALL` all of them in one write
#: after the last (a synchronous step: one wake-up of the main process per worker).
STEP = b"s"
STEP_ALL = b"S"
#: How an info value that is absent is kept in the shared info columns.
ABSENT, BOOL, INT, FLOAT = 0, 1, 2, 3


def dumps(obj: Any) -> bytes:
    """Pickle `obj`, with cloudpickle where plain pickle cannot (a lambda in an env's spec,
    a closure returned by a `call`), as gymnasium's `AsyncVectorEnv` sends env functions."""
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return cloudpickle.dumps(obj)


def _all_arrays(views: Any) -> bool:
    """True when every leaf of a `read_from_shared_memory` result is an array view."""
    if isinstance(views, dict):
        return all(_all_arrays(v) for v in views.values())
    if isinstance(views, tuple):
        return all(_all_arrays(v) for v in views)
    return isinstance(views, np.ndarray)


def _write_row(views: Any, index: int, value: Any) -> None:
    """Write one env's observation into row `index` of shared array views (a Dict or Tuple of
    them), cast as gymnasium's `write_to_shared_memory` casts.

    >>> rows = {"a": np.zeros((2, 2), np.int32), "b": (np.zeros((2,), np.float32),)}
    >>> _write_row(rows, 1, {"a": [3, 4], "b": (np.float64(0.5),)})
    >>> rows["a"].tolist(), rows["b"][0].tolist()
    ([[0, 0], [3, 4]], [0.0, 0.5])
    """
    if isinstance(views, dict):
        for key, view in views.items():
            _write_row(view, index, value[key])
    elif isinstance(views, tuple):
        for view, item in zip(views, value):
            _write_row(view, index, item)
    else:
        views[index] = np.reshape(value, views.shape[1:])


def shareable(space: gym.Space) -> bool:
    """Whether gymnasium's shared-memory helpers hold `space` as fixed views: Box, Discrete,
    MultiDiscrete, MultiBinary, and Dict and Tuple of them.

    >>> from gymnasium.spaces import Box, Dict, Text
    >>> shareable(Dict({"a": Box(0, 1)})), shareable(Text(5))
    (True, False)
    """
    if isinstance(space, gym.spaces.Dict):
        return all(shareable(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return all(shareable(s) for s in space.spaces)
    return type(space) in (
        gym.spaces.Box,
        gym.spaces.Discrete,
        gym.spaces.MultiDiscrete,
        gym.spaces.MultiBinary,
    )


def _action_row(actions: Any, i: int) -> Any:
    """Env `i`'s action from the shared batch of a Dict or Tuple action space."""
    if isinstance(actions, dict):
        return {key: _action_row(value, i) for key, value in actions.items()}
    if isinstance(actions, tuple):
        return tuple(_action_row(value, i) for value in actions)
    return actions[i]


def decode_step_command(message: bytes) -> list[int]:
    """The local env indices of a step command (`STEP` followed by one byte per env)."""
    return list(message[1:])


@dataclass
class SharedBuffers:
    """The shared arrays of an engine (`multiprocessing` arrays: picklable to workers, freed with
    their last user, no named segment that could outlive a killed process).

    Args:
        observations, final_observations: gymnasium shared memory for the observation space.
        actions: gymnasium shared memory for the action space.
        rewards, terminations, truncations: one float64 / one byte per env.
        info_values, info_kinds: one float64 and one kind byte (`ABSENT`, `BOOL`, `INT`,
            `FLOAT`) per env and requested scalar info key.
        has_reply: one byte per env: the worker sent something on its reply pipe for this step.
    """

    observations: Any
    final_observations: Any
    actions: Any
    rewards: Any
    terminations: Any
    truncations: Any
    info_values: Any
    info_kinds: Any
    has_reply: Any


@dataclass
class WorkerSpec:
    """What one worker needs: its envs, their global indices and the engine's settings.

    Args:
        env_fns: builds each env of this worker.
        env_ids: the global index of each env.
        num_envs: the engine's total number of envs.
        autoreset: gymnasium's autoreset mode.
        info_keys: the info keys sent every step.
        parent_pid: the main process (the worker dies with it).
        shared_obs, shared_actions: observations / actions through shared memory (else
            pickled on the pipes).
        all_infos: send every info key, pickled, every step.
    """

    env_fns: Sequence[Callable[[], gym.Env]]
    env_ids: Sequence[int]
    num_envs: int
    autoreset: AutoresetMode
    info_keys: Sequence[str]
    parent_pid: int
    shared_obs: bool = True
    shared_actions: bool = True
    all_infos: bool = False


def _kind(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return INT
    if isinstance(value, (float, np.floating)):
        return FLOAT
    return ABSENT


class _Worker:
    """The state of one worker process (see the module docstring)."""

    def __init__(self, spec: WorkerSpec, buffers: SharedBuffers, done_fd: int, reply: Any) -> None:
        self.spec = spec
        self.envs = [fn() for fn in spec.env_fns]
        self.ids = list(spec.env_ids)
        self.done_fd = done_fd
        self.reply = reply
        n = spec.num_envs
        single_obs = self.envs[0].observation_space
        self.obs_space = single_obs
        self.buffers = buffers
        self.observations = buffers.observations
        self.final_observations = buffers.final_observations
        self.actions: Any = None
        if spec.shared_actions:
            self.actions = read_from_shared_memory(self.envs[0].action_space, buffers.actions, n)
        self.flat_actions = isinstance(self.actions, np.ndarray)
        self.shared_obs = spec.shared_obs
        self.obs_rows: Any = None  # views of the shared observations, one row per env
        if self.shared_obs:
            try:  # an env whose space differs from the engine's is refused after its reset
                rows = read_from_shared_memory(single_obs, buffers.observations, n)
            except (ValueError, TypeError):
                rows = None
            self.obs_rows = rows if _all_arrays(rows) else None
        self.all_infos = spec.all_infos
        self.rewards = np.frombuffer(buffers.rewards.get_obj(), np.float64)
        self.terminations = np.frombuffer(buffers.terminations.get_obj(), np.bool_)
        self.truncations = np.frombuffer(buffers.truncations.get_obj(), np.bool_)
        keys = len(spec.info_keys)
        self.info_values = np.frombuffer(buffers.info_values.get_obj(), np.float64)[: n * keys]
        self.info_values = self.info_values.reshape(n, keys)
        self.info_kinds = np.frombuffer(buffers.info_kinds.get_obj(), np.int8)[: n * keys]
        self.info_kinds = self.info_kinds.reshape(n, keys)
        self.has_reply = np.frombuffer(buffers.has_reply.get_obj(), np.bool_)
        self.needs_reset = [False] * len(self.envs)
        self.later: list[bytes] = []  # payloads sent after a batch of completions
        self.last_infos: list[dict[str, Any]] = [{} for _ in self.envs]
        self.term_totals: list[dict[str, float]] = [{} for _ in self.envs]
        self.scalar_keys = list(spec.info_keys)

    # results ----------------------------------------------------------------------------------
    def _write_infos(self, i: int, info: dict[str, Any]) -> dict[str, Any]:
        """Scalars of the requested keys into shared columns; the rest of them returned."""
        gid = self.ids[i]
        extra: dict[str, Any] = {}
        for k, key in enumerate(self.scalar_keys):
            value = info.get(key)
            kind = _kind(value) if value is not None else ABSENT
            self.info_kinds[gid, k] = kind
            if kind:
                self.info_values[gid, k] = float(value)  # type: ignore[arg-type]
            elif value is not None:
                extra[key] = value
        return extra

    def _finish(self, i: int, payload: dict[str, Any] | None, announce: bool) -> bytes:
        """Announce env `i`'s step: its completion bytes (written now, or returned for the batch
        write when not `announce`), then its pickled payload, if any, on the reply pipe. The
        payload goes after the completion: the main process reads it only when it sees the
        completion, so a payload larger than the pipe's buffer (a frame) cannot deadlock."""
        gid = self.ids[i]
        blob = None
        if payload:
            try:
                blob = dumps(payload)
            except Exception as exc:  # an observation or info that no pickler can send
                blob = pickle.dumps({"error": pickled_error(exc)})
        self.has_reply[gid] = blob is not None
        done = gid.to_bytes(2, "little")
        if announce:
            os.write(self.done_fd, done)
            if blob is not None:
                self.reply.send_bytes(blob)
            return b""
        if blob is not None:
            self.later.append(blob)
        return done

    def _track_terms(self, i: int, info: dict[str, Any]) -> None:
        terms = info.get("reward_terms")
        if isinstance(terms, dict):
            totals = self.term_totals[i]
            for name, value in terms.items():
                totals[name] = totals.get(name, 0.0) + float(value)

    def _episode_end(self, i: int, info: dict[str, Any]) -> dict[str, Any]:
        """The final info of an episode: the env's info and the return of each reward term."""
        final = dict(info)
        if self.term_totals[i]:
            final["episode_reward_terms"] = self.term_totals[i]
        self.term_totals[i] = {}
        return final

    def _write_obs(self, gid: int, obs: Any) -> None:
        """Env `gid`'s observation into shared memory: through views made once (a Dict of five
        keys cost 30 us a step through gymnasium's `write_to_shared_memory`, 2 us so), else
        gymnasium's writer (spaces whose shared form is no array, e.g. Text, and an observation
        of another shape, which gymnasium writes flat or refuses as it always did)."""
        if self.obs_rows is not None:
            try:
                _write_row(self.obs_rows, gid, obs)
                return
            except (ValueError, TypeError, KeyError, IndexError):
                pass
        write_to_shared_memory(self.obs_space, gid, obs, self.observations)

    # commands ---------------------------------------------------------------------------------
    def step(self, local: list[int], each: bool = True, actions: list[Any] | None = None) -> None:
        mode = self.spec.autoreset
        batch = b""
        for k, i in enumerate(local):
            gid = self.ids[i]
            env = self.envs[i]
            try:
                reward: Any
                if mode is AutoresetMode.NEXT_STEP and self.needs_reset[i]:
                    obs, info = env.reset()
                    reward, terminated, truncated = 0.0, False, False
                    self.needs_reset[i] = False
                else:
                    if actions is not None:
                        action = actions[k]
                    elif self.flat_actions:
                        action = self.actions[gid]
                    else:
                        action = _action_row(self.actions, gid)
                    obs, reward, terminated, truncated, info = env.step(action)
                self._track_terms(i, info)
                payload: dict[str, Any] = {}
                if terminated or truncated:
                    final = self._episode_end(i, info)
                    if mode is AutoresetMode.SAME_STEP:
                        # pickled once per episode, as the env returned it (gymnasium's type)
                        payload["final_obs"] = obs
                        payload["final_info"] = final
                        obs, info = env.reset()
                    else:
                        payload["final_info"] = final
                        self.needs_reset[i] = mode is AutoresetMode.NEXT_STEP
                self.last_infos[i] = info
                if self.shared_obs:
                    self._write_obs(gid, obs)
                else:
                    payload["obs"] = obs
                self.rewards[gid] = float(reward)
                self.terminations[gid] = bool(terminated)
                self.truncations[gid] = bool(truncated)
                if self.all_infos:
                    if info:
                        payload["info"] = info
                else:
                    extra = self._write_infos(i, info)
                    if extra:
                        payload["info"] = extra
            except Exception as exc:  # sent to the main process, which raises it there
                payload = {"error": pickled_error(exc)}
            batch += self._finish(i, payload, announce=each)
        if batch:  # at most PIPE_BUF bytes: one atomic write
            os.write(self.done_fd, batch)
            for blob in self.later:  # in the order of the completions
                self.reply.send_bytes(blob)
            self.later.clear()

    def reset(self, requests: list[tuple[int, int | None, dict[str, Any] | None]]) -> Any:
        replies = []
        for i, seed, options in requests:
            obs, info = self.envs[i].reset(seed=seed, options=options)
            self.needs_reset[i] = False
            self.term_totals[i] = {}
            self.last_infos[i] = info
            if self.shared_obs:
                self._write_obs(self.ids[i], obs)
                obs = None
            replies.append((info, obs))
        return replies

    def call(self, local: list[int], name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        out = []
        for attr in self.get_attr(local, name):
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return out

    def get_attr(self, local: list[int], name: str) -> Any:
        # an attribute of a wrapper inside (a curriculum's `set_start`) counts too, as in
        # SB3's SubprocVecEnv
        out = []
        for i in local:
            env = self.envs[i]
            out.append(getattr(env, name) if hasattr(env, name) else env.get_wrapper_attr(name))
        return out

    def set_attr(self, local: list[int], name: str, values: list[Any]) -> Any:
        for i, value in zip(local, values):
            env = self.envs[i]
            if hasattr(env, "set_wrapper_attr"):
                env.set_wrapper_attr(name, value)
            else:
                setattr(env, name, value)
        return None

    def is_wrapped(self, local: list[int], wrapper_class: type) -> Any:
        out = []
        for i in local:
            env: Any = self.envs[i]
            found = False
            while isinstance(env, gym.Wrapper):
                if isinstance(env, wrapper_class):
                    found = True
                    break
                env = env.env
            out.append(found)
        return out

    def last_info(self, local: list[int]) -> Any:
        return [self.last_infos[i] for i in local]

    def spaces(self) -> Any:
        env = self.envs[0]
        return (
            [e.observation_space for e in self.envs],
            [e.action_space for e in self.envs],
            env.spec,
            env.metadata,
            env.render_mode,
        )

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:  # closing the others matters more than one close error
                traceback.print_exc()


def pickled_error(exc: BaseException) -> tuple[bytes | None, str, str]:
    """An exception as (pickled exception or None, its type name, its formatted traceback)."""
    text = "".join(traceback.format_exception(exc))
    blob: bytes | None
    try:
        blob = pickle.dumps(exc)
        pickle.loads(blob)  # some exceptions pickle but do not unpickle
    except Exception:
        blob = None
    return blob, type(exc).__name__, text


def run_worker(
    spec: WorkerSpec,
    buffers: SharedBuffers,
    commands: Any,
    reply: Any,
    done: Any,
    crash: Any = None,
    gc_on: bool = True,
) -> None:
    """The worker process's main function (see the module docstring). `crash`: the writer end
    of the engine's `CrashStack` for this worker (its stack if it dies of a fatal signal);
    `gc_on`: whether the engine's process collects garbage (forked with the collector paused)."""
    adopt_inherited_objects(gc_on)  # never finalize the engine process's garbage (Ray's, ...)
    if crash is not None:
        record_crash_stack(crash)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    die_with_parent(spec.parent_pid or os.getppid())  # 0: forkserver (its server is the parent)
    mark_worker()  # a live viewer reads these envs through the engine, never on their own
    try:
        worker = _Worker(spec, buffers, done.fileno(), reply)
    except Exception as exc:
        reply.send_bytes(pickle.dumps(("error", pickled_error(exc))))
        return
    reply.send_bytes(dumps(("ok", worker.spaces())))
    try:
        while True:
            message = commands.recv_bytes()
            if message[:1] in (STEP, STEP_ALL):
                worker.step(decode_step_command(message), each=message[:1] == STEP)
                continue
            name, *args = pickle.loads(message)  # from the main process that started this one
            if name == "step":  # actions that travel pickled (spaces shared memory cannot hold)
                worker.step(args[0], each=args[2], actions=args[1])
                continue
            if name == "close":
                worker.close()
                reply.send_bytes(pickle.dumps(("ok", None)))
                return
            try:
                result = getattr(worker, name)(*args)
                blob = dumps(("ok", result))
            except Exception as exc:
                blob = pickle.dumps(("error", pickled_error(exc)))
            reply.send_bytes(blob)
    except (EOFError, BrokenPipeError, KeyboardInterrupt):  # the main process went away
        worker.close()
