"""The env's observation: a Dict of the frame, a state vector, the menu and the level-up options.

``state`` is a float32 vector laid out as :data:`STATE_LAYOUT` followed by ``k`` enemy slots of
:data:`ENEMY_LAYOUT` (nearest first, relative to the player; empty slots are all zero).
Menus and options are strings on the wire; the observation carries them as stable ids
(CRC-32 buckets, identical in every process) so that any policy network can take them, while
``info`` keeps the exact strings. Id 0 is reserved: ``"Gameplay"`` for the menu, an empty slot
for options.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
from gymnasium import spaces

from metabonk_gym.bonklink.codec import GameState

__all__ = ["ENEMY_LAYOUT", "STATE_LAYOUT", "ObservationBuilder", "bucket_id"]

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


def bucket_id(text: str, buckets: int) -> int:
    """A stable id in ``1..buckets`` for a string (CRC-32; collisions are possible)."""
    return 1 + zlib.crc32(text.encode("utf-8", "replace")) % buckets


class ObservationBuilder:
    """Builds observations of one fixed layout from decoded states and processed frames."""

    def __init__(
        self,
        frame_size: tuple[int, int],
        k_enemies: int = 8,
        max_options: int = 4,
        menu_buckets: int = 31,
        option_buckets: int = 64,
    ) -> None:
        if k_enemies < 0 or max_options < 0 or menu_buckets < 1 or option_buckets < 1:
            raise ValueError("k_enemies/max_options must be >= 0 and bucket counts >= 1")
        self.frame_size = (int(frame_size[0]), int(frame_size[1]))
        self.k_enemies = k_enemies
        self.max_options = max_options
        self.menu_buckets = menu_buckets
        self.option_buckets = option_buckets
        self.state_dim = len(STATE_LAYOUT) + len(ENEMY_LAYOUT) * k_enemies
        self._ids: dict[tuple[str, int], int] = {}
        self.space = spaces.Dict(
            {
                "frame": spaces.Box(0, 255, (*self.frame_size, 3), np.uint8),
                "state": spaces.Box(-_FLT_MAX, _FLT_MAX, (self.state_dim,), np.float32),
                "menu": spaces.Discrete(menu_buckets + 1),
                "options": spaces.MultiDiscrete(
                    np.full(max(1, max_options), option_buckets + 1, np.int64)
                ),
            }
        )

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
        """The float32 state vector (NaN reads as 0, infinities as +-float32 max)."""
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

    def build(self, state: GameState, frame: np.ndarray) -> dict[str, Any]:
        """A fresh observation dict (nothing in it is shared with earlier ones)."""
        options = np.zeros(max(1, self.max_options), np.int64)
        for i, text in enumerate(state.options[: self.max_options]):
            options[i] = self._id(text, self.option_buckets)
        return {
            "frame": frame.copy(),
            "state": self.state_vector(state),
            "menu": np.int64(self.menu_id(state.menu)),
            "options": options,
        }
