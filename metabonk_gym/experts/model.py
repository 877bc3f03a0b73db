"""`ModelAgent`: a trained SB3 model (PPO or BC, a metabonk model zip) as an agent.

The zip carries the config the model was trained with, so the agent knows its frame stack and
the env settings (`obs_type`, `downscale`, `frameskip`) its env must use; the stack is kept here,
exactly as `VecFrameStack` built it in training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.base import AgentError


def model_config(path: Path, env_id: str | None = None) -> dict[str, Any]:
    """The training config stored in a metabonk model zip (checked for `env_id`)."""
    from metabonk_gym.training.rundir import read_model_metadata

    meta = read_model_metadata(path)
    theirs = str(meta.get("env_id", "")).split(":")[-1]
    if env_id is not None and theirs and theirs != env_id.split(":")[-1]:
        raise AgentError(f"{path} was trained on {theirs}, not {env_id}")
    config: dict[str, Any] = dict(meta["config"])
    return config


def model_env_overrides(path: Path) -> dict[str, Any]:
    """The env kwargs the model needs to see frames as in training."""
    config = model_config(path)
    return {k: config[k] for k in ("frameskip", "obs_type", "downscale") if k in config}


class ModelAgent:
    """Acts with `model.predict` on the frame-stacked observation, sampling its actions unless
    `deterministic` (PPO policies tend to loop when always taking their most likely action)."""

    def __init__(self, path: Path, env: gym.Env, deterministic: bool = False) -> None:
        import torch
        from stable_baselines3 import PPO

        from metabonk_gym.training.envs import FrameStacker
        from metabonk_gym.training.errors import CheckpointError

        self.name = str(path)
        self.config = model_config(path)
        try:
            self.model = PPO.load(path, device="cpu")
        except Exception as exc:
            raise CheckpointError(f"cannot load model {path}: {exc}") from exc
        torch.set_num_threads(1)
        self.deterministic = deterministic
        self.stacker = FrameStacker(int(self.config.get("frame_stack", 1)))
        expected = self.model.observation_space.shape
        base = env.observation_space.shape
        if (
            base is None
            or expected is None
            or base[:-1] not in (tuple(expected[:-1]), tuple(expected[1:]))
        ):
            raise AgentError(
                f"{path} expects observations of shape {expected} (after its frame stack) but the env "
                f"gives {base}; make the env with the model's obs_type/downscale "
                "(metabonk does this for you in play, record and eval)"
            )
        if getattr(self.model.action_space, "n", None) != getattr(env.action_space, "n", None):
            raise AgentError(
                f"{path} has {self.model.action_space} actions, the env {env.action_space}"
            )
        self._fresh = False

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        self.stacker.reset(np.asarray(obs))
        self._fresh = True  # the first act() sees the reset observation, already stacked

    def act(self, obs: Any, info: dict[str, Any]) -> int:
        if self._fresh:
            self._fresh = False
            stacked = self.stacker.current()
        else:
            stacked = self.stacker.add(np.asarray(obs))
        action, _ = self.model.predict(stacked, deterministic=self.deterministic)
        return int(np.asarray(action).reshape(-1)[0])
