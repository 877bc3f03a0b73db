"""`VecEngine`: N envs in worker processes that write their results into shared memory, stepped
all at once or as a pool (the first K that are ready), with a deadline on every wait.

The main process's work per step is one small pipe write per worker and a wait on one completion
pipe (see `metabonk_gym.vector.worker`): no frame is pickled, so its CPU time per env step stays a
few microseconds however large the frames are. `SharedMemoryVectorEnv` (gymnasium's `VectorEnv`
API) and training's SB3 `VecEnv` are thin views over this one engine.

>>> from functools import partial
>>> import gymnasium as gym
>>> engine = VecEngine([partial(gym.make, "CartPole-v1")] * 2, context="fork")
>>> obs, infos = engine.reset(seeds=[0, 1])
>>> obs.shape
(2, 4)
>>> engine.step(np.array([0, 1]))
array([0, 1])
>>> engine.rewards.tolist()
[1.0, 1.0]
>>> engine.close()
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import select
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory

from metabonk_gym.errors import EnvWorkerError
from metabonk_gym.process import die_with_parent
from metabonk_gym.vector.worker import (
    BOOL,
    FLOAT,
    INT,
    STEP,
    STEP_ALL,
    SharedBuffers,
    WorkerSpec,
    pickled_error,
    run_worker,
)

#: How long a worker may take to build its envs.
START_TIMEOUT_S = 120.0
#: How often a wait for a step checks that every worker is alive.
LIVENESS_S = 0.25


def _fork_or_spawn() -> str:
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


class _WorkerHandle:
    """The main process's end of one worker: its process, pipes and envs."""

    def __init__(self, index: int, env_ids: list[int], process: Any, commands: Any, reply: Any):
        self.index = index
        self.env_ids = env_ids
        self.process = process
        self.commands = commands
        self.reply = reply

    def describe(self) -> str:
        envs = ", ".join(map(str, self.env_ids))
        return f"worker {self.index} (pid {self.process.pid}, env{'s' if len(self.env_ids) > 1 else ''} {envs})"

    def exit_reason(self) -> str:
        code = self.process.exitcode
        if code is None:
            return "is still running"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"


