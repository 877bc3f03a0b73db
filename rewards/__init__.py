"""Rewards as sums of named, weighted terms over game variables (installed as metabonk_gym.rewards).

>>> fn = build_reward({"gold": {"type": "delta", "variable": "gold", "weight": 0.5}}, "Demo", {})
>>> fn.reset({"gold": 1}); fn.step({"gold": 5})
(2.0, {'gold': 2.0})
"""

from metabonk_gym.rewards.function import (
    DoneCondition,
    RewardFunction,
    VariableCheck,
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
    "VariableCheck",
    "build_reward",
    "terms_from_dict",
    "terms_from_scenario",
]
