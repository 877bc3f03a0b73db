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
import copy as copy_module
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
from gymnasium.error import ClosedEnvironmentError, CustomSpaceError
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import (
    CloudpickleWrapper,
    batch_differing_spaces,
    batch_space,
    concatenate,
    create_empty_array,
    create_shared_memory,
    read_from_shared_memory,
)

from metabonk_gym.errors import EnvWorkerError
from metabonk_gym.process import (
    CrashStack,
    adopt_inherited_objects,
    die_with_parent,
    gc_paused,
    record_crash_stack,
)
from metabonk_gym.vector.worker import (
    BOOL,
    FLOAT,
    INT,
    STEP,
    STEP_ALL,
    SharedBuffers,
    WorkerSpec,
    dumps,
    pickled_error,
    run_worker,
    shareable,
)

#: How long a worker may take to build its envs.
START_TIMEOUT_S = 120.0
#: How often a wait for a step checks that every worker is alive.
LIVENESS_S = 0.25


def _parent_pid(ctx: Any) -> int:
    """The pid a worker's parent will have: this process, or under `forkserver` 0 (the worker's
    parent is the fork server, which ends with this process)."""
    return 0 if ctx.get_start_method() == "forkserver" else os.getpid()


def _fork_or_spawn() -> str:
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


class VectorEnvClosedError(ClosedEnvironmentError, RuntimeError):
    """A vector env was used after `close()` (gymnasium's `ClosedEnvironmentError`, and a
    `RuntimeError` as before)."""


