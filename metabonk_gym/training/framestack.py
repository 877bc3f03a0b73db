"""`LeanFrameStack`: SB3's `VecFrameStack` (channels last) on the project's one stack rule
(`metabonk_gym.training.stacking.push_frame`), for the training vector env.

What: the same stacked observations, zeroed stacks after an episode's end and stacked
`terminal_observation`s as SB3's `StackedObservations`, each step one new stack per key built by
`push_frame` (not `np.roll`, which allocates, copies the whole stack and then has the newest frame
written over what it wrapped around), and no per-key info dicts when no episode ended. Why: with
a `wrappers:` stack every key of a Dict observation is stacked (5 keys with tile tokens), and this
update runs in the trainer's process for each of them at every step (`metabonk bench
train-wrappers`). It stays a subclass of SB3's classes because `VecFrameStack` is what SB3's
`VecEnv` API (batched dones, terminal observations in infos) and saved models expect; the
stacking itself is `push_frame`, as for one env (`ObservationStacker`) and recorded episodes
(`stack_episode`).

>>> import gymnasium as gym, numpy as np
>>> stack = LeanStackedObservations(2, 3, gym.spaces.Box(0, 9, (1, 2), np.int32), "last")
>>> stack.reset(np.array([[[1, 2]], [[3, 4]]]))[0].tolist()
[[0, 0, 0, 0, 1, 2]]
>>> obs, infos = stack.update(np.array([[[5, 6]], [[7, 8]]]), np.array([False, True]),
...                           [{}, {"terminal_observation": np.array([[9, 9]])}])
>>> obs[0].tolist(), obs[1].tolist(), infos[1]["terminal_observation"].tolist()
([[0, 0, 1, 2, 5, 6]], [[0, 0, 0, 0, 7, 8]], [[0, 0, 3, 4, 9, 9]])
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecFrameStack
from stable_baselines3.common.vec_env.stacked_observations import StackedObservations

from metabonk_gym.training.stacking import push_frame


class LeanStackedObservations(StackedObservations):
    """SB3's `StackedObservations`, channels last, on `push_frame` (module docstring).

    Args:
        num_envs, n_stack, observation_space, channels_order: as `StackedObservations` (a
            Dict's keys get lean stacks too; channels first falls back to SB3's update).
    """

    def __init__(
        self,
        num_envs: int,
        n_stack: int,
        observation_space: Any,
        channels_order: str | None = None,
    ) -> None:
        super().__init__(num_envs, n_stack, observation_space, channels_order)
        if isinstance(observation_space, spaces.Dict):  # the keys' stacks: lean ones too
            orders = (
                channels_order
                if isinstance(channels_order, Mapping)
                else dict.fromkeys(observation_space.spaces, channels_order)
            )
            self.sub_stacked_observations = {
                key: LeanStackedObservations(num_envs, n_stack, space, orders[key])
                for key, space in observation_space.spaces.items()
            }

    def reset(self, observation: Any) -> Any:
        if isinstance(observation, dict) or self.channels_first:
            return super().reset(observation)  # a Dict: each key's (lean) stack
        self.stacked_obs = push_frame(np.zeros_like(self.stacked_obs), observation)
        return self.stacked_obs

    def update(  # type: ignore[override]
        self, observations: Any, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> tuple[Any, list[dict[str, Any]]]:
        if isinstance(observations, dict):
            return self._update_keys(observations, dones, infos), infos
        if self.channels_first:
            return super().update(observations, dones, infos)
        old = self.stacked_obs
        stacked = push_frame(old, observations)
        for env_idx in np.flatnonzero(dones).tolist():
            info = infos[env_idx]
            if "terminal_observation" in info:
                info["terminal_observation"] = push_frame(
                    old[env_idx], info["terminal_observation"]
                )
            else:
                warnings.warn(
                    "VecFrameStack wrapping a VecEnv without terminal_observation info",
                    stacklevel=2,
                )
            stacked[env_idx, ..., : -observations.shape[-1]] = 0  # a new episode: zeros before it
        self.stacked_obs = stacked
        return stacked, infos

    def _update_keys(
        self, observations: dict[str, Any], dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Each key on its own stack; a terminal observation (a dict) gets each key's stacked one
        written into it, as SB3 does. Without an episode's end no key reads the infos."""
        ended = bool(np.any(dones))
        out = {}
        for key, obs in observations.items():
            sub = self.sub_stacked_observations[key]
            if not ended:
                out[key] = sub.update(obs, dones, infos)[0]
                continue
            key_infos = [
                {"terminal_observation": info["terminal_observation"][key]}
                if "terminal_observation" in info
                else {}
                for info in infos
            ]
            out[key], key_infos = sub.update(obs, dones, key_infos)
            for info, key_info in zip(infos, key_infos, strict=True):
                if "terminal_observation" in info:
                    info["terminal_observation"][key] = key_info["terminal_observation"]
        return out


class LeanFrameStack(VecFrameStack):
    """`VecFrameStack` with `LeanStackedObservations`: a thin adapter of the one stack rule to
    SB3's `VecEnv` API.

    Args:
        venv: the vector env to stack.
        n_stack: frames per stack.
        channels_order: "last" (the lean update) or "first" (SB3's).
    """

    def __init__(self, venv: VecEnv, n_stack: int, channels_order: str | None = None) -> None:
        super().__init__(venv, n_stack, channels_order)
        self.stacked_obs = LeanStackedObservations(
            venv.num_envs, n_stack, venv.observation_space, channels_order
        )
