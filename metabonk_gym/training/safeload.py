"""Loading SB3 model zips without unpickling anything: the one loader of every command.

An SB3 zip keeps its policy weights as `.pth` tensors (read with `torch.load(weights_only=True)`)
and the rest in a JSON `data` entry whose objects (policy class, spaces, schedules) are
cloudpickled, so loading a shared `model.zip` the usual way can run any code. Here each of those
entries is rebuilt from what this project knows instead: the training config stored in the zip's
`metabonk` JSON entry (policy class and kwargs, schedules) and the env (observation and action
spaces, exactly as training wraps them). SB3's `custom_objects` hands these to `PPO.load`, so the
pickles are never decoded. A zip with any other pickled entry is refused with
`UntrustedFileError`, unless the caller passes `trust=True` (the CLI's `--trust-model`).

>>> import json
>>> data = {"lr_schedule": {":serialized:": "gASV"}, "evil": {":serialized:": "gASV"}, "gamma": 0.9}
>>> sorted(serialized_keys(data))
['evil', 'lr_schedule']
>>> sorted(serialized_keys(data) - REPLACED_KEYS)
['evil']
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from metabonk_gym.errors import UntrustedFileError
from metabonk_gym.rundir import read_model_data, read_model_metadata
from metabonk_gym.training.config import FIELDS, TrainConfig
from metabonk_gym.training.errors import CheckpointError

#: Pickled entries of a PPO zip that are rebuilt from the config and the env, never unpickled.
REPLACED_KEYS: frozenset[str] = frozenset(
    {
        "policy_class",
        "policy_kwargs",
        "learning_rate",
        "lr_schedule",
        "clip_range",
        "clip_range_vf",
        "observation_space",
        "action_space",
        "rollout_buffer_class",
        "rollout_buffer_kwargs",
        "action_noise",
        "_last_obs",
        "_last_episode_starts",
        "_last_original_obs",
        "ep_info_buffer",
        "ep_success_buffer",
    }
)

TRUST_HINT = (
    "pass --trust-model (trust=True) only if you trust whoever made the file, since loading it "
    "can run any code"
)


class SpacesEnv(gym.Env):
    """An env that only has spaces: lets SB3 build or load a policy without starting a game.

    Args:
        observation_space: the observations the policy will see.
        action_space: the env's actions.

    >>> env = SpacesEnv(gym.spaces.Discrete(3), gym.spaces.Discrete(2))
    >>> env.step(0)[2]
    True
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.observation_space = observation_space
        self.action_space = action_space

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self.observation_space.sample(), 0.0, True, False, {}


def serialized_keys(data: Mapping[str, Any]) -> set[str]:
    """Keys of an SB3 `data` JSON whose values are cloudpickled (`{":serialized:": ...}`)."""
    return {k for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v}


def model_train_config(path: Path) -> TrainConfig:
    """The training config stored (as JSON) in a metabonk model zip, checked like a config file;
    keys this version does not know are left out."""
    config = read_model_metadata(path)["config"]
    known = {k: v for k, v in dict(config).items() if k in FIELDS}
    return TrainConfig.from_dict(known, source=f"{path}")


