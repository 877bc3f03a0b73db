"""The env's reward: survival time, health change, kills and XP, and a death penalty.

Each term uses only what the game actually sent, so the reward degrades gracefully against the
deployed plugin (constant health 100/100, no kills or XP): the health term is then always 0 and
the kill/XP terms are absent, leaving survival time and the death penalty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from metabonk_gym.bonklink.codec import GameState

__all__ = ["RewardConfig", "is_dead", "reward_terms"]


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the reward terms.

    * ``survival``: per second of game time that passed while playing (unpaused);
    * ``health``: per whole health bar gained (so losing a full bar gives ``-health``);
    * ``kill``: per kill, ``xp``: per XP point (only when the game sends them);
    * ``death``: once, on the step where the player dies.
    """

    survival: float = 1.0
    health: float = 5.0
    kill: float = 0.2
    xp: float = 0.05
    death: float = -5.0

    @classmethod
    def from_mapping(cls, weights: Mapping[str, float] | None) -> RewardConfig:
        """Defaults overridden by ``weights`` (unknown names are an error)."""
        if not weights:
            return cls()
        known = {f.name for f in fields(cls)}
        unknown = set(weights) - known
        if unknown:
            raise ValueError(f"unknown reward weights {sorted(unknown)}; known: {sorted(known)}")
        return replace(cls(), **{k: float(v) for k, v in weights.items()})


def is_dead(state: GameState) -> bool:
    """Health at zero with a meaningful maximum (a stubbed plugin never reports this)."""
    return state.max_health > 0 and state.health <= 0


def reward_terms(
    prev: GameState, cur: GameState, terminated: bool, config: RewardConfig
) -> dict[str, float]:
    """The weighted terms of one step's reward (their sum is the reward)."""
    terms: dict[str, float] = {}
    dt = cur.game_time - prev.game_time
    # A time jump backwards (a new run) or a huge one (a stall, a bad value) earns nothing.
    playing = cur.is_playing and not cur.is_paused and not terminated
    terms["survival"] = config.survival * dt if playing and 0.0 < dt < 1.0 else 0.0
    if prev.max_health > 0 and cur.max_health > 0 and prev.is_playing:
        change = cur.health / cur.max_health - prev.health / prev.max_health
        terms["health"] = config.health * change if change == change else 0.0
    else:
        terms["health"] = 0.0
    if prev.stats is not None and cur.stats is not None:
        terms["kill"] = config.kill * max(0, cur.stats.kills - prev.stats.kills)
        terms["xp"] = config.xp * max(0.0, cur.stats.xp - prev.stats.xp)
    terms["death"] = config.death if terminated else 0.0
    return terms
