"""`ModelAgent`: a trained SB3 model (PPO or BC, a metabonk model zip) as an agent.

The zip carries the config the model was trained with, so the agent knows its frame stack and
the env settings (`obs_type`, `downscale`, `frameskip`) its env must use; the stack is kept here,
exactly as `VecFrameStack` built it in training.

>>> import json, tempfile, zipfile
>>> from metabonk_gym.rundir import model_metadata
>>> path = Path(tempfile.mkdtemp()) / "model.zip"
>>> config = {"obs_type": "grayscale", "downscale": 2, "frame_stack": 4, "n_envs": 8}
>>> meta = model_metadata("MetaBonk/BonkQuest-v0", "ppo", config)
>>> with zipfile.ZipFile(path, "w") as archive:  # the two entries of an SB3 zip read here
...     archive.writestr("data", json.dumps({"metabonk": meta}))
...     archive.writestr("policy.pth", b"")
>>> model_env_overrides(path)  # what `play`, `record` and `eval` pass to the env they make
{'obs_type': 'grayscale', 'downscale': 2}
>>> model_config(path, env_id="MetaBonk/BonkArena-v0")
Traceback (most recent call last):
...
metabonk_gym.errors.AgentError: ...model.zip was trained on MetaBonk/BonkQuest-v0, not MetaBonk/BonkArena-v0
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.base import AgentError
from metabonk_gym.rundir import read_model_metadata
from metabonk_gym.training.config import FIELDS, validate
from metabonk_gym.training.safeload import load_ppo, policy_venv
from metabonk_gym.training.stacking import ObservationStacker


def model_config(path: Path, env_id: str | None = None) -> dict[str, Any]:
    """The training config stored in a metabonk model zip (checked for `env_id`)."""
    meta = read_model_metadata(path)
    theirs = str(meta.get("env_id", "")).split(":")[-1]
    if env_id is not None and theirs and theirs != env_id.split(":")[-1]:
        raise AgentError(f"{path} was trained on {theirs}, not {env_id}")
    config: dict[str, Any] = dict(meta["config"])
    validate({k: v for k, v in config.items() if k in FIELDS}, str(path))  # bounded numbers
    return config


def model_env_overrides(path: Path) -> dict[str, Any]:
    """The env kwargs the model needs to see frames as in training."""
    config = model_config(path)
    return {k: config[k] for k in ("frameskip", "obs_type", "downscale") if k in config}


class ModelAgent:
    """Acts with `model.predict` on the frame-stacked observation, sampling its actions unless
    `deterministic` (PPO policies tend to loop when always taking their most likely action).

    Discrete actions come back as ints; other spaces (Megabonk's Box) as the model's array.
    `Dict` observations are stacked key by key, as `VecFrameStack` does.

    Args:
        path: a model zip from `metabonk train ppo` / `train bc`, loaded on the CPU
            (`CheckpointError` when it is not one).
        env: the env it acts in, made with `model_env_overrides(path)`; `AgentError` when its
            observation or action space does not fit the model's.
        deterministic: always take the policy's most likely action (default: sample it).
        trust: load pickled entries of the zip too (`--trust-model`); by default the model is
            rebuilt from its JSON config and the env without unpickling anything
            (`metabonk_gym.training.safeload`), and a zip that needs more is refused.
    """

    def __init__(
        self, path: Path, env: gym.Env, deterministic: bool = False, trust: bool = False
    ) -> None:
        import torch

        self.name = str(path)
        self.config = model_config(path)
        frame_stack = int(self.config.get("frame_stack", 1))
        venv = policy_venv(env.observation_space, env.action_space, frame_stack)
        try:
            self.model = load_ppo(path, venv, device="cpu", trust=trust)
        finally:
            venv.close()
        torch.set_num_threads(1)
        self.deterministic = deterministic
        theirs, ours = self.model.observation_space, env.observation_space
        if isinstance(ours, gym.spaces.Dict):
            if not isinstance(theirs, gym.spaces.Dict) or set(theirs.spaces) != set(ours.spaces):
                raise AgentError(
                    f"{path} expects observations {theirs}, the env gives {ours}; make the env "
                    "with the model's obs_type (metabonk does this in play, record and eval)"
                )
            for key in ours.spaces:
                _check_shape(path, theirs[key].shape, ours[key].shape)
        else:
            _check_shape(path, theirs.shape, ours.shape)
        self.stacker = ObservationStacker(ours, frame_stack)
        their_actions, our_actions = self.model.action_space, env.action_space
        if getattr(their_actions, "n", None) != getattr(our_actions, "n", None) or (
            their_actions.shape != our_actions.shape
        ):
            raise AgentError(f"{path} has {their_actions} actions, the env {our_actions}")
        self.discrete = isinstance(our_actions, gym.spaces.Discrete)
        self._fresh = False

    def _stack(self, obs: Any, reset: bool) -> Any:
        return self.stacker.push(obs, reset)

    def _current(self) -> Any:
        return self.stacker.current()

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        self._stack(obs, reset=True)
        self._fresh = True  # the first act() sees the reset observation, already stacked

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        if self._fresh:
            self._fresh = False
            stacked = self._current()
        else:
            stacked = self._stack(obs, reset=False)
        action, _ = self.model.predict(stacked, deterministic=self.deterministic)
        if self.discrete:
            return int(np.asarray(action).reshape(-1)[0])
        return np.asarray(action)


def _check_shape(path: Path, expected: Any, base: Any) -> None:
    """The env's observation (before the frame stack) must fit the model's (after it, possibly
    transposed to channels-first by SB3)."""
    if (
        base is None
        or expected is None
        or tuple(base[:-1]) not in (tuple(expected[:-1]), tuple(expected[1:]))
    ):
        raise AgentError(
            f"{path} expects observations of shape {expected} (after its frame stack) but the env "
            f"gives {base}; make the env with the model's obs_type/downscale "
            "(metabonk does this for you in play, record and eval)"
        )
