"""The newest frame of a wrapper stack's non-image keys: what `DictExtractor` reads and all that
PPO's rollout buffer keeps of them (`NewestFrameBuffer`).

What: with a config's `frame_stack`, `VecFrameStack` stacks every key of a Dict observation on
its last axis, newest last. The policy's CNN reads every stacked frame of the image keys; the
other keys (token grids, sprite tables, button history) are read at their newest frame only, so
the buffer stores only that. Why: keeping the older frames cost four times the memory and, in
each of PPO's epochs, a copy and a float conversion of them per minibatch for nothing (the
measurement: docs/benchmarks.md#design).

>>> import gymnasium as gym, numpy as np
>>> space = gym.spaces.Dict({"pixels": gym.spaces.Box(0, 255, (20, 30, 8), np.uint8),
...                          "tiles": gym.spaces.Box(0, 9, (20, 120), np.int32)})
>>> newest_widths(space, 4)
{'tiles': 30}
>>> buffer = NewestFrameBuffer(2, space, gym.spaces.Discrete(3), widths={"tiles": 30})
>>> buffer.observations["tiles"].shape, buffer.observations["pixels"].shape
((2, 1, 20, 30), (2, 1, 20, 30, 8))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.buffers import DictRolloutBuffer
from stable_baselines3.common.preprocessing import is_image_space

from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.wrapstack import uses_dict_extractor


def newest_width(shape: tuple[int, ...], frame_stack: int) -> int:
    """How many entries of a stacked key's last axis are its newest frame (all of them when
    the axis is no stack of `frame_stack`)."""
    last = shape[-1] if shape else 1
    return last // frame_stack if frame_stack > 1 and last % frame_stack == 0 else last


def newest_widths(space: gym.spaces.Dict, frame_stack: int) -> dict[str, int]:
    """The newest-frame width of every non-image key of a Dict space."""
    return {
        key: newest_width(tuple(sub.shape or (1,)), frame_stack)
        for key, sub in space.spaces.items()
        if not is_image_space(sub, check_channels=False)
    }


class NewestFrameBuffer(DictRolloutBuffer):
    """SB3's `DictRolloutBuffer` keeping only the newest `widths[key]` entries of the last axis of
    the keys in `widths` (the others whole).

    Args:
        buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs: as
            `DictRolloutBuffer` (PPO passes them).
        widths: key -> newest-frame width (`newest_widths`).
    """

    def __init__(
        self,
        buffer_size: int,
        observation_space: gym.spaces.Dict,
        action_space: gym.spaces.Space,
        device: torch.device | str = "auto",
        gae_lambda: float = 1,
        gamma: float = 0.99,
        n_envs: int = 1,
        widths: Mapping[str, int] | None = None,
    ) -> None:
        self.widths = dict(widths or {})
        super().__init__(
            buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs
        )

    def reset(self) -> None:
        for key, width in self.widths.items():
            shape = tuple(self.obs_shape[key])  # type: ignore[index]
            self.obs_shape[key] = (*shape[:-1], width)  # type: ignore[index]
        super().reset()

    def add(  # type: ignore[override]
        self, obs: dict[str, np.ndarray], *args: Any, **kwargs: Any
    ) -> None:
        newest = {
            key: value[..., -self.widths[key] :] if key in self.widths else value
            for key, value in obs.items()
        }
        super().add(newest, *args, **kwargs)


def rollout_buffer_args(cfg: TrainConfig, space: gym.spaces.Space) -> dict[str, Any]:
    """PPO's `rollout_buffer_class` and `rollout_buffer_kwargs` for a config (`space`: the vector
    env's observation space): `NewestFrameBuffer` where `DictExtractor` reads a stacked Dict,
    else SB3's choice."""
    if uses_dict_extractor(cfg) and cfg.frame_stack > 1 and isinstance(space, gym.spaces.Dict):
        widths = newest_widths(space, cfg.frame_stack)
        return {
            "rollout_buffer_class": NewestFrameBuffer,
            "rollout_buffer_kwargs": {"widths": widths},
        }
    return {"rollout_buffer_class": None, "rollout_buffer_kwargs": {}}
