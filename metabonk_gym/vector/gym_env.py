"""`SharedMemoryVectorEnv`: gymnasium's `VectorEnv` API over the shared-memory `VecEngine`, with
EnvPool's `send`/`recv` pool mode for asynchronous collection.

Infos follow gymnasium's layout (a dict of arrays, each with a `_key` mask). Only the keys in
`info_keys` arrive every step (numbers through shared memory); an episode's final info always
arrives whole; `last_infos()` fetches the whole latest info of any env.

>>> from functools import partial
>>> import gymnasium as gym
>>> envs = SharedMemoryVectorEnv([partial(gym.make, "CartPole-v1")] * 3, context="fork")
>>> obs, infos = envs.reset(seed=0)
>>> obs.shape, envs.metadata["autoreset_mode"].name
((3, 4), 'NEXT_STEP')
>>> envs.async_reset(seed=0)
>>> obs, rewards, terminations, truncations, infos = envs.recv(2)  # the first 2 envs ready
>>> len(infos["env_id"]), rewards.shape
(2, (2,))
>>> envs.close()
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import logger
from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError
from gymnasium.vector import AutoresetMode
from gymnasium.vector.async_vector_env import AsyncState
from gymnasium.vector.utils import iterate

from metabonk_gym.vector.engine import VecEngine
from metabonk_gym.vector.worker import BOOL, INT


@dataclass
class _InfoLayout:
    """The present info keys of a batch, grouped by kind, with their (read-only) masks."""

    signature: bytes
    groups: list[tuple[np.ndarray, list[str], int]]
    masks: dict[str, np.ndarray]


def _copy(obs: Any) -> Any:
    """A copy of a batched observation (array, dict or tuple of arrays)."""
    if isinstance(obs, dict):
        return {key: _copy(value) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_copy(value) for value in obs)
    return obs.copy()


#: Methods `call` refuses, as gymnasium's `AsyncVectorEnv` does: the vector env does these.
_NOT_CALLABLE = ("reset", "step", "close", "_setattr", "_check_spaces")


class SharedMemoryVectorEnv(gym.vector.VectorEnv):
    """N envs in worker processes over shared memory (see the module docstring). It takes
    `AsyncVectorEnv`'s arguments and answers its API (`reset_async`/`reset_wait`,
    `step_async`/`step_wait`, `call_async`/`call_wait`, its errors); docs/vector.md lists where
    it deliberately differs.

    Args:
        env_fns: builds each env (closures too: cloudpickle carries them under `spawn`).
        shared_memory: None (default): observations and actions through shared memory where
            their space allows, else pickled through the pipes; True: shared memory or
            gymnasium's error; False: always the pipes.
        copy: return copies of the observations (False: views of shared memory that the next
            step overwrites).
        context: the multiprocessing start method.
        daemon: the workers' daemon flag.
        worker: gymnasium's custom worker function: not supported (the engine's workers speak
            their own protocol); anything but None raises.
        observation_mode: "same", "different" or a (batched, single) pair of spaces.
        autoreset_mode: gymnasium's autoreset mode (default NEXT_STEP: the step after an
            episode's end resets that env and returns its first observation, with reward 0).
        envs_per_worker: envs per worker process (1 where an emulator allows one per process).
        info_keys: info keys returned every step (None: the env's declared variables, its
            `info_names` and its wrappers' `added_info_keys`, or every key for an env that
            declares none; `()`: none, the fastest); the rest: `last_infos()`, and whole at an
            episode's end.
        step_timeout_s: the longest one step may take before its worker counts as hung
            (`EnvWorkerError`).
        spaces: one env's (observation, action) spaces, where known (skips building a probe).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        shared_memory: bool | None = None,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Any = None,
        observation_mode: str | tuple[gym.Space, gym.Space] = "same",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        *,
        envs_per_worker: int = 1,
        info_keys: Sequence[str] | None = None,
        step_timeout_s: float = 60.0,
        spaces: tuple[gym.Space, gym.Space] | None = None,
    ) -> None:
        if worker is not None:
            raise ValueError(
                "SharedMemoryVectorEnv does not take a custom `worker` function: its workers "
                "speak the engine's shared-memory protocol; wrap the env instead"
            )
        self.engine = VecEngine(
            env_fns,
            envs_per_worker=envs_per_worker,
            autoreset=AutoresetMode(autoreset_mode),
            info_keys=info_keys,
            context=context,
            step_timeout_s=step_timeout_s,
            spaces=spaces,
            shared_memory=shared_memory,
            observation_mode=observation_mode,
            daemon=daemon,
        )
        self.num_envs = self.engine.num_envs
        self.copy = copy
        self.shared_memory = self.engine.shared_obs
        self.observation_mode = observation_mode
        self.single_observation_space = self.engine.single_observation_space
        self.single_action_space = self.engine.single_action_space
        self.observation_space = self.engine.observation_space
        self.action_space = self.engine.action_space
        self.metadata = dict(self.engine.metadata or {})
        self.metadata["autoreset_mode"] = self.engine.autoreset
        self.autoreset_mode = self.engine.autoreset
        self.spec = self.engine.spec
        self.render_mode = self.engine.render_mode
        self._layouts: dict[int, _InfoLayout] = {}
        self._state = AsyncState.DEFAULT

    # gymnasium's API --------------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env (or those of `options["reset_mask"]`): `seed` an int (env i gets
        seed + i), a list, or None."""
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(
        self,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Start resetting the envs; `reset_wait` returns the result."""
        self._assert_is_running()
        seeds = self._seeds(seed)
        self._assert_idle("reset_async")
        ids = list(range(self.num_envs))
        if options is not None and "reset_mask" in options:
            options = dict(options)
            mask = options.pop("reset_mask")
            assert isinstance(mask, np.ndarray), (
                f"`options['reset_mask': mask]` must be a numpy array, got {type(mask)}"
            )
            assert mask.shape == (self.num_envs,), (
                f"`options['reset_mask': mask]` must have shape `({self.num_envs},)`, "
                f"got {mask.shape}"
            )
            assert mask.dtype == np.bool_, (
                f"`options['reset_mask': mask]` must have `dtype=np.bool_`, got {mask.dtype}"
            )
            assert np.any(mask), (
                f"`options['reset_mask': mask]` must contain a boolean array, got reset_mask={mask}"
            )
            ids = np.flatnonzero(mask).tolist()
        self.engine.reset_send(ids, [seeds[i] for i in ids], [options] * len(ids))
        self._state = AsyncState.WAITING_RESET

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        """The observations and infos of the reset `reset_async` started (`timeout`: raise
        `multiprocessing.TimeoutError` past it; the reset stays pending)."""
        self._assert_is_running()
        if self._state is not AsyncState.WAITING_RESET:
            raise NoAsyncCallError(
                "Calling `reset_wait` without any prior call to `reset_async`.",
                AsyncState.WAITING_RESET.value,
            )
        ids = self.engine._reset_ids
        try:
            _, infos = self.engine.reset_collect(timeout)
        except multiprocessing.TimeoutError:
            raise
        except BaseException:
            self._state = AsyncState.DEFAULT
            raise
        self._state = AsyncState.DEFAULT
        vector_infos: dict[str, Any] = {}
        for i, info in zip(ids, infos):
            vector_infos = self._add_info(vector_infos, info, i)
        return self._observations(), vector_infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with one action each."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Start a step of every env; `step_wait` returns its result."""
        self._assert_is_running()
        self._assert_idle("step_async", ".")
        engine = self.engine
        if engine.shared_actions:
            if not isinstance(actions, (dict, tuple, list)) and np.ndim(actions) == 0:
                raise TypeError(
                    f"a vector env of {self.num_envs} envs takes one action per env, "
                    f"not the scalar {actions!r}"
                )
            engine.send(actions)
        else:
            engine.send(list(iterate(self.action_space, actions)))
        self._state = AsyncState.WAITING_STEP

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The result of the step `step_async` started (`timeout`: raise
        `multiprocessing.TimeoutError` past it; the step stays pending)."""
        self._assert_is_running()
        if self._state is not AsyncState.WAITING_STEP:
            raise NoAsyncCallError(
                "Calling `step_wait` without any prior call to `step_async`.",
                AsyncState.WAITING_STEP.value,
            )
        engine = self.engine
        try:
            engine.recv(timeout_s=timeout)
        except multiprocessing.TimeoutError:
            raise
        except BaseException:
            self._state = AsyncState.DEFAULT
            raise
        self._state = AsyncState.DEFAULT
        return (
            self._observations(),
            engine.rewards.copy(),
            engine.terminations.copy(),
            engine.truncations.copy(),
            self._infos(np.arange(self.num_envs)),
        )

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method `name` of every env (an attribute that is not callable is returned)."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Start `call`; `call_wait` returns the results."""
        self._assert_is_running()
        self._assert_idle("call_async", ".")
        if name in _NOT_CALLABLE:
            raise ValueError(
                f"Trying to call function `{name}` with `call`, use `{name}` directly instead."
            )
        self.engine.call_send(name, *args, **kwargs)
        self._state = AsyncState.WAITING_CALL

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """The results of the `call_async` in flight."""
        self._assert_is_running()
        if self._state is not AsyncState.WAITING_CALL:
            raise NoAsyncCallError(
                "Calling `call_wait` without any prior call to `call_async`.",
                AsyncState.WAITING_CALL.value,
            )
        try:
            results = self.engine.call_collect(timeout)
        except multiprocessing.TimeoutError:
            raise
        except BaseException:
            self._state = AsyncState.DEFAULT
            raise
        self._state = AsyncState.DEFAULT
        return tuple(results)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute `name` of every env, never called (a method comes back as the method;
        `call` is for calling)."""
        self._assert_is_running()
        self._assert_idle("get_attr", ".")
        return tuple(self.engine.get_attr(name))

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute `name` of every env (one value for all, or a list of one per env)."""
        self._assert_is_running()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                "Values must be a list or tuple with length equal to the number of "
                f"environments. Got `{len(values)}` values for {self.num_envs} environments."
            )
        self._assert_idle("set_attr", ".")
        self.engine.set_attr(name, values)

    @property  # type: ignore[misc]
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """Each env's `np_random_seed`."""
        return self.get_attr("np_random_seed")

    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Each env's random number generator (copies: the envs live in other processes)."""
        return self.get_attr("np_random")

    def render(self) -> tuple[Any, ...] | None:
        """Each env's `render()`."""
        return self.call("render")

    def last_infos(self, env_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """The whole latest info of each env (default all): what `info_keys` leaves out."""
        self._assert_is_running()
        return self.engine.last_infos(env_ids)

    def close_extras(
        self, timeout: float | None = None, terminate: bool = False, **kwargs: Any
    ) -> None:
        """End every worker: within `timeout` seconds (default 10), or at once (`terminate`)."""
        engine = getattr(self, "engine", None)  # None: __init__ failed before it existed
        if engine is None:
            return
        state = getattr(self, "_state", AsyncState.DEFAULT)
        if state is not AsyncState.DEFAULT:
            logger.warn(
                f"Calling `close` while waiting for a pending call to `{state.value}` to complete."
            )
        engine.close(timeout_s=0.0 if terminate else (10.0 if timeout is None else timeout))

    # pool mode (EnvPool's async API) ----------------------------------------------------------
    def async_reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Reset every env and mark all of them ready, for `recv()` (pool mode)."""
        self._assert_is_running()
        self._assert_idle("async_reset", ".")
        self.engine.reset(seeds=self._seeds(seed), options=[options] * self.num_envs)
        self.engine.rewards[:] = 0.0
        self.engine.terminations[:] = False
        self.engine.truncations[:] = False
        self.engine._ready.extend(range(self.num_envs))

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """Start a step of `env_ids` (returned by the last `recv()`) with one action each."""
        self._assert_is_running()
        self._assert_idle("send", ".")
        self.engine.send(actions, [int(i) for i in env_ids])

    def recv(
        self, batch_size: int | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The first `batch_size` envs to finish their step (default: every env stepping), in the
        order they finished; `infos["env_id"]` says which. Batches of envs that finish in a
        different order each run, so results depend on timing: use `step()` where runs must
        reproduce."""
        self._assert_is_running()
        ids = self.engine.recv(batch_size)
        obs = self.engine.batch(ids)
        infos = self._infos(ids)
        infos["env_id"] = ids
        return (
            obs,
            self.engine.rewards[ids],
            self.engine.terminations[ids],
            self.engine.truncations[ids],
            infos,
        )

    # helpers ----------------------------------------------------------------------------------
    def _add_info(
        self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int
    ) -> dict[str, Any]:
        # gymnasium types a key's array from the first env that has it: a None after a number
        # (a latency not measured yet) or beside a dict (no target) would break the batch.
        present = {key: value for key, value in env_info.items() if value is not None}
        return super()._add_info(vector_infos, present, env_num)

    def _assert_is_running(self) -> None:
        self.engine._check_open()

    def _assert_idle(self, what: str, stop: str = "") -> None:
        if self._state is not AsyncState.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `{what}` while waiting for a pending call to `{self._state.value}` "
                f"to complete{stop}",
                str(self._state.value),
            )

    def _observations(self) -> Any:
        obs = self.engine.batch()
        return _copy(obs) if self.copy and self.engine.shared_obs else obs

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, (int, np.integer)):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
        return seeds

    def _layout(self, ids: np.ndarray) -> _InfoLayout:
        """Which info keys are present and of which kind, for envs `ids`: recomputed only when
        the kinds change (they rarely do), so a step costs a few numpy operations in all."""
        kinds = self.engine.info_kinds[ids]
        signature = kinds.tobytes()
        cached = self._layouts.get(len(ids))
        if cached is not None and cached.signature == signature:
            return cached
        present = kinds > 0
        kind_of = kinds.max(axis=0)
        keys = self.engine.info_keys
        groups = []
        for kind in np.unique(kind_of).tolist():
            if kind:
                cols = np.flatnonzero(kind_of == kind)
                groups.append((cols, [keys[c] for c in cols.tolist()], kind))
        masks = {}
        for c in np.flatnonzero(kind_of).tolist():
            mask = present[:, c].copy()
            mask.flags.writeable = False  # shared between steps: copied before any change
            masks[f"_{keys[c]}"] = mask
        layout = _InfoLayout(signature, groups, masks)
        self._layouts[len(ids)] = layout
        return layout

    def _infos(self, ids: np.ndarray) -> dict[str, Any]:
        """gymnasium's info layout for envs `ids` (rows in that order)."""
        engine = self.engine
        size = len(ids)  # step() passes every env, in order; recv() the ready ones
        rows = np.arange(size)
        infos: dict[str, Any] = {}
        if engine.info_keys:
            layout = self._layout(ids)
            values = engine.info_values[ids]
            for cols, names, kind in layout.groups:
                sub = values[:, cols]
                if kind == BOOL:
                    sub = sub != 0
                elif kind == INT:
                    sub = sub.astype(np.int64)
                infos.update(zip(names, sub.T))
            infos.update(layout.masks)
        replies = engine.pop_replies(ids.tolist())
        if not replies:
            return infos
        for key, value in infos.items():  # `_add_info` writes into the masks
            if key.startswith("_") and not value.flags.writeable:
                infos[key] = value.copy()
        saved = self.num_envs
        self.num_envs = size  # `_add_info` sizes new arrays by num_envs
        try:
            for row, i in zip(rows.tolist(), ids.tolist()):
                reply = replies.get(i)
                if not reply:
                    continue
                extra = dict(reply.get("info") or {})
                final = reply.get("final_info")
                if final is not None:
                    if engine.autoreset is AutoresetMode.SAME_STEP:
                        extra["final_info"] = final
                        extra["final_obs"] = engine.row(i, final=True)
                    else:
                        extra = {**final, **extra}
                infos = self._add_info(infos, extra, row)
        finally:
            self.num_envs = saved
        return infos