class VecEngine:
    """N envs in worker processes over shared memory (see the module docstring).

    Args:
        env_fns: builds each env (picklable where the start method is `spawn`).
        envs_per_worker: envs each worker steps one after the other (1: one process per env, what
            an emulator that allows one instance per process needs).
        autoreset: what happens after an episode ends (gymnasium's `AutoresetMode`):
            NEXT_STEP (the next step of that env resets it and returns the reset observation,
            gymnasium's default), SAME_STEP (reset at once; the final observation is kept in
            `final_observations` and the final info returned), or DISABLED.
        info_keys: the info keys whose values reach the main process every step: numbers and
            booleans through shared columns, anything else pickled (None: the env's variables,
            its `info_names`). An episode's final info always arrives whole; `last_infos()`
            fetches the whole latest info of any env.
        context: the multiprocessing start method (default `fork` where there is one: workers
            start in milliseconds; `spawn` where this process holds threads that fork would copy
            in a bad state).
        step_timeout_s: the longest a step may take before its worker counts as hung.
        call_timeout_s: the same for resets and `call`s.
        spaces: the (observation, action) space of one env where the caller knows them;
            otherwise one env is built in a short-lived process to learn them (shared memory is
            sized before the workers start, and an emulator allows one instance per process).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        envs_per_worker: int = 1,
        autoreset: AutoresetMode = AutoresetMode.NEXT_STEP,
        info_keys: Sequence[str] | None = (),
        context: str | None = None,
        step_timeout_s: float = 60.0,
        call_timeout_s: float = 300.0,
        spaces: tuple[gym.Space, gym.Space] | None = None,
    ) -> None:
        if not env_fns:
            raise ValueError("VecEngine needs at least one env")
        if not 1 <= envs_per_worker <= 255:  # a step command names each env in one byte
            raise ValueError(f"envs_per_worker must be in 1..255, not {envs_per_worker}")
        if len(env_fns) > 65535:
            raise ValueError("VecEngine runs at most 65535 envs")
        for name, value in (("step_timeout_s", step_timeout_s), ("call_timeout_s", call_timeout_s)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, not {value}")
        self.num_envs = len(env_fns)
        self.autoreset = AutoresetMode(autoreset)
        requested = None if info_keys is None else tuple(info_keys)
        self.info_keys: tuple[str, ...] = ()
        self.step_timeout_s = float(step_timeout_s)
        self.call_timeout_s = float(call_timeout_s)
        self.closed = False
        self._workers: list[_WorkerHandle] = []
        self._worker_of = np.zeros(self.num_envs, np.int32)
        self._local_of = np.zeros(self.num_envs, np.int32)
        self._pending: set[int] = set()  # envs stepping now
        self._ready: list[int] = []  # envs finished, not yet returned by recv()
        self._replies: dict[int, dict[str, Any]] = {}
        self._errors: list[tuple[int, tuple[bytes | None, str, str]]] = []
        self._poll: Any = None
        self._done_r = -1
        ctx = multiprocessing.get_context(context or _fork_or_spawn())
        try:
            self._start(env_fns, envs_per_worker, ctx, spaces, requested)
        except BaseException:
            self.close(timeout_s=5.0)
            raise

    # start --------------------------------------------------------------------------------
    def _start(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        per: int,
        ctx: Any,
        spaces: tuple[gym.Space, gym.Space] | None,
        requested: tuple[str, ...] | None,
    ) -> None:
        n = self.num_envs
        # One completion pipe for all workers; a Connection so that spawned workers get the fd.
        done_reader, done_w = ctx.Pipe(duplex=False)
        self._done_conn = done_reader
        self._done_r = done_reader.fileno()
        groups = [list(range(s, min(s + per, n))) for s in range(0, n, per)]
        if spaces is None:
            described = self._spaces_from(env_fns[0], ctx)
            spaces = described[0], described[1]
            if requested is None:
                requested = tuple(described[5])
        self.info_keys = requested or ()
        self.single_observation_space, self.single_action_space = spaces
        k = len(self.info_keys)
        self.buffers = SharedBuffers(
            observations=create_shared_memory(self.single_observation_space, n, ctx),
            final_observations=create_shared_memory(self.single_observation_space, n, ctx),
            actions=create_shared_memory(self.single_action_space, n, ctx),
            rewards=ctx.Array("d", n),
            terminations=ctx.Array("b", n),
            truncations=ctx.Array("b", n),
            info_values=ctx.Array("d", max(1, n * k)),
            info_kinds=ctx.Array("b", max(1, n * k)),
            has_reply=ctx.Array("b", n),
        )
        b = self.buffers
        self.observations = read_from_shared_memory(
            self.single_observation_space, b.observations, n
        )
        self.final_observations = read_from_shared_memory(
            self.single_observation_space, b.final_observations, n
        )
        self.actions = read_from_shared_memory(self.single_action_space, b.actions, n)
        self.rewards = np.frombuffer(b.rewards.get_obj(), np.float64)
        self.terminations = np.frombuffer(b.terminations.get_obj(), np.bool_)
        self.truncations = np.frombuffer(b.truncations.get_obj(), np.bool_)
        self.info_values = np.frombuffer(b.info_values.get_obj(), np.float64)[: n * k].reshape(n, k)
        self.info_kinds = np.frombuffer(b.info_kinds.get_obj(), np.int8)[: n * k].reshape(n, k)
        self._has_reply = np.frombuffer(b.has_reply.get_obj(), np.bool_)
        parent = os.getpid()
        try:
            for w, ids in enumerate(groups):
                spec = WorkerSpec(
                    [env_fns[i] for i in ids], ids, n, self.autoreset, self.info_keys, parent
                )
                cmd_r, cmd_w = ctx.Pipe(duplex=False)
                rep_r, rep_w = ctx.Pipe(duplex=False)
                process = ctx.Process(
                    target=run_worker,
                    args=(spec, b, cmd_r, rep_w, done_w),
                    name=f"metabonk-vec-{w}",
                    daemon=True,
                )
                process.start()
                cmd_r.close()
                rep_w.close()
                self._workers.append(_WorkerHandle(w, ids, process, cmd_w, rep_r))
                for local, i in enumerate(ids):
                    self._worker_of[i] = w
                    self._local_of[i] = local
        finally:
            done_w.close()  # the workers hold it now
        self._poll = select.poll()  # the completion pipe only: a sentinel per worker would
        # make every wait cost more; a dead worker is found when a wait times out (LIVENESS_S)
        self._poll.register(self._done_r, select.POLLIN)
        # `send` to every env (the training loop's step) reuses these: no per-env Python work
        self._step_all = [
            (handle, STEP_ALL + bytes(range(len(handle.env_ids)))) for handle in self._workers
        ]
        for handle in self._workers:
            obs_space, act_space, self.spec, self.metadata, self.render_mode = self._expect_reply(
                handle, START_TIMEOUT_S, "start"
            )
            if (obs_space, act_space) != (self.single_observation_space, self.single_action_space):
                raise ValueError(
                    f"{handle.describe()}: its env's spaces ({obs_space}, {act_space}) differ from "
                    f"the engine's ({self.single_observation_space}, {self.single_action_space}); "
                    "every env of a vector env must have the same spaces"
                )

    @staticmethod
    def _spaces_from(env_fn: Callable[[], gym.Env], ctx: Any) -> tuple[Any, ...]:
        """Build one env in a short-lived process and return its spaces, spec and metadata
        (an emulator allows one instance per process, so never in this one)."""
        rd, wr = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_describe_env, args=(env_fn, wr, os.getpid()), daemon=True)
        process.start()
        wr.close()
        try:
            if not rd.poll(START_TIMEOUT_S):
                raise EnvWorkerError(
                    f"building the first env took over {START_TIMEOUT_S:.0f} s; "
                    "check that its game or emulator answers"
                )
            try:
                status, value = pickle.loads(rd.recv_bytes())
            except EOFError:
                process.join(1.0)
                raise EnvWorkerError(
                    f"the process building the first env died (exit code {process.exitcode})"
                ) from None
            if status == "error":
                _raise_worker_error(value, "building the first env")
            return tuple(value)
        finally:
            rd.close()
            process.join(5.0)
            if process.is_alive():
                process.kill()

    # waiting ------------------------------------------------------------------------------
    def _fail(self, message: str) -> EnvWorkerError:
        """Close everything and return the error to raise."""
        self.close(timeout_s=2.0)
        return EnvWorkerError(f"{message} (the vector env is closed)")

    def _read_completions(self, deadline: float, what: str) -> None:
        """Block until at least one pending env completes (or fail at the deadline)."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stuck = sorted(self._pending)
                handles = {self._workers[self._worker_of[i]].describe() for i in stuck}
                raise self._fail(
                    f"{what}: {', '.join(sorted(handles))} did not answer within "
                    f"{self.step_timeout_s:g} s (hung; killed)"
                )
            if not self._poll.poll(min(remaining, LIVENESS_S) * 1000.0):
                for handle in self._workers:
                    if not handle.process.is_alive():
                        raise self._fail(f"{what}: {handle.describe()} {handle.exit_reason()}")
                continue
            data = os.read(self._done_r, 2 * max(1, len(self._pending)))
            if not data:  # every worker's end closed: all are gone
                raise self._fail(f"{what}: every worker exited")
            for gid in np.frombuffer(data, np.uint16).tolist():
                self._complete(gid)
            return

    def _complete(self, gid: int) -> None:
        self._pending.discard(gid)
        if self._has_reply[gid]:
            handle = self._workers[self._worker_of[gid]]
            payload = pickle.loads(handle.reply.recv_bytes())
            if "error" in payload:
                self._errors.append((gid, payload["error"]))
            else:
                self._replies[gid] = payload
        self._ready.append(gid)

    def _expect_reply(self, handle: _WorkerHandle, timeout_s: float, what: str) -> Any:
        """The reply of one worker to a pickled command, within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not handle.reply.poll(min(1.0, max(0.0, deadline - time.monotonic()))):
            if not handle.process.is_alive() and not handle.reply.poll(0):
                raise self._fail(f"{what}: {handle.describe()} {handle.exit_reason()}")
            if time.monotonic() >= deadline:
                raise self._fail(
                    f"{what}: {handle.describe()} did not answer within {timeout_s:g} s (hung; killed)"
                )
        try:
            status, value = pickle.loads(handle.reply.recv_bytes())
        except (EOFError, OSError):
            handle.process.join(1.0)
            raise self._fail(f"{what}: {handle.describe()} {handle.exit_reason()}") from None
        if status == "error":
            _raise_worker_error(value, f"{what} in {handle.describe()}")
        return value

    def _command(
        self, by_worker: dict[int, Any], message: Callable[[Any], tuple]
    ) -> dict[int, Any]:
        """Send a pickled command to some workers and collect their replies."""
        busy = sorted(i for i in self._pending if int(self._worker_of[i]) in by_worker)
        if busy:
            raise RuntimeError(f"envs {busy} are stepping: recv() their results first")
        for w, arg in by_worker.items():
            self._send(self._workers[w], pickle.dumps(message(arg)))
        return {
            w: self._expect_reply(self._workers[w], self.call_timeout_s, message(arg)[0])
            for w, arg in by_worker.items()
        }

    def _send(self, handle: _WorkerHandle, blob: bytes) -> None:
        try:
            handle.commands.send_bytes(blob)
        except OSError:
            handle.process.join(1.0)
            raise self._fail(f"sending to {handle.describe()}: it {handle.exit_reason()}") from None

    def _group(self, env_ids: Sequence[int] | None) -> dict[int, list[int]]:
        ids = range(self.num_envs) if env_ids is None else env_ids
        groups: dict[int, list[int]] = {}
        for i in ids:
            if not 0 <= int(i) < self.num_envs:
                raise IndexError(f"env index {i} out of range for {self.num_envs} envs")
            groups.setdefault(int(self._worker_of[i]), []).append(int(i))
        return groups

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this vector env is closed; build a new one")

    # the API ------------------------------------------------------------------------------
    def reset(
        self,
        env_ids: Sequence[int] | None = None,
        seeds: Sequence[int | None] | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
    ) -> tuple[Any, list[dict[str, Any]]]:
        """Reset `env_ids` (default all) with a seed and options each; returns the observations
        of all envs (shared memory) and the reset infos of `env_ids`."""
        self._check_open()
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        seeds = list(seeds) if seeds is not None else [None] * len(ids)
        options = list(options) if options is not None else [None] * len(ids)
        if len(seeds) != len(ids) or len(options) != len(ids):
            raise ValueError(
                f"reset: {len(ids)} envs but {len(seeds)} seeds / {len(options)} options"
            )
        requests: dict[int, list[tuple[int, int | None, Any]]] = {}
        order: dict[int, list[int]] = {}
        for i, seed, opt in zip(ids, seeds, options):
            w = int(self._worker_of[i])
            requests.setdefault(w, []).append((int(self._local_of[i]), seed, opt))
            order.setdefault(w, []).append(i)
        replies = self._command(requests, lambda reqs: ("reset", reqs))
        infos: dict[int, dict[str, Any]] = {}
        for w, answer in replies.items():
            infos.update(zip(order[w], answer))
        return self.observations, [infos[i] for i in ids]

    def send(self, actions: Any, env_ids: Sequence[int] | None = None) -> None:
        """Start a step of `env_ids` (default all) with `actions` (one row per env in `env_ids`)."""
        self._check_open()
        if env_ids is None:  # every env: the messages are built once (`_step_all`)
            if self._pending:
                raise RuntimeError(
                    f"envs {sorted(self._pending)} are still stepping: recv() them first"
                )
            _copy_rows(self.actions, actions, None)
            self._pending.update(range(self.num_envs))
            for handle, message in self._step_all:
                self._send(handle, message)
            return
        groups = self._group(env_ids)
        busy = self._pending.intersection(i for ids in groups.values() for i in ids)
        if busy:
            raise RuntimeError(f"envs {sorted(busy)} are still stepping: recv() them first")
        _copy_rows(self.actions, actions, np.asarray(env_ids, np.intp))
        for w, ids in groups.items():
            local = bytes(int(self._local_of[i]) for i in ids)
            self._pending.update(ids)
            self._send(self._workers[w], STEP + local)

    def recv(self, min_ready: int | None = None) -> np.ndarray:
        """Wait until at least `min_ready` stepping envs have finished (default: all of them) and
        return their indices (pool mode: in the order they finished)."""
        self._check_open()
        want = len(self._pending) + len(self._ready) if min_ready is None else int(min_ready)
        if want > len(self._pending) + len(self._ready):
            raise ValueError(
                f"recv({want}): only {len(self._pending) + len(self._ready)} envs are stepping"
            )
        deadline = time.monotonic() + self.step_timeout_s
        while len(self._ready) < want:
            self._read_completions(deadline, "step")
        if self._errors:
            while self._pending:  # keep the protocol in step before raising
                self._read_completions(deadline, "step")
            self._ready.clear()
            gid, error = self._errors[0]
            self._errors.clear()
            self._replies.clear()
            handle = self._workers[self._worker_of[gid]]
            _raise_worker_error(error, f"step of env {gid} in {handle.describe()}")
        ready = np.asarray(self._ready[:want] if min_ready is not None else self._ready, np.intp)
        del self._ready[: len(ready)]
        return ready

    def step(self, actions: Any) -> np.ndarray:
        """Step every env (send + recv); returns the env indices (all of them, sorted)."""
        self.send(actions)
        return np.sort(self.recv())

    def pop_replies(self, env_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The pickled extras of the last step of `env_ids` (`final_info`, non-number info)."""
        if not self._replies:
            return {}
        return {i: self._replies.pop(i) for i in env_ids if i in self._replies}

    def scalar_infos(self, env_id: int) -> dict[str, Any]:
        """The requested number-valued infos of one env's last step, as Python values."""
        out: dict[str, Any] = {}
        kinds = self.info_kinds[env_id]
        values = self.info_values[env_id]
        for k, key in enumerate(self.info_keys):
            kind = kinds[k]
            if kind == FLOAT:
                out[key] = float(values[k])
            elif kind == INT:
                out[key] = int(values[k])
            elif kind == BOOL:
                out[key] = bool(values[k])
        return out

    def call(
        self, name: str, *args: Any, env_ids: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Any]:
        """Call method `name` (or read attribute `name`) of each env in `env_ids` (default all)."""
        self._check_open()
        groups = self._group(env_ids)
        replies = self._command(
            groups, lambda ids: ("call", [int(self._local_of[i]) for i in ids], name, args, kwargs)
        )
        results = {i: r for w, ids in groups.items() for i, r in zip(ids, replies[w])}
        return [results[int(i)] for i in (range(self.num_envs) if env_ids is None else env_ids)]

    def set_attr(
        self, name: str, values: Sequence[Any], env_ids: Sequence[int] | None = None
    ) -> None:
        """Set attribute `name` of each env in `env_ids` to the matching value."""
        self._check_open()
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        value_of = dict(zip(ids, values))
        groups = self._group(ids)
        self._command(
            groups,
            lambda g: (
                "set_attr",
                [int(self._local_of[i]) for i in g],
                name,
                [value_of[i] for i in g],
            ),
        )

    def last_infos(self, env_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """The whole latest info of each env in `env_ids`: what `info_keys` left out is here."""
        self._check_open()
        groups = self._group(env_ids)
        replies = self._command(
            groups, lambda g: ("last_info", [int(self._local_of[i]) for i in g])
        )
        results = {i: r for w, ids in groups.items() for i, r in zip(ids, replies[w])}
        return [results[int(i)] for i in (range(self.num_envs) if env_ids is None else env_ids)]

    def is_wrapped(self, wrapper_class: type, env_ids: Sequence[int] | None = None) -> list[bool]:
        """Whether each env in `env_ids` (default all) has a wrapper of `wrapper_class`."""
        self._check_open()
        groups = self._group(env_ids)
        replies = self._command(
            groups, lambda g: ("is_wrapped", [int(self._local_of[i]) for i in g], wrapper_class)
        )
        results = {i: r for w, ids in groups.items() for i, r in zip(ids, replies[w])}
        return [results[int(i)] for i in (range(self.num_envs) if env_ids is None else env_ids)]

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids."""
        return [h.process.pid for h in self._workers]

    def exitcodes(self) -> list[int | None]:
        """The worker processes' exit codes (None while one runs; negative: killed by that
        signal)."""
        return [h.process.exitcode for h in self._workers]

    def close(self, timeout_s: float = 10.0) -> None:
        """Close every env and worker: a worker that does not finish within `timeout_s` (a step
        in progress counts) is killed. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for handle in self._workers:
            with contextlib.suppress(OSError, ValueError):
                handle.commands.send_bytes(pickle.dumps(("close",)))
        deadline = time.monotonic() + timeout_s
        for handle in self._workers:
            handle.process.join(max(0.0, deadline - time.monotonic()))
            if handle.process.is_alive():
                handle.process.kill()
                handle.process.join(2.0)
            for conn in (handle.commands, handle.reply):
                with contextlib.suppress(OSError):
                    conn.close()
        if self._done_r >= 0:
            with contextlib.suppress(OSError):
                self._done_conn.close()
            self._done_r = -1
        self._pending.clear()
        self._ready.clear()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close(timeout_s=1.0)


