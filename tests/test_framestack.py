"""`LeanFrameStack` stacks exactly as SB3's `VecFrameStack`: the same stacked observations, zeroed
stacks after an episode's end and stacked terminal observations, for Box and Dict spaces, step
by step over random episodes; and the training vector env uses it."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.vec_env.stacked_observations import StackedObservations

from metabonk_gym.training.framestack import LeanFrameStack, LeanStackedObservations

DICT = gym.spaces.Dict(
    {
        "pixels": gym.spaces.Box(0, 255, (6, 5, 1), np.uint8),
        "tiles": gym.spaces.Box(0, 99, (6, 5), np.int32),
        "sprites": gym.spaces.Box(-9, 9, (4, 3), np.int32),
    }
)


def _same(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            _same(a[key], b[key])
    else:
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


@pytest.mark.parametrize("space", [DICT, DICT["tiles"]], ids=["dict", "box"])
def test_it_stacks_as_sb3_over_random_episodes(space: Any) -> None:
    n_envs, rng = 3, np.random.default_rng(0)
    space.seed(0)
    theirs = StackedObservations(n_envs, 4, space, "last")
    ours = LeanStackedObservations(n_envs, 4, space, "last")

    def batch() -> Any:
        rows = [space.sample() for _ in range(n_envs)]
        if isinstance(space, gym.spaces.Dict):
            return {k: np.stack([r[k] for r in rows]) for k in space.spaces}
        return np.stack(rows)

    first = batch()
    _same(ours.reset(copy.deepcopy(first)), theirs.reset(copy.deepcopy(first)))
    ended = 0
    for _ in range(60):
        obs = batch()
        dones = rng.random(n_envs) < 0.15
        infos: list[dict] = [
            {"terminal_observation": space.sample(), "other": 1} if done else {} for done in dones
        ]
        ended += int(dones.sum())
        a, a_infos = ours.update(copy.deepcopy(obs), dones, copy.deepcopy(infos))
        b, b_infos = theirs.update(copy.deepcopy(obs), dones, copy.deepcopy(infos))
        _same(a, b)
        for x, y in zip(a_infos, b_infos):
            assert x.keys() == y.keys()
            if "terminal_observation" in x:
                _same(x["terminal_observation"], y["terminal_observation"])
    assert ended > 5  # episode ends were exercised


def test_each_step_returns_new_arrays() -> None:
    """PPO keeps the last observation while the next step is stacked: never one buffer."""
    ours = LeanStackedObservations(1, 2, DICT["tiles"], "last")
    first = ours.reset(np.ones((1, 6, 5), np.int32))
    second, _ = ours.update(np.full((1, 6, 5), 2, np.int32), np.array([False]), [{}])
    assert second is not first and first[0, 0].tolist() == [0] * 5 + [1] * 5


def test_the_training_vector_env_uses_it() -> None:
    import metabonk_gym  # noqa: F401
    from metabonk_gym.training.config import resolve_config
    from metabonk_gym.training.envs import close_venv, make_train_venv

    cfg = resolve_config(
        "MetaBonk/BonkQuest-v0",
        overrides={"n_envs": 1, "n_steps": 16, "batch_size": 16, "frame_stack": 2},
    )
    venv = make_train_venv("MetaBonk/BonkQuest-v0", cfg)
    try:
        assert isinstance(venv, LeanFrameStack)
        obs: Any = venv.reset()
        stepped: Any = venv.step(np.array([0]))[0]
        assert obs.shape == stepped.shape and obs.shape[-1] % 2 == 0
    finally:
        close_venv(venv)
