"""Rewards as sums of named, weighted terms over game variables (installed as metabonk_gym.rewards)."""

from metabonk_gym.rewards.function import (
    DoneCondition,
    RewardFunction,
    build_reward,
    terms_from_dict,
    terms_from_scenario,
)
from metabonk_gym.rewards.presets import PRESETS
from metabonk_gym.rewards.terms import (
    Delta,
    Event,
    FractionDelta,
    Novelty,
    Penalty,
    RewardTerm,
    ScenarioVariable,
    Survival,
    TimePenalty,
)

__all__ = [
    "PRESETS",
    "Delta",
    "DoneCondition",
    "Event",
    "FractionDelta",
    "Novelty",
    "Penalty",
    "RewardFunction",
    "RewardTerm",
    "ScenarioVariable",
    "Survival",
    "TimePenalty",
    "build_reward",
    "terms_from_dict",
    "terms_from_scenario",
]
