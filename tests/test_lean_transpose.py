"""The trainer's lean paths give SB3 exactly what SB3's own would: `LeanTransposeImage` against
`VecTransposeImage` step by step (terminal observations too) without touching the caller's dict;
`copy_observation` against `copy.deepcopy`; PPO built by `make_ppo` (and loaded back) on a Dict
env sees the lean wrapper, and its Adam is the fused one."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.vec_env import DummyVecEnv, VecTransposeImage

from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv
from metabonk_gym.training.policies import make_ppo
from metabonk_gym.training.safeload import load_ppo
from metabonk_gym.training.transpose import LeanTransposeImage, wrap_for_sb3
from metabonk_gym.training.vecenv import copy_observation


class DictEnv(gym.Env[dict[str, np.ndarray], int]):
    """Random Dict observations; an episode ends every 3 steps."""

    observation_space = gym.spaces.Dict(
        {
            "pixels": gym.spaces.Box(0, 255, (6, 5, 2), np.uint8),
            "tiles": gym.spaces.Box(0, 99, (6, 5), np.int32),
        }
    )
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> dict[str, np.ndarray]:
        rng = self.np_random
        return {
            "pixels": rng.integers(0, 256, (6, 5, 2), dtype=np.uint8),
            "tiles": rng.integers(0, 100, (6, 5), dtype=np.int32),
        }

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        return self._obs(), 1.0, self.t % 3 == 0, False, {}


def _same(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _same(a[key], b[key])
    else:
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def test_lean_transpose_gives_what_vec_transpose_gives_and_leaves_the_callers_dict() -> None:
    ours, theirs = (
        LeanTransposeImage(DummyVecEnv([DictEnv] * 2)),
        VecTransposeImage(DummyVecEnv([DictEnv] * 2)),
    )
    assert ours.observation_space == theirs.observation_space
    ours.seed(3)
    theirs.seed(3)
    _same(ours.reset(), theirs.reset())
    for _ in range(7):
        a, _, da, ia = ours.step(np.array([0, 1]))
        b, _, db, ib = theirs.step(np.array([0, 1]))
        _same(a, b)
        assert da.tolist() == db.tolist()
        for x, y in zip(ia, ib, strict=True):
            assert ("terminal_observation" in x) == ("terminal_observation" in y)
            if "terminal_observation" in x:
                _same(x["terminal_observation"], y["terminal_observation"])
    given = {"pixels": np.zeros((2, 6, 5, 2), np.uint8), "tiles": np.ones((2, 6, 5), np.int32)}
    out = ours.transpose_observations(given)
    assert out is not given and given["pixels"].shape == (2, 6, 5, 2)
    assert out["pixels"].shape == (2, 2, 6, 5)


def test_copy_observation_owns_its_arrays_like_deepcopy() -> None:
    views = {"a": np.arange(4), "b": (np.ones(2), np.zeros(1))}
    ours, theirs = copy_observation(views), copy.deepcopy(views)
    _same(ours["a"], theirs["a"])
    assert isinstance(ours["b"], tuple) and np.array_equal(ours["b"][0], theirs["b"][0])
    views["a"][0] = 9
    views["b"][0][0] = 9
    assert ours["a"][0] == 0 and ours["b"][0][0] == 1.0


def test_ppo_on_a_dict_env_uses_the_lean_wrapper_and_fused_adam(tmp_path: Any) -> None:
    cfg = resolve_config(
        "MetaBonk/BonkQuest-v0",
        overrides={
            "wrappers": [{"name": "tile_tokens"}],
            "n_envs": 2,
            "n_steps": 16,
            "batch_size": 16,
            "n_epochs": 1,
            "video_every": 0,
        },
    )
    venv = make_train_venv("MetaBonk/BonkQuest-v0", cfg)
    try:
        model = make_ppo(cfg, venv)
        assert isinstance(model.get_env(), LeanTransposeImage)
        assert wrap_for_sb3(model.get_env()) is model.get_env()  # never wrapped twice
        group = model.policy.optimizer.param_groups[0]
        assert group["fused"] is True and group["eps"] == 1e-5
        before = [p.detach().clone() for p in model.policy.parameters()]
        model.learn(64)
        assert any(not torch.equal(b, p) for b, p in zip(before, model.policy.parameters()))
        model.save(tmp_path / "model.zip")
        loaded = load_ppo(tmp_path / "model.zip", venv, cfg=cfg)
        assert isinstance(loaded.get_env(), LeanTransposeImage)
        loaded.learn(32)  # resumes with the saved optimizer state
    finally:
        close_venv(venv)
