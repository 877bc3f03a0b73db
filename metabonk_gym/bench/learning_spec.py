"""A game folder's teacher-free learning figure as data (`learning.yaml`): what it measures, on
which seeds, against which target, and how each learner (PPO, or Go-Explore then robustify) is
set up, so a game nobody here wrote is measured with data, not code.

`metabonk bench teacherless ENV` (`metabonk_gym.bench.teacherless`) reads it; `score` turns an
evaluation report into the figure's value and `evaluate_spec` plays an agent on the spec's seeds.

>>> spec = LearningSpec.from_mapping({"metric": "length", "target": {"ratio": 3}})
>>> spec.metric, spec.episodes, spec.passed(6.0, 2.0), spec.passed(5.0, 2.0)
('length', 20, True, False)
>>> won = LearningSpec.from_mapping({"target": {"at-least": 0.8}, "worst": {"at-least": 0.6}})
>>> won.passed(0.7, 0.0), won.passed(0.7, 0.0, worst=True), won.describe(worst=True)
(False, True, 'won >= 0.6')
>>> score({"episodes": [{"variables": {"population": 40}}, {"variables": {"population": 60}}]},
...       "variable:population")
50.0
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.errors import MetabonkError
from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.registration import env_traits
from metabonk_gym.training.seeds import EVAL_SEED

TARGET_KINDS = ("at-least", "ratio")


def _check_target(target: Mapping[str, float], key: str) -> None:
    if len(target) != 1 or next(iter(target)) not in TARGET_KINDS:
        raise MetabonkError(f"learning.yaml: {key} must be {{at-least: X}} or {{ratio: R}}")


@dataclass(frozen=True)
class LearningSpec:
    """What a game's teacher-free figure measures (its folder's `learning.yaml`).

    Args:
        metric: "won" (win rate), "length" (mean steps per episode: survival), or
            "variable:NAME" (mean final value of a game variable).
        state: the start state of training and evaluation (None: the defaults' own).
        episodes: evaluation episodes per agent, on seeds EVAL_SEED + i.
        max_steps: the episode step limit of evaluation (None: the config's).
        target: {"at-least": X} (the median of the seeds) or {"ratio": R} (median / random's).
        total_steps: PPO env steps per seed (None: the folder's defaults.yaml).
        rules: the obvious rules measured beside random (agent specs such as `repeat:2`).
        worst: the target of the worst seed (empty: the same as `target`).
        explore: `ExploreSettings` fields of the Go-Explore method (e.g. until_prefer).
        robustify: `BackwardSettings` fields of the Go-Explore method (e.g. max_stride, and
            `overrides`: training config keys).
        explore_share: the most of a seed's budget exploring may take; robustifying the
            archive's best path gets the rest.
    """

    metric: str = "won"
    state: str | None = None
    episodes: int = 20
    max_steps: int | None = None
    target: Mapping[str, float] = field(default_factory=dict)
    total_steps: int | None = None
    rules: tuple[str, ...] = ()
    worst: Mapping[str, float] = field(default_factory=dict)
    explore: Mapping[str, Any] = field(default_factory=dict)
    robustify: Mapping[str, Any] = field(default_factory=dict)
    explore_share: float = 0.5

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LearningSpec:
        """The spec from `learning.yaml`'s mapping, checked."""
        unknown = set(data) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise MetabonkError(f"learning.yaml: unknown keys {sorted(unknown)}")
        values = dict(data)
        values["rules"] = tuple(str(rule) for rule in values.get("rules") or ())
        for key in ("explore", "robustify", "worst"):
            if not isinstance(values.get(key) or {}, Mapping):
                raise MetabonkError(f"learning.yaml: {key} must be a mapping")
        spec = cls(**values)
        if not (spec.metric in ("won", "length") or spec.metric.startswith("variable:")):
            raise MetabonkError(
                f"learning.yaml: metric must be won, length or variable:NAME, not {spec.metric!r}"
            )
        _check_target(spec.target, "target")
        if spec.worst:
            _check_target(spec.worst, "worst")
        if not 0.0 < float(spec.explore_share) <= 1.0:
            raise MetabonkError(
                f"learning.yaml: explore_share must be in (0, 1], not {spec.explore_share}"
            )
        return spec

    def _target(self, worst: bool) -> tuple[str, float]:
        return next(iter((self.worst if worst and self.worst else self.target).items()))

    def passed(self, learned: float, random: float, *, worst: bool = False) -> bool:
        """Whether `learned` meets the target (the worst seed's with `worst`) beside random's."""
        kind, value = self._target(worst)
        if kind == "ratio":
            return learned >= value * random if random > 0 else learned > 0
        return learned >= value

    def describe(self, *, worst: bool = False) -> str:
        kind, value = self._target(worst)
        return (
            f"{self.metric} >= {value}x random" if kind == "ratio" else f"{self.metric} >= {value}"
        )


def score(report: Mapping[str, Any], metric: str) -> float:
    """An evaluation report's value for `metric` (see `LearningSpec`)."""
    if metric == "won":
        return float(report["win_rate"])
    episodes = report["episodes"]
    if metric == "length":
        return statistics.fmean(float(e["length"]) for e in episodes)
    name = metric.partition(":")[2]
    return statistics.fmean(float(e["variables"][name]) for e in episodes)


def load_spec(env_id: str) -> tuple[GameData, LearningSpec]:
    """The game folder of a registered env and its learning spec."""
    game = env_traits(env_id).game
    if game is None:
        raise MetabonkError(f"{env_id} names no game folder: use a bundled game's id")
    data = GameData(bundled_game_folder(game))
    raw = data.learning()
    if not raw:
        raise MetabonkError(f"{data.folder} has no learning.yaml: nothing declares the figure")
    return data, LearningSpec.from_mapping(raw)


def wall_clock_stop(minutes: float, tick: Callable[[], None] | None = None) -> Any:
    """An SB3 callback that ends `learn` once `minutes` have passed since this call (the model
    is then saved), so what comes before PPO's first step (replaying a demonstration, cloning
    it) is spent from the budget too; `tick` is called at every step (the caller's clock).

    >>> stop = wall_clock_stop(0.0)
    >>> stop._on_step()
    False
    """
    from stable_baselines3.common.callbacks import BaseCallback

    deadline = time.monotonic() + minutes * 60

    class WallClockStop(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.deadline = deadline

        def _on_step(self) -> bool:
            if tick is not None:
                tick()
            return time.monotonic() < self.deadline

    return WallClockStop()


def evaluate_spec(env_id: str, agent: str, spec: LearningSpec, where: Path) -> dict[str, Any]:
    """`agent` on the spec's evaluation seeds; the report is ranked into `where/ladder.json`
    (the game's ladder: random, the rules and every seed on the same seeds)."""
    overrides: dict[str, Any] = {}
    if spec.state is not None:
        overrides["state"] = spec.state
    if spec.max_steps is not None:
        overrides["max_episode_steps"] = spec.max_steps
    return evaluate(
        env_id,
        agent,
        episodes=spec.episodes,
        seed=EVAL_SEED,
        overrides=overrides,
        ladder=where / "ladder.json",
        goal="game",
    )
