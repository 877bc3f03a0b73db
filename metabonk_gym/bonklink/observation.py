"""The env's observation, built from decoded packets: the state vector and the frame.

The raw state is a float32 vector laid out as :data:`STATE_LAYOUT` followed by ``k`` enemy slots
of :data:`ENEMY_LAYOUT` (nearest first, relative to the player; empty slots are all zero).
``obs_type="state"`` observes it at fixed scales (:func:`scale_state`), what an MLP policy learns
from; ``"rgb"``/``"grayscale"`` give a Dict of ``pixels`` (the frame) and that scaled ``state``.
Without an ``obs_type`` (the env's default) the observation is everything a packet holds: a Dict
of ``pixels``, the raw ``state``, and the ``menu`` and level-up ``options`` as stable ids
(CRC-32 buckets, identical in every process; ``info`` keeps the exact strings). Id 0 is
reserved: ``"Gameplay"`` for the menu, an empty slot for options.

>>> scale_state(np.full(11 + 5 * 8, 20.0, np.float32))[:3].tolist()
[0.5, 0.5, 0.5]
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
from gymnasium import spaces

from metabonk_gym.bonklink.codec import GameState
from metabonk_gym.contract import PIXELS, check_obs_type
from metabonk_gym.preprocess import luma

__all__ = [
    "CLIP",
    "ENEMY_LAYOUT",
    "ENEMY_SCALE",
    "HEAD_SCALE",
    "STATE_LAYOUT",
    "ObservationBuilder",
    "bucket_id",
    "scale_state",
]

STATE_LAYOUT: tuple[str, ...] = (
    "pos_x",
    "pos_y",
    "pos_z",
    "vel_x",
    "vel_y",
    "vel_z",
    "health_frac",
    "game_time",
    "is_playing",
    "is_paused",
    "enemy_count",
)
ENEMY_LAYOUT: tuple[str, ...] = ("dx", "dy", "dz", "health", "present")

_FLT_MAX = float(np.finfo(np.float32).max)

#: Scale of each state-vector entry (:data:`STATE_LAYOUT`), then of each enemy slot (dx, dy, dz,
#: health, present): world units of the stand-in arena (40 from the centre to a wall, enemies
#: spawn 11-15 away), speeds, 5 game minutes, 32 enemies.
HEAD_SCALE: tuple[float, ...] = (40, 40, 40, 10, 10, 10, 1, 300, 1, 1, 32)
ENEMY_SCALE: tuple[float, ...] = (10, 10, 10, 50, 1)
#: Scaled entries are clipped to +-CLIP.
CLIP = 10.0


def scale_state(vec: np.ndarray) -> np.ndarray:
    """The raw state vector at fixed scales, clipped to +-:data:`CLIP` (a float32 copy)."""
    head = len(HEAD_SCALE)
    k = (vec.shape[-1] - head) // len(ENEMY_SCALE)
    scale = np.asarray((*HEAD_SCALE, *(ENEMY_SCALE * k)), np.float32)
    return np.clip(vec / scale, -CLIP, CLIP).astype(np.float32)


def bucket_id(text: str, buckets: int) -> int:
    """A stable id in ``1..buckets`` for a string (CRC-32; collisions are possible)."""
    return 1 + zlib.crc32(text.encode("utf-8", "replace")) % buckets


class ObservationBuilder:
    """Builds observations of one layout (`obs_type`) from decoded states and processed frames.

    Args:
        frame_size: (height, width) of the frames it is given (after the env's downscale).
        k_enemies: enemy slots in the state vector (nearest first).
        max_options: level-up option slots of the full observation.
        obs_type: ``"state"``, ``"rgb"``, ``"grayscale"``, or None: the full observation (see
            the module docstring).
        menu_buckets, option_buckets: id ranges of menu names and options (full observation).
    """

    def __init__(
        self,
        frame_size: tuple[int, int],
        k_enemies: int = 8,
        max_options: int = 4,
        obs_type: str | None = None,
        menu_buckets: int = 31,
        option_buckets: int = 64,
    ) -> None:
        if k_enemies < 0 or max_options < 0 or menu_buckets < 1 or option_buckets < 1:
            raise ValueError("k_enemies/max_options must be >= 0 and bucket counts >= 1")
        self.frame_size = (int(frame_size[0]), int(frame_size[1]))
        self.k_enemies = k_enemies
        self.max_options = max_options
        self.obs_type = None if obs_type is None else check_obs_type(obs_type)
        self.menu_buckets = menu_buckets
        self.option_buckets = option_buckets
        self.state_dim = len(STATE_LAYOUT) + len(ENEMY_LAYOUT) * k_enemies
        self._ids: dict[tuple[str, int], int] = {}
        scaled = spaces.Box(-CLIP, CLIP, (self.state_dim,), np.float32)
        self.space: spaces.Space[Any]
        if obs_type is None:
            self.space = spaces.Dict(
                {
                    PIXELS: spaces.Box(0, 255, (*self.frame_size, 3), np.uint8),
                    "state": spaces.Box(-_FLT_MAX, _FLT_MAX, (self.state_dim,), np.float32),
                    "menu": spaces.Discrete(menu_buckets + 1),
                    "options": spaces.MultiDiscrete(
                        np.full(max(1, max_options), option_buckets + 1, np.int64)
                    ),
                }
            )
        elif obs_type == "state":
            self.space = scaled
        else:
            channels = 3 if obs_type == "rgb" else 1
            pixels = spaces.Box(0, 255, (*self.frame_size, channels), np.uint8)
            self.space = spaces.Dict({PIXELS: pixels, "state": scaled})

    def _id(self, text: str, buckets: int) -> int:
        key = (text, buckets)
        found = self._ids.get(key)
        if found is None:
            if len(self._ids) > 4096:
                self._ids.clear()
            found = self._ids[key] = bucket_id(text, buckets)
        return found

    def menu_id(self, menu: str) -> int:
        """0 for ``"Gameplay"``, else the menu name's bucket."""
        return 0 if menu == "Gameplay" else self._id(menu, self.menu_buckets)

    def state_vector(self, state: GameState) -> np.ndarray:
        """The raw float32 state vector (NaN reads as 0, infinities as +-float32 max)."""
        enemies = state.enemies
        hp_frac = state.health / state.max_health if state.max_health > 0 else 0.0
        vec = np.zeros(self.state_dim, np.float32)
        head = len(STATE_LAYOUT)
        vec[:head] = (
            *state.position, *state.velocity, hp_frac, state.game_time, state.is_playing,
            state.is_paused, len(enemies),
        )  # fmt: skip
        k = self.k_enemies
        if k and len(enemies):
            rel = enemies.copy()  # dx, dy, dz, health
            rel[:, :3] -= vec[:3]
            nearest = np.argsort((rel[:, :3] ** 2).sum(axis=1), kind="stable")[:k]
            slots = vec[head:].reshape(k, len(ENEMY_LAYOUT))
            slots[: len(nearest), :4] = rel[nearest]
            slots[: len(nearest), 4] = 1.0
        if not math.isfinite(vec.sum()):  # NaN and infinities propagate into the sum
            np.nan_to_num(vec, copy=False, nan=0.0, posinf=_FLT_MAX, neginf=-_FLT_MAX)
        return vec

    def build(self, state: GameState, frame: np.ndarray) -> Any:
        """A fresh observation (nothing in it is shared with earlier ones)."""
        raw = self.state_vector(state)
        if self.obs_type is None:
            options = np.zeros(max(1, self.max_options), np.int64)
            for i, text in enumerate(state.options[: self.max_options]):
                options[i] = self._id(text, self.option_buckets)
            return {
                PIXELS: frame.copy(),
                "state": raw,
                "menu": np.int64(self.menu_id(state.menu)),
                "options": options,
            }
        vec = scale_state(raw)
        if self.obs_type == "state":
            return vec
        pixels = luma(frame) if self.obs_type == "grayscale" else frame.copy()
        return {PIXELS: pixels, "state": vec}
