"""`LeanFrameStack`: SB3's `VecFrameStack` (channels last) whose per-step stack update copies each
key once, for the training vector env.

What: the same stacked observations, zeroed stacks after an episode's end and stacked
`terminal_observation`s as SB3's `StackedObservations`, built without `np.roll` (which allocates,
copies the whole stack and then has the newest frame written over what it wrapped around) and
without the per-key info dicts SB3 rebuilds every step when no episode ended. Why: with a
`wrappers:` stack every key of a Dict observation is stacked (5 keys with tile tokens), and this
update ran in the trainer's process for each of them at every step (`metabonk bench
train-wrappers`).

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


class LeanStackedObservations(StackedObservations):
    """SB3's `StackedObservations`, channels last, with a one-copy update (module docstring).

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

    def update(  # type: ignore[override]
        self, observations: Any, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> tuple[Any, list[dict[str, Any]]]:
        if isinstance(observations, dict):
            if any("terminal_observation" in info for info in infos):
                return super().update(observations, dones, infos)  # SB3's per-key infos
            subs = self.sub_stacked_observations
            return {k: subs[k].update(v, dones, infos)[0] for k, v in observations.items()}, infos
        if self.channels_first:
            return super().update(observations, dones, infos)
        width = observations.shape[-1]
        old = self.stacked_obs
        stacked = np.empty_like(old)
        stacked[..., :-width] = old[..., width:]  # what np.roll keeps; the newest goes after it
        for env_idx in np.flatnonzero(dones).tolist():
            info = infos[env_idx]
            if "terminal_observation" in info:
                info["terminal_observation"] = np.concatenate(
                    (stacked[env_idx, ..., :-width], info["terminal_observation"]),
                    axis=self.repeat_axis,
                )
            else:
                warnings.warn(
                    "VecFrameStack wrapping a VecEnv without terminal_observation info",
                    stacklevel=2,
                )
            stacked[env_idx] = 0
        stacked[..., -width:] = observations
        self.stacked_obs = stacked
        return stacked, infos


class LeanFrameStack(VecFrameStack):
    """`VecFrameStack` with `LeanStackedObservations`.

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
