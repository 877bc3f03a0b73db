"""ButtonHistory: button rows for GBA action spaces, one-hot / bits / values elsewhere."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from metabonk_gym.wrappers import ButtonHistory

from metabonk_gym.gba.buttons import BUTTONS


def _check(env) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True, skip_close_check=True)


class ToyEnv(gym.Env):
    """A one-pixel env with any action space."""

    def __init__(self, action_space: spaces.Space) -> None:
        self.action_space = action_space
        self.observation_space = spaces.Box(0, 255, (2, 2, 3), np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros((2, 2, 3), np.uint8), {}

    def step(self, action):
        return np.zeros((2, 2, 3), np.uint8), 0.0, False, False, {}


def test_gba_discrete_actions_as_buttons(make_env) -> None:
    env = ButtonHistory(make_env("MetaBonk/BonkQuest-v0"), n=3)
    obs, _ = env.reset(seed=0)
    assert obs["buttons"].shape == (3, 10) and not obs["buttons"].any()
    combos = env.unwrapped.integration.discrete_actions
    for action in (1, 4, 5):
        obs, *_ = env.step(action)
    for row, action in zip(obs["buttons"], (1, 4, 5)):
        assert [BUTTONS[i] for i in np.flatnonzero(row)] == list(combos[action])
    obs, _ = env.reset(seed=0)
    assert not obs["buttons"].any()
    _check(env)


def test_gba_multibinary(make_env) -> None:
    env = ButtonHistory(make_env("MetaBonk/BonkArena-v0", action_space="multibinary"), n=2)
    env.reset(seed=0)
    pressed = np.zeros(10, np.int8)
    pressed[[0, 6]] = 1
    obs, *_ = env.step(pressed)
    assert obs["buttons"][-1].tolist() == pressed.tolist()


@pytest.mark.parametrize(
    ("space", "action", "row"),
    [
        (spaces.Discrete(3), 2, [0, 0, 1]),
        (spaces.MultiBinary(4), np.array([1, 0, 0, 1], np.int8), [1, 0, 0, 1]),
        (spaces.Box(-1, 1, (2,), np.float32), np.array([0.5, -1.0], np.float32), [0.5, -1.0]),
    ],
)
def test_other_action_spaces(space, action, row) -> None:
    env = ButtonHistory(ToyEnv(space), n=2)
    env.reset(seed=0)
    obs, *_ = env.step(action)
    assert obs["buttons"][-1].tolist() == row and not obs["buttons"][0].any()
    assert obs in env.observation_space
    _check(ButtonHistory(ToyEnv(space), n=2))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="n must be"):
        ButtonHistory(ToyEnv(spaces.Discrete(2)), n=0)
    with pytest.raises(TypeError, match="supports Discrete"):
        ButtonHistory(ToyEnv(spaces.Tuple((spaces.Discrete(2),))))
    with pytest.raises(ValueError, match="already in"):
        ButtonHistory(ButtonHistory(ToyEnv(spaces.Discrete(2))))