class _WorkerHandle:
    """The main process's end of one worker: its process, pipes and envs."""

    def __init__(
        self,
        index: int,
        env_ids: list[int],
        process: Any,
        commands: Any,
        reply: Any,
        stack: CrashStack,
    ):
        self.index = index
        self.env_ids = env_ids
        self.process = process
        self.commands = commands
        self.reply = reply
        self.stack = stack  # where it died of a fatal signal, or hung (faulthandler's)

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
        env_fns: builds each env (closures too: they travel with cloudpickle, as in
            gymnasium's `AsyncVectorEnv`).
        envs_per_worker: envs each worker steps one after the other (1: one process per env, what
            an emulator that allows one instance per process needs).
        autoreset: what happens after an episode ends (gymnasium's `AutoresetMode`):
            NEXT_STEP (the next step of that env resets it and returns the reset observation,
            gymnasium's default), SAME_STEP (reset at once; the final observation, `row(i,
            final=True)`, and the final info come back pickled with that step), or DISABLED.
        info_keys: the info keys whose values reach the main process every step: numbers and
            booleans through shared columns, anything else pickled. None: the env's declared
            variables (its `info_names` and its wrappers' `added_info_keys`), or, for an env that
            declares none, every key (pickled, as gymnasium does). An episode's final info
            always arrives whole; `last_infos()` fetches the whole latest info of any env.
        context: the multiprocessing start method (default `fork` where there is one: workers
            start in milliseconds; `spawn` where this process holds threads that fork would copy
            in a bad state). A forked worker never collects the objects it inherited
            (`metabonk_gym.process.adopt_inherited_objects`: their native destructors can crash
            outside this process).
        step_timeout_s: the longest a step may take before its worker counts as hung.
        call_timeout_s: the same for resets and `call`s.
        spaces: the (observation, action) space of one env where the caller knows them;
            otherwise one env is built in a short-lived process to learn them (shared memory is
            sized before the workers start, and an emulator allows one instance per process).
        shared_memory: observations and actions through shared memory (True), through the
            pipes, pickled (False), or shared where the space allows it (None: spaces of
            dynamic size, custom spaces, `Text` and `OneOf` go through the pipes).
        observation_mode: gymnasium's: "same" (every env has the same observation space),
            "different" (same shape and dtype, other bounds) or a (batched, single) pair.
        daemon: the workers' daemon flag (False lets an env start processes of its own).
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
        shared_memory: bool | None = None,
        observation_mode: str | tuple[gym.Space, gym.Space] = "same",
        daemon: bool = True,
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
        if not (
            observation_mode in ("same", "different")
            or (
                isinstance(observation_mode, tuple)
                and len(observation_mode) == 2
                and all(isinstance(s, gym.Space) for s in observation_mode)
            )
        ):
            raise ValueError(
                "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single "
                f"and batch observation space, actual got {observation_mode}"
            )
        self.num_envs = len(env_fns)
        self.autoreset = AutoresetMode(autoreset)
        self.observation_mode = observation_mode
        requested = None if info_keys is None else tuple(info_keys)
        self.info_keys: tuple[str, ...] = ()
        self.all_infos = False
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
        self._awaiting: dict[int, str] = {}  # workers that owe the reply to a command
        self._poll: Any = None
        self._done_r = -1
        # observations that travel through the pipes (spaces shared memory cannot hold)
        self.obs_items: list[Any] = [None] * self.num_envs
        self.final_obs_items: list[Any] = [None] * self.num_envs
        ctx = multiprocessing.get_context(context or _fork_or_spawn())
        try:
            self._start(env_fns, envs_per_worker, ctx, spaces, requested, shared_memory, daemon)
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
        shared_memory: bool | None,
        daemon: bool,
    ) -> None:
        n = self.num_envs
        fns = [CloudpickleWrapper(fn) for fn in env_fns]  # closures under spawn/forkserver
        # One completion pipe for all workers; a Connection so that spawned workers get the fd.
        done_reader, done_w = ctx.Pipe(duplex=False)
        self._done_conn = done_reader
        self._done_r = done_reader.fileno()
        groups = [list(range(s, min(s + per, n))) for s in range(0, n, per)]
        obs_space, act_space = self._set_spaces(fns, ctx, spaces, requested, shared_memory)
        self._make_buffers(ctx, obs_space, act_space)
        try:
            for w, ids in enumerate(groups):
                self._spawn_worker(w, [fns[i] for i in ids], ids, ctx, done_w, daemon)
        finally:
            done_w.close()  # the workers hold it now
        self._poll = select.poll()  # the completion pipe only: a sentinel per worker would
        # make every wait cost more; a dead worker is found when a wait times out (LIVENESS_S)
        self._poll.register(self._done_r, select.POLLIN)
        # `send` to every env (the training loop's step) reuses these: no per-env Python work
        self._step_all = [
            (handle, STEP_ALL + bytes(range(len(handle.env_ids)))) for handle in self._workers
        ]
        self._await_starts()

    def _set_spaces(
        self,
        fns: list[Any],
        ctx: Any,
        spaces: tuple[gym.Space, gym.Space] | None,
        requested: tuple[str, ...] | None,
        shared_memory: bool | None,
    ) -> tuple[gym.Space, gym.Space]:
        """The spaces (given, or described by a throwaway env from `fns[0]`), the info keys sent
        as numbers, and whether observations and actions live in shared memory. Returns one
        env's observation and action spaces."""
        n = self.num_envs
        declared: list[str] | None = None
        if spaces is None:
            described = self._spaces_from(fns[0], ctx)
            spaces = described[0], described[1]
            declared = list(described[5])
        if requested is None:
            requested = tuple(declared or ())
            self.all_infos = not requested  # an env that declares nothing: every key, pickled
        self.info_keys = requested
        obs_space, act_space = spaces
        mode = self.observation_mode
        if isinstance(mode, tuple):
            self.observation_space, obs_space = mode
        else:
            self.observation_space = batch_space(obs_space, n)  # "different": set below
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.action_space = batch_space(act_space, n)
        self.shared_obs = _use_shared_memory(obs_space, shared_memory)
        self.shared_actions = _use_shared_memory(act_space, shared_memory)
        return obs_space, act_space

    def _make_buffers(self, ctx: Any, obs_space: gym.Space, act_space: gym.Space) -> None:
        """The shared arrays every worker writes its envs' results into, and numpy views of
        them."""
        n, k = self.num_envs, len(self.info_keys)

        def shared(space: gym.Space, yes: bool) -> Any:
            return create_shared_memory(space, n, ctx) if yes else None

        self.buffers = SharedBuffers(
            observations=shared(obs_space, self.shared_obs),
            final_observations=None,  # a final observation travels with its final info
            actions=shared(act_space, self.shared_actions),
            rewards=ctx.Array("d", n),
            terminations=ctx.Array("b", n),
            truncations=ctx.Array("b", n),
            info_values=ctx.Array("d", max(1, n * k)),
            info_kinds=ctx.Array("b", max(1, n * k)),
            has_reply=ctx.Array("b", n),
        )
        b = self.buffers
        self.observations: Any = None
        self.final_observations: Any = None
        self.actions: Any = None
        if self.shared_obs:
            self.observations = read_from_shared_memory(obs_space, b.observations, n)
        if self.shared_actions:
            self.actions = read_from_shared_memory(act_space, b.actions, n)
        self.rewards = np.frombuffer(b.rewards.get_obj(), np.float64)
        self.terminations = np.frombuffer(b.terminations.get_obj(), np.bool_)
        self.truncations = np.frombuffer(b.truncations.get_obj(), np.bool_)
        self.info_values = np.frombuffer(b.info_values.get_obj(), np.float64)[: n * k].reshape(n, k)
        self.info_kinds = np.frombuffer(b.info_kinds.get_obj(), np.int8)[: n * k].reshape(n, k)
        self._has_reply = np.frombuffer(b.has_reply.get_obj(), np.bool_)

    def _spawn_worker(
        self, w: int, fns: list[Any], ids: list[int], ctx: Any, done_w: Any, daemon: bool
    ) -> None:
        """Start worker `w`, which runs the envs `ids` (made by `fns`)."""
        spec = WorkerSpec(
            fns,
            ids,
            self.num_envs,
            self.autoreset,
            self.info_keys,
            _parent_pid(ctx),
            shared_obs=self.shared_obs,
            shared_actions=self.shared_actions,
            all_infos=self.all_infos,
        )
        cmd_r, cmd_w = ctx.Pipe(duplex=False)
        rep_r, rep_w = ctx.Pipe(duplex=False)
        stack = CrashStack(ctx)
        with gc_paused() as gc_on:  # the worker freezes what it inherits first
            process = ctx.Process(
                target=run_worker,
                args=(spec, self.buffers, cmd_r, rep_w, done_w, stack.writer, gc_on),
                name=f"metabonk-vec-{w}",
                daemon=daemon,
            )
            process.start()
        cmd_r.close()
        rep_w.close()
        stack.started()
        self._workers.append(_WorkerHandle(w, ids, process, cmd_w, rep_r, stack))
        for local, i in enumerate(ids):
            self._worker_of[i] = w
            self._local_of[i] = local

    def _await_starts(self) -> None:
        """Every worker's answer to its start (its envs' spaces, spec, metadata); then the
        first error, if any, is raised (`_raise_worker_error`), else the spaces are checked."""
        env_obs: list[gym.Space] = []
        env_act: list[gym.Space] = []
        errors = []
        for handle in self._workers:  # read every worker's answer before raising any error
            status, value = self._expect_reply(handle, START_TIMEOUT_S, "start")
            if status == "error":
                errors.append((handle, value))
                continue
            obs_spaces, act_spaces, self.spec, self.metadata, self.render_mode = value
            env_obs += obs_spaces
            env_act += act_spaces
        if errors:
            handle, value = errors[0]
            _raise_worker_error(value, f"start in {handle.describe()}")
        self._check_spaces(env_obs, env_act)

    def _check_spaces(self, env_obs: list[gym.Space], env_act: list[gym.Space]) -> None:
        """Every env's spaces against the engine's, with gymnasium's errors and messages."""
        single = self.single_observation_space
        if self.observation_mode == "same":
            if any(space != single for space in env_obs):
                raise RuntimeError(
                    "AsyncVectorEnv(..., observation_mode='same') however some of the "
                    "sub-environments observation spaces are not equivalent. If this is "
                    "intentional, use `observation_mode='different'` instead."
                )
        else:
            if self.observation_mode == "different":
                self.observation_space = batch_differing_spaces(env_obs)
            if any(
                type(space) is not type(single)
                or getattr(space, "shape", None) != getattr(single, "shape", None)
                or getattr(space, "dtype", None) != getattr(single, "dtype", None)
                for space in env_obs
            ):
                raise RuntimeError(
                    "AsyncVectorEnv(..., observation_mode='different' or custom space) however "
                    "the sub-environment's observation spaces do not share a common shape and "
                    "dtype."
                )
        if any(space != self.single_action_space for space in env_act):
            raise RuntimeError(
                f"Some environments have an action space different from "
                f"`{self.single_action_space}`. In order to batch actions, the action spaces "
                "from all environments must be equal."
            )

    @staticmethod
    def _spaces_from(env_fn: Callable[[], gym.Env], ctx: Any) -> tuple[Any, ...]:
        """Build one env in a short-lived process and return its spaces, spec and metadata
        (an emulator allows one instance per process, so never in this one)."""
        rd, wr = ctx.Pipe(duplex=False)
        stack = CrashStack(ctx)
        with gc_paused() as gc_on:  # the child freezes what it inherits first
            process = ctx.Process(
                target=_describe_env,
                args=(env_fn, wr, _parent_pid(ctx), stack.writer, gc_on),
                daemon=True,
            )
            process.start()
        wr.close()
        stack.started()
        try:
            if not rd.poll(START_TIMEOUT_S):
                raise EnvWorkerError(
                    f"building the first env took over {START_TIMEOUT_S:.0f} s; "
                    "check that its game or emulator answers"
                    + _stack_note("its stack then", stack.dump(process.pid))
                )
            try:
                status, value = pickle.loads(rd.recv_bytes())
            except EOFError:
                process.join(1.0)
                raise EnvWorkerError(
                    f"the process building the first env died (exit code {process.exitcode})"
                    + _stack_note("where it died", stack.text())
                ) from None
            if status == "error":
                _raise_worker_error(value, "building the first env")
            return tuple(value)
        finally:
            rd.close()
            process.join(5.0)
            if process.is_alive():
                process.kill()
            stack.close()

    # waiting ------------------------------------------------------------------------------
    def _fail(self, message: str) -> EnvWorkerError:
        """Close everything and return the error to raise, with the Python stack of each worker
        that died of a fatal signal or hung (`close` asks a hung one before killing it)."""
        self.close(timeout_s=2.0)
        notes = "".join(
            _stack_note(f"{handle.describe()}: where it died or hung", handle.stack.text())
            for handle in self._workers
        )
        return EnvWorkerError(f"{message} (the vector env is closed){notes}")

    def _read_completions(self, deadline: float, what: str, soft: float | None = None) -> None:
        """Block until at least one pending env completes (or fail at the deadline; at `soft`,
        raise `multiprocessing.TimeoutError` and keep the envs pending)."""
        while True:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                stuck = sorted(self._pending)
                handles = {self._workers[self._worker_of[i]].describe() for i in stuck}
                raise self._fail(
                    f"{what}: {', '.join(sorted(handles))} did not answer within "
                    f"{self.step_timeout_s:g} s (hung; killed)"
                )
            wait = min(remaining, LIVENESS_S)
            if soft is not None:
                if now >= soft:
                    raise multiprocessing.TimeoutError(
                        f"{what}: the envs did not finish within the timeout (still pending)"
                    )
                wait = min(wait, soft - now)
            if not self._poll.poll(wait * 1000.0):
                if soft is None or time.monotonic() < soft:
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
            try:  # the worker writes it right after the completion
                payload = pickle.loads(handle.reply.recv_bytes())
            except (EOFError, OSError):
                handle.process.join(1.0)
                raise self._fail(f"step: {handle.describe()} {handle.exit_reason()}") from None
            if "error" in payload:
                self._errors.append((gid, payload["error"]))
            else:
                if "obs" in payload:
                    self.obs_items[gid] = payload.pop("obs")
                if "final_obs" in payload:
                    self.final_obs_items[gid] = payload.pop("final_obs")
                if payload:
                    self._replies[gid] = payload
        self._ready.append(gid)

    def _expect_reply(self, handle: _WorkerHandle, timeout_s: float, what: str) -> Any:
        """The (status, value) reply of one worker to a pickled command, within `timeout_s`."""
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
        self._awaiting.pop(handle.index, None)
        return status, value

    def command_send(self, by_worker: dict[int, Any], message: Callable[[Any], tuple]) -> None:
        """Send a pickled command to some workers; `command_collect` reads their replies."""
        self._check_open()
        busy = sorted(i for i in self._pending if int(self._worker_of[i]) in by_worker)
        if busy:
            raise RuntimeError(f"envs {busy} are stepping: recv() their results first")
        if self._awaiting:
            raise RuntimeError(
                f"a {next(iter(self._awaiting.values()))!r} command is still waiting for its "
                "replies: collect them first"
            )
        for w, arg in by_worker.items():
            blob = message(arg)
            self._send(self._workers[w], dumps(blob))
            self._awaiting[w] = blob[0]

    def command_collect(self, timeout_s: float | None = None) -> dict[int, Any]:
        """The replies of every worker sent a command, read all before any error is raised (so
        that the next command never reads a stale reply). `timeout_s`: raise
        `multiprocessing.TimeoutError` if they are not all there by then, reading none."""
        self._check_open()
        if timeout_s is not None:
            deadline = time.monotonic() + timeout_s
            for w in list(self._awaiting):
                handle = self._workers[w]
                if not handle.reply.poll(max(0.0, deadline - time.monotonic())):
                    if not handle.process.is_alive() and not handle.reply.poll(0):
                        raise self._fail(f"{handle.describe()} {handle.exit_reason()}")
                    raise multiprocessing.TimeoutError(
                        f"the call has timed out after {timeout_s} second(s)"
                    )
        replies: dict[int, Any] = {}
        errors = []
        for w, what in list(self._awaiting.items()):
            handle = self._workers[w]
            status, value = self._expect_reply(handle, self.call_timeout_s, what)
            if status == "error":
                errors.append((handle, what, value))
            else:
                replies[w] = value
        if errors:
            handle, what, value = errors[0]
            _raise_worker_error(value, f"{what} in {handle.describe()}")
        return replies

    def _command(
        self, by_worker: dict[int, Any], message: Callable[[Any], tuple]
    ) -> dict[int, Any]:
        """Send a pickled command to some workers and collect all their replies."""
        self.command_send(by_worker, message)
        return self.command_collect()

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
            raise VectorEnvClosedError("this vector env is closed; build a new one")

    def _in_order(
        self, env_ids: Sequence[int] | None, groups: dict[int, list[int]], replies: dict[int, Any]
    ) -> list[Any]:
        results = {i: r for w, ids in groups.items() for i, r in zip(ids, replies[w])}
        return [results[int(i)] for i in (range(self.num_envs) if env_ids is None else env_ids)]

    # observations ---------------------------------------------------------------------------
    def batch(self, ids: Sequence[int] | np.ndarray | None = None) -> Any:
        """The observations of envs `ids` (default all, in order) as one batch: in shared
        memory a view for all envs and a copy for some; through the pipes always a new batch."""
        if self.shared_obs:
            obs = self.observations
            return obs if ids is None else _rows(obs, np.asarray(ids, np.intp))
        items = self.obs_items
        chosen = items if ids is None else [items[int(i)] for i in ids]
        out = create_empty_array(self.single_observation_space, len(chosen), fn=np.zeros)
        return concatenate(self.single_observation_space, chosen, out)

    def row(self, i: int, final: bool = False) -> Any:
        """One env's observation (a copy), or its last final observation (SAME_STEP: as the
        env returned it)."""
        if final:
            return self.final_obs_items[i]
        if self.shared_obs:
            return _row(self.observations, i)
        return copy_module.deepcopy(self.obs_items[i])

    # the API ------------------------------------------------------------------------------
    def reset_send(
        self,
        env_ids: Sequence[int] | None = None,
        seeds: Sequence[int | None] | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
    ) -> list[int]:
        """Start resetting `env_ids` (default all); `reset_collect` returns their infos."""
        self._check_open()
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        seeds = list(seeds) if seeds is not None else [None] * len(ids)
        options = list(options) if options is not None else [None] * len(ids)
        if len(seeds) != len(ids) or len(options) != len(ids):
            raise ValueError(
                f"reset: {len(ids)} envs but {len(seeds)} seeds / {len(options)} options"
            )
        for i in ids:
            if not 0 <= i < self.num_envs:
                raise IndexError(f"env index {i} out of range for {self.num_envs} envs")
        requests: dict[int, list[tuple[int, int | None, Any]]] = {}
        for i, seed, opt in zip(ids, seeds, options):
            w = int(self._worker_of[i])
            requests.setdefault(w, []).append((int(self._local_of[i]), seed, opt))
        self.command_send(requests, lambda reqs: ("reset", reqs))
        self._reset_ids = ids
        return ids

    def reset_collect(self, timeout_s: float | None = None) -> tuple[Any, list[dict[str, Any]]]:
        """The observations of all envs and the reset infos of the envs `reset_send` reset."""
        replies = self.command_collect(timeout_s)
        ids = self._reset_ids
        order: dict[int, list[int]] = {}
        for i in ids:
            order.setdefault(int(self._worker_of[i]), []).append(i)
        infos: dict[int, dict[str, Any]] = {}
        for w, answer in replies.items():
            for i, (info, obs) in zip(order[w], answer):
                infos[i] = info
                if not self.shared_obs:
                    self.obs_items[i] = obs
        return self.observations, [infos[i] for i in ids]

    def reset(
        self,
        env_ids: Sequence[int] | None = None,
        seeds: Sequence[int | None] | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
    ) -> tuple[Any, list[dict[str, Any]]]:
        """Reset `env_ids` (default all) with a seed and options each; returns the observations
        of all envs (shared memory; None where they travel through the pipes: see `batch`) and
        the reset infos of `env_ids`."""
        self.reset_send(env_ids, seeds, options)
        return self.reset_collect()

    def send(self, actions: Any, env_ids: Sequence[int] | None = None) -> None:
        """Start a step of `env_ids` (default all) with `actions` (one row per env in `env_ids`;
        where actions travel through the pipes, a sequence of one action per env)."""
        self._check_open()
        if self._awaiting:
            raise RuntimeError("a command is still waiting for its replies: collect them first")
        if not self.shared_actions:
            self._send_pickled(actions, env_ids)
            return
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

    def _send_pickled(self, actions: Any, env_ids: Sequence[int] | None) -> None:
        """A step whose actions travel pickled with the command (spaces that shared memory
        cannot hold)."""
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        actions = list(actions)
        if len(actions) != len(ids):
            raise ValueError(f"{len(actions)} actions for {len(ids)} envs")
        groups = self._group(ids)
        busy = self._pending.intersection(ids)
        if busy:
            raise RuntimeError(f"envs {sorted(busy)} are still stepping: recv() them first")
        action_of = dict(zip(ids, actions))
        each = env_ids is not None
        for w, group in groups.items():
            self._pending.update(group)
            message = (
                "step",
                [int(self._local_of[i]) for i in group],
                [action_of[i] for i in group],
                each,
            )
            self._send(self._workers[w], dumps(message))

    def recv(self, min_ready: int | None = None, timeout_s: float | None = None) -> np.ndarray:
        """Wait until at least `min_ready` stepping envs have finished (default: all of them) and
        return their indices (pool mode: in the order they finished). `timeout_s`: raise
        `multiprocessing.TimeoutError` past it, the envs still pending (a later `recv` gets
        them); past `step_timeout_s` a worker counts as hung and the engine closes."""
        self._check_open()
        want = len(self._pending) + len(self._ready) if min_ready is None else int(min_ready)
        if want > len(self._pending) + len(self._ready):
            raise ValueError(
                f"recv({want}): only {len(self._pending) + len(self._ready)} envs are stepping"
            )
        now = time.monotonic()
        deadline = now + self.step_timeout_s
        soft = None if timeout_s is None else now + timeout_s
        while len(self._ready) < want:
            self._read_completions(deadline, "step", soft)
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

    @property
    def stepping(self) -> bool:
        """Whether some envs are stepping or finished and not yet returned by `recv`."""
        return bool(self._pending or self._ready)

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

    def call_send(
        self, name: str, *args: Any, env_ids: Sequence[int] | None = None, **kwargs: Any
    ) -> None:
        """Start `call` (see there); `call_collect` returns the results."""
        groups = self._group(env_ids)
        self.command_send(
            groups, lambda ids: ("call", [int(self._local_of[i]) for i in ids], name, args, kwargs)
        )
        self._call_ids = (env_ids, groups)

    def call_collect(self, timeout_s: float | None = None) -> list[Any]:
        """The results of the `call_send` in flight, in the order of its `env_ids`."""
        replies = self.command_collect(timeout_s)
        env_ids, groups = self._call_ids
        return self._in_order(env_ids, groups, replies)

    def call(
        self, name: str, *args: Any, env_ids: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Any]:
        """Call method `name` of each env in `env_ids` (default all; an attribute that is not
        callable is returned as it is)."""
        self.call_send(name, *args, env_ids=env_ids, **kwargs)
        return self.call_collect()

    def get_attr(self, name: str, env_ids: Sequence[int] | None = None) -> list[Any]:
        """Attribute `name` of each env in `env_ids` (default all), never called: a method
        comes back as the method (`call` is for calling)."""
        self._check_open()
        groups = self._group(env_ids)
        replies = self._command(
            groups, lambda g: ("get_attr", [int(self._local_of[i]) for i in g], name)
        )
        return self._in_order(env_ids, groups, replies)

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
        return self._in_order(env_ids, groups, replies)

    def is_wrapped(self, wrapper_class: type, env_ids: Sequence[int] | None = None) -> list[bool]:
        """Whether each env in `env_ids` (default all) has a wrapper of `wrapper_class`."""
        self._check_open()
        groups = self._group(env_ids)
        replies = self._command(
            groups, lambda g: ("is_wrapped", [int(self._local_of[i]) for i in g], wrapper_class)
        )
        return self._in_order(env_ids, groups, replies)

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
                handle.stack.dump(handle.process.pid, wait_s=0.5)  # where it hangs
                handle.process.kill()
                handle.process.join(2.0)
            handle.stack.close()  # keeps what the worker wrote, for `_fail`
            for conn in (handle.commands, handle.reply):
                with contextlib.suppress(OSError):
                    conn.close()
        if self._done_r >= 0:
            with contextlib.suppress(OSError):
                self._done_conn.close()
            self._done_r = -1
        self._pending.clear()
        self._ready.clear()
        self._awaiting.clear()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close(timeout_s=1.0)


def _use_shared_memory(space: gym.Space, wanted: bool | None) -> bool:
    """Whether `space` travels through shared memory: `wanted` True refuses a space that
    cannot, with gymnasium's errors (ValueError for a custom space, TypeError for one of
    dynamic size); Text and OneOf always travel through the pipes (gymnasium's readers of
    them copy, so a buffer read once would go stale)."""
    if wanted is False:
        return False
    if wanted:
        try:
            create_shared_memory(space, 1)
        except CustomSpaceError as exc:
            raise ValueError(
                "Using `AsyncVector(..., shared_memory=True)` caused an error, you can disable "
                "this feature with `shared_memory=False` however this is slower."
            ) from exc
    return shareable(space)


def _rows(obs: Any, ids: np.ndarray) -> Any:
    """Rows `ids` of a batched observation (array, dict or tuple): a copy."""
    if isinstance(obs, dict):
        return {key: _rows(value, ids) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_rows(value, ids) for value in obs)
    return obs[ids]


def _row(obs: Any, i: int) -> Any:
    """Row `i` of a batched observation: a copy."""
    if isinstance(obs, dict):
        return {key: _row(value, i) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_row(value, i) for value in obs)
    return obs[i].copy()


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


def _stack_note(what: str, stack: str) -> str:
    """A crash stack (`CrashStack.text`) to append to an error message ("" for none)."""
    if not stack:
        return ""
    return f"\n{what} (faulthandler, most recent call first):\n{stack}"


def _describe_env(
    env_fn: Callable[[], gym.Env], conn: Any, parent: int, crash: Any = None, gc_on: bool = True
) -> None:
    """Run in a short-lived process: build one env and send back its spaces and spec."""
    adopt_inherited_objects(gc_on)  # never finalize this process's parent's garbage
    if crash is not None:
        record_crash_stack(crash)  # a fatal signal while building it: its stack reaches the parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent or os.getppid())
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
        conn.send_bytes(dumps(answer))
    except Exception as exc:
        conn.send_bytes(pickle.dumps(("error", pickled_error(exc))))
