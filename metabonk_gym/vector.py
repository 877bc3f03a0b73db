"""Vectorised envs: `make_vec`, the one way to run several copies of any env of the suite.

What differs between envs is data on their registration (`metabonk_gym.registration.env_traits`):
an env whose emulator allows one instance per process (GBA) runs each copy in a subprocess
(gymnasium's `AsyncVectorEnv` with shared-memory observations, as every env does here); an env
with `port_per_env` (Megabonk) gets `port=base_port + i` for copy `i`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym

from metabonk_gym.registration import env_traits


def _make_env(
    env_id: str, wrappers: Sequence[Callable[[gym.Env], gym.Env]], kwargs: dict[str, Any]
) -> gym.Env:
    import metabonk_gym  # noqa: F401  (registers the ids inside the subprocess)

    env = gym.make(env_id, **kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env


def per_env_kwargs(
    env_id: str, num_envs: int, base_port: int | None = None, **kwargs: Any
) -> list[dict[str, Any]]:
    """The `gym.make` keyword arguments of each of `num_envs` copies of `env_id`: `kwargs`, and
    for envs with one port per copy, `port=base_port + i` (default: the env's default base port).

    >>> [k["port"] for k in per_env_kwargs("MetaBonk/Megabonk-v0", 3, base_port=6000)]
    [6000, 6001, 6002]
    >>> per_env_kwargs("MetaBonk/BonkQuest-v0", 2, obs_type="state")
    [{'obs_type': 'state'}, {'obs_type': 'state'}]
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, not {num_envs}")
    traits = env_traits(env_id)
    per_env = [dict(kwargs) for _ in range(num_envs)]
    if traits.port_per_env:
        if "port" in kwargs:
            raise TypeError(f"{env_id}: pass base_port (env i uses base_port + i), not port")
        first = traits.default_base_port if base_port is None else int(base_port)
        assert first is not None
        if not 1 <= first <= 65536 - num_envs:
            raise ValueError(f"base_port {first} with {num_envs} envs leaves the TCP port range")
        for i, env_kwargs in enumerate(per_env):
            env_kwargs["port"] = first + i
    elif base_port is not None:
        raise TypeError(f"base_port applies to envs with one port per copy, not to {env_id}")
    return per_env


class _AsyncVectorEnv(gym.vector.AsyncVectorEnv):
    """gymnasium's `AsyncVectorEnv` with two guards: an info value of None counts as absent (its
    mask False) rather than breaking the batch, and `close()` waits at most `close_timeout_s` for
    a call in progress, then terminates the workers."""

    #: The longest `close()` waits for a step or reset in progress.
    close_timeout_s = 30.0

    def _add_info(
        self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int
    ) -> dict[str, Any]:
        # gymnasium types a key's array from the first env that has it: a None after a float
        # (a latency not measured yet) or beside a dict (no target) raised mid-step, leaving the
        # other workers' answers unread and the next `close()` waiting for them for ever.
        present = {key: value for key, value in env_info.items() if value is not None}
        return super()._add_info(vector_infos, present, env_num)

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        super().close_extras(self.close_timeout_s if timeout is None else timeout, terminate)


def make_vec(
    env_id: str,
    num_envs: int,
    *,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    shared_memory: bool = True,
    context: str | None = None,
    base_port: int | None = None,
    **kwargs: Any,
) -> gym.vector.AsyncVectorEnv:
    """`num_envs` copies of `env_id`, one subprocess each (`AsyncVectorEnv`).

    `wrappers` apply inside each subprocess (picklable callables); `kwargs` go to every
    `gym.make`. Envs with one port per copy (`MetaBonk/Megabonk-v0`) talk to `base_port + i`
    (default 5560); `context` is the multiprocessing start method (`spawn` is the safe choice in
    a process that holds threads or torch).

    >>> import metabonk_gym
    >>> envs = metabonk_gym.make_vec("MetaBonk/BonkQuest-v0", 2)
    >>> obs, infos = envs.reset(seed=0)
    >>> obs.shape
    (2, 160, 240, 3)
    >>> envs.close()
    """
    per_env = per_env_kwargs(env_id, num_envs, base_port, **kwargs)
    fns = [partial(_make_env, env_id, tuple(wrappers), env_kwargs) for env_kwargs in per_env]
    return _AsyncVectorEnv(fns, shared_memory=shared_memory, context=context)
