"""What video conversion needs to know about an env: its game, step rate, screen and actions.

Read from the env itself (made once with full RGB frames, never reset) and its training config,
so a user's game folder works like a bundled one. `reference_frames` plays a few random steps for
the look-alike check of `metabonk video to-dataset`.

>>> facts = env_facts("MetaBonk/BonkQuest-v0")
>>> facts.game, facts.step_rate, facts.screen, facts.action_names[:2]
('BonkQuest', 15.0, (160, 240), ('noop', 'UP'))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.registration import env_traits, short_id
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.megabonk import check_reachable


@dataclass(frozen=True)
class EnvFacts:
    """An env's facts for video: ids, step rate (steps per second), screen (H, W), actions.

    Args:
        env_id: the env id.
        game: the game's name (`EnvTraits.game`).
        frameskip: emulator frames per step (the training config's).
        step_rate: env steps per second of game time.
        screen: (height, width) of the full-size frame.
        action_n: actions of a Discrete action space; None for other spaces.
        action_names: a name per action ("noop", "UP", "UP+LEFT", ...).
        noop: the action that presses nothing, when there is one.
    """

    env_id: str
    game: str
    frameskip: int
    step_rate: float
    screen: tuple[int, int]
    action_n: int | None
    action_names: tuple[str, ...]
    noop: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "game": self.game,
            "frameskip": self.frameskip,
            "step_rate": self.step_rate,
            "screen": list(self.screen),
            "action_n": self.action_n,
            "action_names": list(self.action_names),
            "noop": self.noop,
        }


def pixels(obs: Any) -> np.ndarray:
    """The screen of an observation (a frame, or a Dict's `pixels`)."""
    if isinstance(obs, Mapping):
        return np.asarray(obs["pixels"])
    return np.asarray(obs)


def _make(env_id: str, overrides: Mapping[str, Any] | None = None) -> tuple[gym.Env, int]:
    cfg = resolve_config(env_id, overrides=dict(overrides or {}))
    kwargs = cfg.env_kwargs_for_make(env_id)
    kwargs.update(obs_type="rgb", downscale=1)
    kwargs.pop("reward", None)
    try:
        return gym.make(short_id(env_id), **kwargs), cfg.frameskip
    except TypeError as exc:
        raise ConfigError(f"{env_id} does not take these env kwargs: {exc}") from exc


def _action_names(env: gym.Env) -> tuple[tuple[str, ...], int | None]:
    space = env.action_space
    if not isinstance(space, gym.spaces.Discrete):
        return (), None
    combos = getattr(getattr(env.unwrapped, "integration", None), "discrete_actions", None)
    if combos is None or len(combos) != space.n:
        return tuple(str(i) for i in range(int(space.n))), None
    names = tuple("+".join(c) or "noop" for c in combos)
    noop = names.index("noop") if "noop" in names else None
    return names, noop


def env_facts(env_id: str, overrides: Mapping[str, Any] | None = None) -> EnvFacts:
    """The facts of `env_id` under its training config (`overrides` change config keys)."""
    env, frameskip = _make(env_id, overrides)
    try:
        space = env.observation_space
        if isinstance(space, gym.spaces.Dict):
            space = space["pixels"]
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 3:
            raise ConfigError(f"{env_id} shows no screen (observation {space}); video needs frames")
        # the game's tick rate where the env declares one (Megabonk: 60 ticks/s, frames at
        # JpegHz), else the emulator's frame rate
        fps = float(env_traits(env_id).tick_hz or env.metadata.get("render_fps") or 60)
        skip = int(getattr(env.unwrapped, "frameskip", 1) or 1)
        names, noop = _action_names(env)
        n = int(env.action_space.n) if isinstance(env.action_space, gym.spaces.Discrete) else None
        return EnvFacts(
            env_id=short_id(env_id),
            game=env_traits(env_id).game or short_id(env_id),
            frameskip=frameskip,
            step_rate=fps / skip,
            screen=(int(space.shape[0]), int(space.shape[1])),
            action_n=n,
            action_names=names,
            noop=noop,
        )
    finally:
        env.close()


def reference_frames(
    env_id: str, *, episodes: int = 2, steps: int = 60, every: int = 6, seed: int = 0
) -> np.ndarray:
    """Full-size RGB frames of the env under random actions (raises when it cannot run; a game
    that must be running, e.g. Megabonk, is asked once with a 1 s deadline)."""
    if env_traits(env_id).port_per_env:
        check_reachable(resolve_config(env_id), n_envs=1, timeout=1.0)
    env, _ = _make(env_id)
    frames = []
    try:
        env.action_space.seed(seed)
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            frames.append(pixels(obs))
            for t in range(steps):
                obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
                if t % every == every - 1:
                    frames.append(pixels(obs))
                if terminated or truncated:
                    break
    finally:
        env.close()
    return np.stack(frames)
