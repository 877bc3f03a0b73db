"""`ButtonHistory`: the last n actions in the observation.

Why: with frameskip and sticky actions the screen alone does not say what the agent is holding;
games also react to presses (BonkQuest's A needs a release between two uses). A policy that
sees its own recent buttons can learn press-release patterns and menu timing.

`obs["buttons"]` is (n, k) uint8, oldest row first, the last row the action just taken (zeros
after a reset):
- GBA envs: k = 10 pressed buttons in KEYINPUT order (A, B, SELECT, START, RIGHT, LEFT, UP,
  DOWN, R, L) for both the discrete and the MultiBinary action spaces;
- other Discrete(m) envs: one-hot rows of length m; MultiBinary(m): the m bits;
- Box action envs: float32 rows of the action values (bounded by the action space).

>>> import gymnasium as gym, metabonk_gym
>>> env = ButtonHistory(gym.make("MetaBonk/BonkQuest-v0"), n=3)
>>> _ = env.reset(seed=0)
>>> obs, *_ = env.step(5)        # BonkQuest's action 5 is A
>>> obs["buttons"][-1].tolist()
[1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
>>> env.close()
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from metabonk_gym.wrappers._dict_obs import as_dict, extend_space
from metabonk_gym.wrappers.registry import config_wrapper

from metabonk_gym.contract import HasButtons
from metabonk_gym.gba.buttons import BUTTONS


@config_wrapper()
class ButtonHistory(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds `buttons` (n, k): the last `n` actions as button rows (see the module docstring).

    Args:
        env: any env (GBA envs get their buttons, others one-hot rows, bits or values).
        n: how many past actions.
        key, pixels_key: the observation keys of the history and of a non-Dict observation.
    """

    def __init__(
        self, env: gym.Env, n: int = 8, key: str = "buttons", pixels_key: str = "pixels"
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, n=n, key=key, pixels_key=pixels_key)
        gym.Wrapper.__init__(self, env)
        if n < 1:
            raise ValueError(f"n must be >= 1, not {n}")
        self.n, self.key, self.pixels_key = int(n), key, pixels_key
        action_space = env.action_space
        base = env.unwrapped
        self._masks: np.ndarray | None = None
        row_space: spaces.Box
        if isinstance(base, HasButtons):
            width = len(BUTTONS)
            if isinstance(action_space, spaces.Discrete):
                masks = np.asarray(base.action_masks, np.int64)
                self._masks = ((masks[:, None] >> np.arange(width)) & 1).astype(np.uint8)
            row_space = spaces.Box(0, 1, (self.n, width), np.uint8)
        elif isinstance(action_space, spaces.Discrete):
            width = int(action_space.n)
            self._masks = np.eye(width, dtype=np.uint8)
            row_space = spaces.Box(0, 1, (self.n, width), np.uint8)
        elif isinstance(action_space, spaces.MultiBinary):
            width = int(np.prod(action_space.shape))
            row_space = spaces.Box(0, 1, (self.n, width), np.uint8)
        elif isinstance(action_space, spaces.Box):
            width = int(np.prod(action_space.shape))
            low = np.minimum(np.broadcast_to(action_space.low.ravel(), (self.n, width)), 0)
            high = np.maximum(np.broadcast_to(action_space.high.ravel(), (self.n, width)), 0)
            row_space = spaces.Box(
                low.astype(np.float32), high.astype(np.float32), (self.n, width), np.float32
            )
        else:
            raise TypeError(
                f"ButtonHistory supports Discrete, MultiBinary and Box actions, not {action_space}"
            )
        self._dtype = row_space.dtype
        self._history = np.zeros((self.n, width), self._dtype)
        self.observation_space = extend_space(env.observation_space, pixels_key, {key: row_space})

    def _row(self, action: Any) -> np.ndarray:
        if self._masks is not None:
            return self._masks[int(action)]
        return np.asarray(action, dtype=self._dtype).ravel()

    def _observe(self, obs: Any) -> dict[str, Any]:
        out = as_dict(obs, self.pixels_key)
        out[self.key] = self._history.copy()
        return out

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._history[:] = 0
        return self._observe(obs), info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._history = np.roll(self._history, -1, axis=0)
        self._history[-1] = self._row(action)
        return self._observe(obs), reward, terminated, truncated, info
