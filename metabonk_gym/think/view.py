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
        """Read the snapshot from `env` (any wrapper stack over a `GBAEnv`, or another env)."""
        base = env.unwrapped
        integration = getattr(base, "integration", None)
        game = str(getattr(integration, "name", None) or (env.spec.id if env.spec else "game"))
        ram: dict[str, int] = {}
        arrays: dict[str, np.ndarray] = {}
        variables = getattr(base, "variables", None)
        read_array = getattr(base, "read_array", None)
        if integration is not None and variables is not None and read_array is not None:
            ram = {k: int(v) for k, v in variables().items()}
            for name in getattr(integration, "arrays", {}):
                arrays[name] = read_array(name)
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
    """Game frames per env step: the emulator's `frameskip`, else an action-repeat wrapper's
    `repeat` (Megabonk's training stack), else 1."""
    skip = getattr(env.unwrapped, "frameskip", None)
    if isinstance(skip, int):
        return skip
    layer: Any = env
    while layer is not None and layer is not env.unwrapped:
        repeat = getattr(layer, "repeat", None)
        if isinstance(repeat, int) and repeat >= 1:
            return repeat
        layer = getattr(layer, "env", None)
    return 1


def _strip(env: gym.Env, obs: Any) -> tuple[np.ndarray, int] | None:
    """The temporal strip in `obs` and its number of past frames, if a TemporalStrip is stacked."""
    if not isinstance(obs, dict):
        return None
    layer: Any = env
    while layer is not None:
        key, past = getattr(layer, "key", None), getattr(layer, "past", None)
        if type(layer).__name__ == "TemporalStrip" and key in obs and isinstance(past, int):
            return np.asarray(obs[key]), past
        layer = getattr(layer, "env", None)
    return None


def current_frame(env: gym.Env, obs: Any = None) -> np.ndarray:
    """The full-resolution screen as RGB uint8: the emulator's, else the observation when it is
    an RGB image (`image`, `pixels` or Megabonk's `frame`; wrappers may have downscaled or stacked
    it), else `render()`."""
    base = env.unwrapped
    backend = getattr(base, "backend", None)
    if backend is not None and hasattr(backend, "screen"):
        return np.asarray(backend.screen())
    if isinstance(obs, dict):  # "frame": Megabonk's observation
        obs = obs.get("image", obs.get("pixels", obs.get("frame")))
    if (
        isinstance(obs, np.ndarray)
        and obs.ndim == 3
        and obs.shape[2] == 3
        and obs.dtype == np.uint8
    ):
        return obs
    frame = base.render() if getattr(base, "render_mode", None) != "human" else None
    if isinstance(frame, np.ndarray):
        return frame
    return np.zeros((160, 240, 3), np.uint8)
