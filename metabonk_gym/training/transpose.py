"""`LeanTransposeImage`: SB3's `VecTransposeImage` for Dict observations without a deep copy of
every observation, and `wrap_for_sb3`, which puts it where SB3 would put its own.

What: SB3 wraps a vector env whose image keys are channels-last in `VecTransposeImage`, which
deep-copies the whole Dict observation at every step only to leave the caller's dict as it was
(a hundred times a shallow copy's cost, docs/benchmarks.md#design): small, but paid at every
step of every Dict run for nothing. Here the dict
is copied shallowly (a new dict: the caller's is untouched) and the image keys are transposed as
SB3 does. Why it is safe: the training vector env hands out fresh arrays at every
step (`SharedMemoryVecEnv` copies them out of shared memory, `LeanFrameStack` builds new stacks)
and nothing writes into an observation in place. Box observations keep SB3's own wrapper.

>>> import gymnasium as gym, numpy as np
>>> from stable_baselines3.common.vec_env import DummyVecEnv
>>> class Env(gym.Env):
...     observation_space = gym.spaces.Dict({
...         "pixels": gym.spaces.Box(0, 255, (20, 30, 3), np.uint8),
...         "tiles": gym.spaces.Box(0, 9, (4,), np.int32)})
...     action_space = gym.spaces.Discrete(2)
...     def reset(self, seed=None, options=None):
...         return self.observation_space.sample(), {}
>>> venv = wrap_for_sb3(DummyVecEnv([Env]))
>>> type(venv).__name__, venv.observation_space["pixels"].shape, venv.reset()["pixels"].shape
('LeanTransposeImage', (3, 20, 30), (1, 3, 20, 30))
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.vec_env import VecEnv, VecTransposeImage, is_vecenv_wrapped


class LeanTransposeImage(VecTransposeImage):
    """`VecTransposeImage` whose Dict observations are copied shallowly (module docstring).

    Args:
        venv: the vector env whose channels-last image keys the policy gets channels-first.
        skip: as `VecTransposeImage` (transpose nothing).
    """

    def transpose_observations(self, observations: Any) -> Any:
        if not isinstance(observations, dict):
            return super().transpose_observations(observations)
        out = dict(observations)  # a new dict: the caller's stays as it was
        for key in self.image_space_keys:
            out[key] = self.transpose_image(out[key])
        return out


def wrap_for_sb3(venv: Any) -> Any:
    """`venv` as SB3's algorithms wrap it for images (`BaseAlgorithm._wrap_env`), with
    `LeanTransposeImage` instead of `VecTransposeImage` for a Dict space with a channels-last
    image key; anything else (a plain `gym.Env` too) unchanged: SB3 wraps it as it does."""
    space = venv.observation_space
    if not isinstance(venv, VecEnv) or not isinstance(space, spaces.Dict):
        return venv
    if is_vecenv_wrapped(venv, VecTransposeImage):
        return venv
    if any(
        is_image_space(sub) and not is_image_space_channels_first(sub)  # type: ignore[arg-type]
        for sub in space.spaces.values()
    ):
        return LeanTransposeImage(venv)
    return venv
