"""The env a `train dreamer` run steps: `gym.make`, the run's `wrappers:` stack, and a Dict
observation in the keys sheeprl's DreamerV3 reads.

What: sheeprl encodes image keys with its CNN (resized to `screen_size`) and 1-D float vectors
with its MLP. `DreamerKeys` turns a wrapper stack's Dict (`pixels` beside token grids, sprite
tables, button history, ...) into `rgb` (the frame) plus every other key flattened and scaled by
its bounds into [0, 1] (tile token hashes reach 2**31), the rule of PPO's `DictExtractor`.
`make_dreamer_env` is the hydra `_target_` of a run's env; it reads the stack from the run's own
`config.yaml` (`training.wrapstack.run_wrappers`, the loader every trainer uses) instead of taking
it through hydra overrides, so no nested value reaches hydra, which calls any `_target_` it meets.

>>> import gymnasium as gym, numpy as np
>>> space = gym.spaces.Dict({"pixels": gym.spaces.Box(0, 255, (4, 6, 3), np.uint8),
...                          "tiles": gym.spaces.Box(0, 10, (2, 3), np.int32)})
>>> keys = DreamerKeys(space)
>>> keys.vectors, keys.space["tiles"].shape
(['tiles'], (6,))
>>> out = keys({"pixels": np.zeros((4, 6, 3), np.uint8), "tiles": np.full((2, 3), 5, np.int32)})
>>> out["rgb"].shape, out["tiles"].tolist()
((4, 6, 3), [0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.training.wrapstack import WrapperSpec, apply_wrappers, run_wrappers
from metabonk_gym.worldmodel.scalars import EpisodeScalars

#: The key of the frame in sheeprl's observation (`algo.cnn_keys.encoder=[rgb]`).
IMAGE_KEY = "rgb"


class DreamerKeys:
    """A Dict observation as sheeprl's keys: the frame as `rgb`, every other Box key a flat
    float32 vector in [0, 1].

    Args:
        space: the wrapped env's Dict observation space.
        image_key: the frame's key in it (the wrappers keep the env's frame under `pixels`).
    """

    def __init__(self, space: gym.spaces.Dict, image_key: str = "pixels") -> None:
        frame = space.spaces.get(image_key)
        if not isinstance(frame, gym.spaces.Box) or len(frame.shape) not in (2, 3):
            raise ValueError(
                f"Dreamer needs the frame under {image_key!r} of the Dict observation "
                f"(keys: {', '.join(space.spaces)})"
            )
        self.image_key = image_key
        self.vectors: list[str] = []
        self._shift: dict[str, np.ndarray] = {}
        self._scale: dict[str, np.ndarray] = {}
        spaces: dict[str, gym.spaces.Space] = {IMAGE_KEY: frame}
        for key, sub in space.spaces.items():
            if key == image_key:
                continue
            if not isinstance(sub, gym.spaces.Box):
                raise ValueError(
                    f"observation key {key!r} is a {type(sub).__name__} space, which Dreamer "
                    "cannot read; set the wrapper that adds it to leave it out of the observation"
                )
            low = np.nan_to_num(np.asarray(sub.low, np.float64).reshape(-1), posinf=0, neginf=0)
            high = np.asarray(sub.high, np.float64).reshape(-1)
            span = np.where(np.isfinite(high) & (high > low), high - low, 1.0)
            self._shift[key], self._scale[key] = low, 1.0 / span
            self.vectors.append(key)
            spaces[key] = gym.spaces.Box(0.0, 1.0, (low.size,), np.float32)
        self.space = gym.spaces.Dict(spaces)

    def __call__(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        out = {IMAGE_KEY: np.asarray(obs[self.image_key])}
        for key in self.vectors:
            flat = np.asarray(obs[key], np.float64).reshape(-1)
            out[key] = ((flat - self._shift[key]) * self._scale[key]).astype(np.float32)
        return out


class DreamerObs(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """`DreamerKeys` as a wrapper (outermost, around a wrapper stack's Dict observation).

    Args:
        env: an env with a Dict observation holding the frame under `image_key`.
        image_key: the frame's key.
    """

    def __init__(self, env: gym.Env, image_key: str = "pixels") -> None:
        gym.utils.RecordConstructorArgs.__init__(self, image_key=image_key)
        gym.ObservationWrapper.__init__(self, env)
        if not isinstance(env.observation_space, gym.spaces.Dict):
            raise ValueError(f"DreamerObs needs a Dict observation, not {env.observation_space}")
        self.keys = DreamerKeys(env.observation_space, image_key)
        self.observation_space = self.keys.space

    def observation(self, observation: Any) -> dict[str, np.ndarray]:
        return self.keys(observation)


def wrap_for_dreamer(env: gym.Env, specs: list[WrapperSpec] | None) -> gym.Env:
    """`env` inside the stack `specs` and, when that makes a Dict, `DreamerObs` (closes `env` on
    error)."""
    if not specs:
        return env
    env = apply_wrappers(env, specs)
    if isinstance(env.observation_space, gym.spaces.Dict):
        try:
            env = DreamerObs(env)
        except ValueError:
            env.close()
            raise
    return env


def make_dreamer_env(  # noqa: A002  (hydra passes the env id as `id`, like gymnasium.make)
    id: str,
    scalars_dir: str,
    scalars_step: int = 0,
    run_dir: str | None = None,
    **kwargs: Any,
) -> gym.Env:
    """`gymnasium.make(id, **kwargs)` inside the `wrappers:` of the run's `config.yaml` (`run_dir`;
    None: none) and `EpisodeScalars`: the `_target_` of sheeprl's env config."""
    import metabonk_gym  # noqa: F401  (registers the envs)

    specs = run_wrappers(Path(run_dir)) if run_dir else []
    env = wrap_for_dreamer(gym.make(id, **kwargs), specs)
    return EpisodeScalars(env, scalars_dir, start_step=int(scalars_step))
