"""Vectorised envs. stable-retro allows one emulator per process, so GBA envs always run in
subprocesses: gymnasium's `AsyncVectorEnv` with shared-memory observations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym


def _make_env(
    env_id: str, wrappers: Sequence[Callable[[gym.Env], gym.Env]], kwargs: dict[str, Any]
) -> gym.Env:
    import metabonk_gym  # noqa: F401  (registers the ids inside the subprocess)

    env = gym.make(env_id, **kwargs)
    for wrapper in wrappers:
        env = wrapper(env)
    return env


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
    """`num_envs` copies of `env_id`, one subprocess each.

    `wrappers` apply inside each subprocess (picklable callables). For `MetaBonk/Megabonk-v0`,
    env i connects to port `base_port + i` (default 5560).

    >>> import metabonk_gym
    >>> envs = metabonk_gym.make_vec("MetaBonk/BonkQuest-v0", 2)
    >>> obs, infos = envs.reset(seed=0)
    >>> obs.shape
    (2, 160, 240, 3)
    >>> envs.close()
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, not {num_envs}")
    per_env: list[dict[str, Any]] = [dict(kwargs) for _ in range(num_envs)]
    if env_id.split(":")[-1].startswith("MetaBonk/Megabonk"):
        first = 5560 if base_port is None else base_port
        for i, env_kwargs in enumerate(per_env):
            env_kwargs["port"] = first + i
    elif base_port is not None:
        raise TypeError("base_port only applies to MetaBonk/Megabonk-v0")
    fns = [partial(_make_env, env_id, tuple(wrappers), env_kwargs) for env_kwargs in per_env]
    return gym.vector.AsyncVectorEnv(fns, shared_memory=shared_memory, context=context)
