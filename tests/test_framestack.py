"""One frame stacker for one env at a time: `ObservationStacker` (a `Box` or each key of a
`Dict`), used by a loaded policy (`ModelAgent`) and RLlib's `LastAxisFrameStack`, gives exactly
what SB3's `VecFrameStack(channels_order="last")` gives a policy in training."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.stacked_observations import StackedObservations

from metabonk_gym.training.envs import ObservationStacker
from metabonk_gym.training.rllib_envs import LastAxisFrameStack
from metabonk_gym.training.safeload import SpacesEnv


def _space() -> gym.spaces.Dict:
    return gym.spaces.Dict(
        {
            "pixels": gym.spaces.Box(0, 255, (4, 5, 1), np.uint8),
            "state": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        }
    )


def test_the_stacker_matches_sb3_key_by_key_across_a_reset() -> None:
    space = _space()
    space.seed(0)
    observations = [space.sample() for _ in range(7)]
    reference = StackedObservations(1, 3, space, "last")
    stacker = ObservationStacker(space, 3)
    batch = {k: v[None] for k, v in observations[0].items()}
    expected: Any = reference.reset(batch)  # type: ignore[arg-type]
    got = stacker.push(observations[0], reset=True, copy=True)
    assert all(np.array_equal(got[k], expected[k][0]) for k in space.spaces)
    for t, obs in enumerate(observations[1:], 1):
        done = t == 4  # the episode ends at step 4: the next stack starts from zeros
        batch = {k: v[None] for k, v in obs.items()}
        # SB3 writes the stacked terminal observation into this dict: give it a copy
        infos = [{"terminal_observation": dict(obs)}] if done else [{}]
        expected, _ = reference.update(batch, np.array([done]), infos)  # type: ignore[arg-type]
        got = stacker.push(obs, reset=done, copy=True)
        assert all(np.array_equal(got[k], expected[k][0]) for k in space.spaces), t
    stacked: Any = stacker.space
    assert stacked["pixels"].shape == (4, 5, 3) and stacked["state"].shape == (9,)


def test_the_rllib_wrapper_is_the_stacker_around_an_env() -> None:
    space = _space()
    env = LastAxisFrameStack(SpacesEnv(space, gym.spaces.Discrete(3)), 2)
    assert env.observation_space == ObservationStacker(space, 2).space
    assert env.keys == ["pixels", "state"]