def policy_venv(observation_space: gym.Space, action_space: gym.Space, frame_stack: int) -> Any:
    """A vector env with the spaces a policy trained on an env with these spaces sees (frame
    stack on the last axis, as `make_train_venv` stacks; SB3 transposes images itself)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from metabonk_gym.training.framestack import LeanFrameStack

    venv: Any = DummyVecEnv([lambda: SpacesEnv(observation_space, action_space)])
    if frame_stack > 1:
        venv = LeanFrameStack(venv, frame_stack, channels_order="last")
    return venv


def _check_file_spaces(path: Path, data: Mapping[str, Any], obs: gym.Space, act: gym.Space) -> None:
    """Compare the readable (plain JSON) parts of the file's spaces with the env's."""
    theirs_obs = data.get("observation_space")
    shape = theirs_obs.get("_shape") if isinstance(theirs_obs, dict) else None
    if isinstance(shape, list) and obs.shape is not None and tuple(shape) != tuple(obs.shape):
        raise CheckpointError(
            f"{path} expects observations of shape {tuple(shape)} but the env gives {obs.shape} "
            "(after its frame stack); make the env with the model's obs_type/downscale"
        )
    theirs_act = data.get("action_space")
    n = theirs_act.get("n") if isinstance(theirs_act, dict) else None
    ours = getattr(act, "n", None)
    if n is not None and ours is not None and str(n) != str(ours):
        raise CheckpointError(
            f"{path} has {n} actions but the env has {ours}; it was trained for another game "
            "or action set"
        )


def check_trusted(path: Path, data: Mapping[str, Any], trust: bool) -> None:
    """`UntrustedFileError` when loading `path` would unpickle an entry not rebuilt here."""
    unknown = sorted(serialized_keys(data) - REPLACED_KEYS)
    if unknown and not trust:
        raise UntrustedFileError(
            f"{path} holds pickled entries ({', '.join(unknown)}) that loading would execute; "
            f"models written by metabonk have none. Refused: {TRUST_HINT}"
        )


def load_ppo(
    path: str | Path,
    venv: Any,
    cfg: TrainConfig | None = None,
    *,
    device: str = "cpu",
    trust: bool = False,
) -> Any:
    """A PPO model from a metabonk zip at `path` for the vector env `venv` (its spaces become
    the model's), unpickling nothing; see the module docstring.

    `cfg` (default: the config stored in the zip) gives the policy class, its kwargs and the
    schedules. `trust=True` loads the file the usual SB3 way, pickles included.
    """
    from stable_baselines3 import PPO
    from stable_baselines3.common.base_class import BaseAlgorithm

    from metabonk_gym.training.newest import rollout_buffer_args
    from metabonk_gym.training.policies import learning_rate, policy_kwargs
    from metabonk_gym.training.transpose import wrap_for_sb3

    path = Path(path).expanduser()
    data = read_model_data(path)
    check_trusted(path, data, trust)
    if cfg is None:
        cfg = model_train_config(path)
    wrapped = BaseAlgorithm._wrap_env(venv, verbose=0)
    _check_file_spaces(path, data, wrapped.observation_space, wrapped.action_space)
    if trust:
        custom: dict[str, Any] | None = None
    else:
        custom = {
            "policy_class": PPO.policy_aliases[cfg.policy],
            "policy_kwargs": policy_kwargs(cfg),
            "learning_rate": learning_rate(cfg),
            "lr_schedule": None,  # rebuilt from learning_rate by PPO._setup_model
            "clip_range": cfg.clip_range,
            "clip_range_vf": None,
            "observation_space": wrapped.observation_space,
            "action_space": wrapped.action_space,
            **rollout_buffer_args(cfg, wrapped.observation_space),  # as make_ppo's
            "action_noise": None,
            "_last_obs": None,  # training resets the envs before its first step
            "_last_episode_starts": None,
            "_last_original_obs": None,
            "ep_info_buffer": None,  # recreated empty by the next learn()
            "ep_success_buffer": None,
            # sizes of the rollout buffer loading builds: the checked config's, never the
            # file's own numbers (an n_steps of 10^9 would allocate gigabytes)
            "n_steps": cfg.n_steps,
            "batch_size": cfg.batch_size,
            "n_epochs": cfg.n_epochs,
        }
    try:
        return PPO.load(path, env=wrap_for_sb3(venv), device=device, custom_objects=custom)
    except Exception as exc:  # torch and SB3 raise many kinds for a damaged or unfit file
        raise CheckpointError(f"cannot load model {path}: {exc}") from exc


def load_policy_params(path: str | Path, action_n: int | None, *, trust: bool = False) -> Any:
    """The policy weights of a model zip (tensors only; the `data` entry is read as plain JSON),
    checked against the env's number of actions."""
    from stable_baselines3.common.save_util import load_from_zip_file

    path = Path(path).expanduser()
    data = read_model_data(path)
    check_trusted(path, data, trust)
    space = data.get("action_space")
    n = space.get("n") if isinstance(space, dict) else None
    if action_n is not None and n is not None and str(n) != str(action_n):
        raise CheckpointError(
            f"{path} has {n} actions but the env has {action_n}; it was trained for another game "
            "or action set"
        )
    try:
        _, params, _ = load_from_zip_file(path, device="cpu", load_data=False)
    except Exception as exc:  # torch and SB3 raise many kinds for a damaged file
        raise CheckpointError(f"cannot load model {path}: {exc}") from exc
    return params
