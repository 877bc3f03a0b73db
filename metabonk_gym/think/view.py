"""`GameView`: one snapshot of the game for the strategist, the follower and the decision log.

What: the screen, the env's `info`, every RAM variable of the integration and its RAM arrays
(`room_tiles`, enemy arrays, ...), taken at one step. Why: the prompt, System 1, the oracle and
the outcome bookkeeping all need the same consistent picture; reading it once per step (a few
microseconds of RAM reads, never a copy of all memory) keeps them in agreement and cheap.

>>> import numpy as np
>>> v = GameView(game="Demo", step=3, frame_source=np.zeros((160, 240, 3), np.uint8), info={"hp": 2},
...              ram={"hp": 2})
>>> v.get("hp"), v.get("missing", 7)
(2, 7)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.contract import HasRam
from metabonk_gym.utils import find_wrapper
from metabonk_gym.wrappers.temporal_strip import TemporalStrip


@dataclass
class GameView:
    """A snapshot: `ram` has every data.json variable, `arrays` the metabonk.json arrays.

    `frame` may be given as an array or as a callable that reads the screen on first use (most
    steps never need the picture, only think calls and the log do).
    """

    game: str
    step: int
    frame_source: np.ndarray | Callable[[], np.ndarray]
    info: dict[str, Any]
    ram: dict[str, int] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    frameskip: int = 1
    #: `(frames, past)` from a `TemporalStrip` in the wrapper stack: past, present, predicted
    strip: tuple[np.ndarray, int] | None = None

    @property
    def frame(self) -> np.ndarray:
        """The screen, RGB uint8 (read on first use)."""
        if callable(self.frame_source):
            self.frame_source = self.frame_source()
        return self.frame_source

    def get(self, name: str, default: int = 0) -> int:
        """A RAM variable (falling back to `info`, then `default`)."""
        if name in self.ram:
            return int(self.ram[name])
        value = self.info.get(name, default)
        return int(value) if isinstance(value, (int, np.integer, float)) else default

    @classmethod
    def capture(
        cls, env: gym.Env, info: dict[str, Any] | None, step: int, obs: Any = None
    ) -> GameView:
        """Read the snapshot from `env` (any wrapper stack over an env of the suite; an env with
        RAM, `HasRam`, adds every RAM variable and array)."""
        base = env.unwrapped
        game_data = getattr(base, "game_data", None)  # every env of the suite has one
        game = str(game_data.name if game_data else (env.spec.id if env.spec else "game"))
        ram: dict[str, int] = {}
        arrays: dict[str, np.ndarray] = {}
        if isinstance(base, HasRam):
            game = base.integration.name
            ram = {k: int(v) for k, v in base.variables().items()}
            arrays = {name: base.read_array(name) for name in base.integration.arrays}
        return cls(
            game=game,
            step=step,
            frame_source=lambda: current_frame(env, obs),
            info=dict(info or {}),
            ram=ram,
            arrays=arrays,
            frameskip=_frameskip(env),
            strip=_strip(env, obs),
        )


def _frameskip(env: gym.Env) -> int:
    """Game frames (or ticks) per env step: the env's `frameskip` (every env has one), else 1."""
    skip = getattr(env.unwrapped, "frameskip", 1)
    return skip if isinstance(skip, int) and skip >= 1 else 1


def _strip(env: gym.Env, obs: Any) -> tuple[np.ndarray, int] | None:
    """The temporal strip in `obs` and its number of past frames, if a TemporalStrip is stacked."""
    strip = find_wrapper(env, TemporalStrip)
    if strip is None or not isinstance(obs, dict) or strip.key not in obs:
        return None
    return np.asarray(obs[strip.key]), strip.past


def current_frame(env: gym.Env, obs: Any = None) -> np.ndarray:
    """The full-resolution screen as RGB uint8: the env's `render()` (every env of the suite
    returns its last frame there, unless it draws a window), else the observation's `pixels`
    when they are RGB (wrappers may have downscaled or stacked them)."""
    base = env.unwrapped
    if base.render_mode != "human":
        frame: Any = base.render()
        if isinstance(frame, np.ndarray):
            return frame
    if isinstance(obs, dict):
        obs = obs.get("pixels")
    if (
        isinstance(obs, np.ndarray)
        and obs.ndim == 3
        and obs.shape[2] == 3
        and obs.dtype == np.uint8
    ):
        return obs
    return np.zeros((160, 240, 3), np.uint8)
