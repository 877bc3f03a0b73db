"""`make_vec`: the one way to run several copies of any env of the suite, on the shared-memory
vector engine.

What differs between envs is data on their registration (`metabonk_gym.registration.env_traits`):
an env with `port_per_env` (Megabonk) gets `port=base_port + i` for copy `i`. Every env can share
a worker process with others (`envs_per_worker`, default about one worker per core): TCP and HTTP
clients trivially, embedded mGBA cores through private copies of stable-retro's extension.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from metabonk_gym.registration import env_traits
from metabonk_gym.vector.gym_env import SharedMemoryVectorEnv


def make_one(
    env_id: str, wrappers: Sequence[Callable[[gym.Env], gym.Env]], kwargs: dict[str, Any]
) -> gym.Env:
    """Build one env in a worker: `gym.make(env_id, **kwargs)` then each wrapper in order."""
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


def default_envs_per_worker(env_id: str, num_envs: int) -> int:
    """Enough envs per worker for about one worker per core: fewer processes and fewer wake-ups
    per step than one process per env, at the same parallelism. (Embedded mGBA cores share a
    worker through private copies of stable-retro: `metabonk_gym.gba.backends.core_copies`.)

    >>> default_envs_per_worker("MetaBonk/BonkQuest-v0", 1)
    1
    """
    env_traits(env_id)  # an unknown id fails here, clearly
    return max(1, -(-num_envs // (os.cpu_count() or 1)))


def make_vec(
    env_id: str,
    num_envs: int,
    *,
    wrappers: Sequence[Callable[[gym.Env], gym.Env]] = (),
    envs_per_worker: int | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    info_keys: Sequence[str] | None = None,
    copy: bool = True,
    context: str | None = None,
    base_port: int | None = None,
    step_timeout_s: float = 60.0,
    **kwargs: Any,
) -> SharedMemoryVectorEnv:
    """`num_envs` copies of `env_id` in worker processes that share memory with this one
    (gymnasium's `VectorEnv` API, NEXT_STEP autoreset by default, and EnvPool-style
    `async_reset`/`send`/`recv` pool mode). `envs_per_worker` (default: about one worker per
    core) envs step one after the other in each worker.

    `wrappers` apply inside each worker (picklable callables); `kwargs` go to every `gym.make`.
    Envs with one port per copy (`MetaBonk/Megabonk-v0`) talk to `base_port + i` (default 5560).
    `info_keys` (default: the env's variables, `info_names`, which hold the contract's `hp`,
    `max_hp`, `won`, `lost`, and the `added_info_keys` of its wrappers) reach this process every step through shared memory (pass `()` for
    the fastest steps); the whole info arrives at an episode's end and from `envs.last_infos()`. `context` is
    the multiprocessing start method (`spawn` is the safe choice in a process that holds
    threads); a worker that dies or takes longer than `step_timeout_s` raises `EnvWorkerError`.

    >>> import metabonk_gym
    >>> envs = metabonk_gym.make_vec("MetaBonk/BonkQuest-v0", 2)
    >>> obs, infos = envs.reset(seed=0)
    >>> obs, rewards, terminated, truncated, infos = envs.step([0, 0])
    >>> obs.shape, infos["room"].tolist(), infos["hp"].tolist()
    ((2, 160, 240, 3), [1, 1], [5, 5])
    >>> envs.close()
    """
    per_env = per_env_kwargs(env_id, num_envs, base_port, **kwargs)
    fns = [partial(make_one, env_id, tuple(wrappers), env_kwargs) for env_kwargs in per_env]
    if envs_per_worker is None:
        envs_per_worker = default_envs_per_worker(env_id, num_envs)
    return SharedMemoryVectorEnv(
        fns,
        envs_per_worker=envs_per_worker,
        autoreset_mode=autoreset_mode,
        info_keys=None if info_keys is None else tuple(info_keys),
        copy=copy,
        context=context,
        step_timeout_s=step_timeout_s,
    )
