"""What the env's reward reads: the game variables of `info` that reward terms may name.

The reward itself is a sum of `metabonk_gym.rewards` terms over these (`reward=` a preset of
`games/Megabonk/presets.yaml`, or your own terms). Each preset term uses only what the game
actually sends, so the reward degrades gracefully against the deployed plugin (constant health
100/100, no kills or XP): the health term is then always 0 and the kill/XP terms stay 0.

>>> reward_variables({"hp": 50.0, "max_hp": 100.0, "lost": False, "position": None})["hp"]
50.0
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metabonk_gym.bonklink.codec import GameState

__all__ = ["REWARD_VARIABLES", "is_dead", "reward_variables"]

#: The info values reward terms may read (`kills`, `xp`, `level` only when the game sends them).
REWARD_VARIABLES: tuple[str, ...] = (
    "hp",
    "max_hp",
    "won",
    "lost",
    "game_time",
    "survival_time",
    "is_playing",
    "is_paused",
    "kills",
    "xp",
    "level",
)


def is_dead(state: GameState) -> bool:
    """Health at zero with a meaningful maximum (a stubbed plugin never reports this)."""
    return state.max_health > 0 and state.health <= 0


def reward_variables(info: Mapping[str, Any]) -> dict[str, Any]:
    """The reward's view of one step's `info` (the scalar game variables it has)."""
    return {name: info[name] for name in REWARD_VARIABLES if name in info}
