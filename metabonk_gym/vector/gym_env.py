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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from metabonk_gym.vector.engine import VecEngine
from metabonk_gym.vector.worker import BOOL, INT


def _rows(obs: Any, ids: np.ndarray) -> Any:
    """Rows `ids` of a batched observation (array, dict or tuple): a copy."""
    if isinstance(obs, dict):
        return {key: _rows(value, ids) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_rows(value, ids) for value in obs)
    return obs[ids]


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


def _row(obs: Any, i: int) -> Any:
    """Row `i` of a batched observation: a copy."""
    if isinstance(obs, dict):
        return {key: _row(value, i) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_row(value, i) for value in obs)
    return obs[i].copy()


class SharedMemoryVectorEnv(gym.vector.VectorEnv):
    """N envs in worker processes over shared memory (see the module docstring).

    Args:
        env_fns: builds each env (picklable where the start method is `spawn`).
        envs_per_worker: envs per worker process (1 where an emulator allows one per process).
        autoreset_mode: gymnasium's autoreset mode (default NEXT_STEP: the step after an
            episode's end resets that env and returns its first observation, with reward 0).
        info_keys: info keys returned every step (None: the env's variables, its `info_names`,
            and its wrappers' `added_info_keys`;
            the rest: `last_infos()`, and whole at an episode's end).
        copy: return copies of the observations (False: views of shared memory that the next
            step overwrites).
        context: the multiprocessing start method.
        step_timeout_s: the longest one step may take before its worker counts as hung
            (`EnvWorkerError`).
        spaces: one env's (observation, action) spaces, where known (skips building a probe).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        envs_per_worker: int = 1,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        info_keys: Sequence[str] | None = (),
        copy: bool = True,
        context: str | None = None,
        step_timeout_s: float = 60.0,
        spaces: tuple[gym.Space, gym.Space] | None = None,
    ) -> None:
        self.engine = VecEngine(
            env_fns,
            envs_per_worker=envs_per_worker,
            autoreset=AutoresetMode(autoreset_mode),
            info_keys=info_keys,
            context=context,
            step_timeout_s=step_timeout_s,
            spaces=spaces,
        )
        self.num_envs = self.engine.num_envs
        self.copy = copy
        self.single_observation_space = self.engine.single_observation_space
        self.single_action_space = self.engine.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = dict(self.engine.metadata or {})
        self.metadata["autoreset_mode"] = self.engine.autoreset
        self.spec = self.engine.spec
        self.render_mode = self.engine.render_mode
        self._layouts: dict[int, _InfoLayout] = {}

    # gymnasium's API --------------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env: `seed` an int (env i gets seed + i), a list, or None."""
        seeds = self._seeds(seed)
        obs, infos = self.engine.reset(seeds=seeds, options=[options] * self.num_envs)
        vector_infos: dict[str, Any] = {}
        for i, info in enumerate(infos):
            vector_infos = self._add_info(vector_infos, info, i)
        return (_copy(obs) if self.copy else obs), vector_infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with one action each."""
        ids = self.engine.step(actions)
        obs = self.engine.observations
        return (
            _copy(obs) if self.copy else obs,
            self.engine.rewards.copy(),
            self.engine.terminations.copy(),
            self.engine.truncations.copy(),
            self._infos(np.sort(ids)),
        )

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method `name` (or read attribute `name`) of every env."""
        return tuple(self.engine.call(name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute `name` of every env."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute `name` of every env (one value for all, or a list of one per env)."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        self.engine.set_attr(name, values)

    def render(self) -> tuple[Any, ...] | None:
        """Each env's `render()`."""
        return self.call("render")

    def last_infos(self, env_ids: Sequence[int] | None = None) -> list[dict[str, Any]]:
        """The whole latest info of each env (default all): what `info_keys` leaves out."""
        return self.engine.last_infos(env_ids)

    def close_extras(self, **kwargs: Any) -> None:
        engine = getattr(self, "engine", None)  # None: __init__ failed before it existed
        if engine is not None:
            engine.close()

    # pool mode (EnvPool's async API) ----------------------------------------------------------
    def async_reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        """Reset every env and mark all of them ready, for `recv()` (pool mode)."""
        self.engine.reset(seeds=self._seeds(seed), options=[options] * self.num_envs)
        self.engine.rewards[:] = 0.0
        self.engine.terminations[:] = False
        self.engine.truncations[:] = False
        self.engine._ready.extend(range(self.num_envs))

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray) -> None:
        """Start a step of `env_ids` (returned by the last `recv()`) with one action each."""
        self.engine.send(actions, [int(i) for i in env_ids])

    def recv(
        self, batch_size: int | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The first `batch_size` envs to finish their step (default: every env stepping), in the
        order they finished; `infos["env_id"]` says which. Batches of envs that finish in a
        different order each run, so results depend on timing: use `step()` where runs must
        reproduce."""
        ids = self.engine.recv(batch_size)
        obs = _rows(self.engine.observations, ids)
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
                        extra["final_obs"] = _row(engine.final_observations, i)
                    else:
                        extra = {**final, **extra}
                infos = self._add_info(infos, extra, row)
        finally:
            self.num_envs = saved
        return infos
