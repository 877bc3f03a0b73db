"""Env side of RLlib training: the env creator Ray's env runners call, the frame stack the SB3
path applies with `VecFrameStack`, and (from `safeload`) the spaces-only env that builds a policy
(no ray import).

>>> import gymnasium as gym, numpy as np
>>> space = gym.spaces.Box(0, 255, (20, 30, 1), np.uint8)
>>> env = LastAxisFrameStack(SpacesEnv(space, gym.spaces.Discrete(3)), 4)
>>> env.observation_space.shape
(20, 30, 4)
>>> game_address(["10.0.0.7:5561"], 0)
{'host': '10.0.0.7', 'port': 5561}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.process import die_with_parent
from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.envs import make_env
from metabonk_gym.training.safeload import SpacesEnv  # noqa: F401  (the one spaces-only env, re-exported)
from metabonk_gym.training.stacking import ObservationStacker

#: The name runners look the env creator up by (`ray.tune.registry.register_env`).
ENV_NAME = "metabonk_gym"


class LastAxisFrameStack(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Stacks observations on their last axis exactly as SB3's `VecFrameStack(channels_order=
    "last")` does (zeros after a reset, newest last; each key of a `Dict`), so RLlib's runners feed
    the policy what the SB3 path feeds it.

    Args:
        env: the env.
        frame_stack: how many observations to stack (1: none).
    """

    def __init__(self, env: gym.Env, frame_stack: int) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, frame_stack=frame_stack)
        gym.Wrapper.__init__(self, env)
        self.frame_stack = int(frame_stack)
        self._stacker = ObservationStacker(env.observation_space, self.frame_stack)
        self.keys = self._stacker.keys
        self.observation_space = self._stacker.space

    def _stack(self, obs: Any, reset: bool) -> Any:
        return self._stacker.push(obs, reset, copy=True)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._stack(obs, reset=True), info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._stack(obs, reset=False), reward, terminated, truncated, info


class PlainInfo(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Numpy arrays in `info` become lists (0-d arrays: numbers), so gymnasium's vector envs,
    which stack an array-valued info key across envs, accept arrays whose shape varies between
    envs and steps (e.g. the nearest enemies of a Megabonk state).

    Args:
        env: the env.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    @classmethod
    def plain(cls, info: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in info.items():
            if isinstance(value, dict):
                value = cls.plain(value)
            elif isinstance(value, np.ndarray):
                value = value.item() if value.ndim == 0 else value.tolist()
            out[key] = value
        return out

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self.plain(info)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self.plain(info)


def game_address(games: list[str] | None, index: int) -> dict[str, Any]:
    """`host`/`port` env kwargs of env `index` from a `host:port` list (empty: none given)."""
    if not games:
        return {}
    host, _, port = games[index].rpartition(":")
    return {"host": host or "127.0.0.1", "port": int(port)}


def build_one(
    env_id: str, cfg_data: Mapping[str, Any], games: list[str] | None, index: int
) -> gym.Env:
    """One training env `index` as the SB3 path makes it, plus its frame stack."""
    cfg = TrainConfig.from_dict(cfg_data)
    env = make_env(env_id, cfg, index, **game_address(games, index))
    env = PlainInfo(env)
    return LastAxisFrameStack(env, cfg.frame_stack) if cfg.frame_stack > 1 else env


_CREATED: dict[int, int] = {}


def _in_vector_worker() -> bool:
    """True inside a worker process of gymnasium's `AsyncVectorEnv` (a multiprocessing child)."""
    import multiprocessing

    return multiprocessing.parent_process() is not None


def env_creator(ctx: Any) -> gym.Env:
    """What a runner calls for each of its envs (registered as `ENV_NAME`): env number
    `(worker_index - 1) * envs_per_runner + k`, k counting the envs this runner made (with
    `gym_env_vectorize_mode="sync"` they are made in order in the runner; "async" workers, one
    process per emulator, need no number and die with their runner)."""
    import os
    import signal

    per_runner = int(ctx.get("envs_per_runner", 1))
    worker = max(int(getattr(ctx, "worker_index", 0) or 0) - 1, 0)
    if _in_vector_worker():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        die_with_parent(os.getppid())
        k = 0
    else:
        k = _CREATED.get(worker, 0)
        _CREATED[worker] = k + 1
    return build_one(
        ctx["env_id"], ctx["cfg"], ctx.get("games"), worker * per_runner + k % per_runner
    )