def _copy_rows(dest: Any, src: Any, rows: np.ndarray | None) -> None:
    """Copy a batch of actions (array, dict or tuple of arrays) into shared memory."""
    if isinstance(dest, dict):
        for key, value in dest.items():
            _copy_rows(value, src[key], rows)
    elif isinstance(dest, tuple):
        for d, s in zip(dest, src):
            _copy_rows(d, s, rows)
    elif rows is None:
        dest[...] = np.asarray(src).reshape(dest.shape)
    else:
        dest[rows] = np.asarray(src).reshape((len(rows), *dest.shape[1:]))


def _raise_worker_error(error: tuple[bytes | None, str, str], where: str) -> None:
    """Raise an exception sent by a worker: the original type when it unpickles, with the
    worker's traceback as a note; else an `EnvWorkerError` quoting it."""
    blob, type_name, text = error
    exc: BaseException | None = None
    if blob is not None:
        with contextlib.suppress(Exception):
            exc = pickle.loads(blob)  # from our own worker process, never from a file
    if isinstance(exc, BaseException):
        exc.add_note(f"(raised in {where}; worker traceback:)\n{text}")
        raise exc
    raise EnvWorkerError(f"{where} raised {type_name}:\n{text}")


def declared_info_names(env: gym.Env) -> list[str]:
    """The info keys an env declares: the base env's `info_names` (its variables), then the
    `added_info_keys` of each wrapper around it, outermost first.

    >>> import gymnasium as gym
    >>> declared_info_names(gym.make("CartPole-v1"))
    []
    """
    names = list(getattr(env.unwrapped, "info_names", None) or [])
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        names += [k for k in getattr(layer, "added_info_keys", ()) if k not in names]
        layer = layer.env
    return names


def _describe_env(env_fn: Callable[[], gym.Env], conn: Any, parent: int) -> None:
    """Run in a short-lived process: build one env and send back its spaces and spec."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    try:
        env = env_fn()
        try:
            answer: tuple[str, Any] = (
                "ok",
                (
                    env.observation_space,
                    env.action_space,
                    env.spec,
                    env.metadata,
                    env.render_mode,
                    declared_info_names(env),
                ),
            )
        finally:
            env.close()
        conn.send_bytes(pickle.dumps(answer))
    except Exception as exc:
        conn.send_bytes(pickle.dumps(("error", pickled_error(exc))))
