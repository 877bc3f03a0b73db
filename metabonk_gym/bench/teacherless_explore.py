"""The Go-Explore method of `metabonk bench teacherless --method explore`: per seed, explore the
game from the spec's start with the folder's cells, then robustify the archive's best path into a
pixel policy, both within one wall-clock budget; the policy and the archive's replay are scored
on the spec's evaluation seeds.

Why one budget: the issue's figure is "exploration and robustification together, at most N
hours a seed". Exploring may take `explore_share` of it (it stops sooner when its own end, e.g.
the first win, comes); robustifying gets what is left. The minutes spent are kept per seed in
`budget-seedN.json`, so a stopped bench resumes (`explore --resume`, `robustify --resume`)
without granting a seed more than its budget. Nothing here names a game: the settings are the
folder's `learning.yaml` (`explore:`, `robustify:`), its cells are its `cells.yaml`.

>>> spec = LearningSpec(state="start", explore={"until_prefer": 2, "stop_when_won": False})
>>> s = explore_settings(spec, seed=1, seconds=60.0)
>>> s.seed, s.state, s.until_prefer, s.stop_when_won, s.max_seconds
(1, 'start', 2, False, 60.0)
>>> explore_settings(LearningSpec(explore={"seed": 3}), 0, 1.0)
Traceback (most recent call last):
...
metabonk_gym.errors.MetabonkError: learning.yaml: explore: the bench sets seed, max_seconds and state; unknown or set here: ['seed']
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from metabonk_gym.bench.learning_spec import LearningSpec, evaluate_spec, score, wall_clock_stop
from metabonk_gym.errors import MetabonkError
from metabonk_gym.rundir import RunDir
from metabonk_gym.training.backward import BackwardSettings, run_robustify
from metabonk_gym.training.explore import ARCHIVE_FILE, ExploreSettings, run_explore
from metabonk_gym.utils import Log, atomic_write_text

#: Robustify's PPO step budget: the wall clock ends it, not a step count.
ROBUST_TOTAL_STEPS = 100_000_000
#: Keys the bench sets itself in each method's settings.
EXPLORE_SET_HERE = ("seed", "max_seconds", "state")
ROBUST_SET_HERE = ("total_steps",)


def _checked(section: str, given: dict[str, Any], known: set[str], set_here: tuple) -> None:
    bad = sorted(set(given) - known) + sorted(set(given) & set(set_here))
    if bad:
        raise MetabonkError(
            f"learning.yaml: {section}: the bench sets {', '.join(set_here[:-1])}"
            f"{' and ' if len(set_here) > 1 else ''}{set_here[-1]}; unknown or set here: {bad}"
        )


def explore_settings(spec: LearningSpec, seed: int, seconds: float) -> ExploreSettings:
    """The explorer's settings of one seed: the spec's `explore:` keys (stopping at the first
    win unless they say otherwise), this seed, the spec's start and `seconds` at most."""
    given = dict(spec.explore)
    _checked("explore", given, {f.name for f in fields(ExploreSettings)}, EXPLORE_SET_HERE)
    values = {"stop_when_won": True, **given}
    values.update(seed=seed, max_seconds=seconds, state=spec.state)
    return ExploreSettings(**values)


def robust_settings(spec: LearningSpec, seed: int) -> BackwardSettings:
    """The backward curriculum's settings of one seed: the spec's `robustify:` keys, this seed
    as the training seed, and a step budget the wall clock ends first.

    >>> r = robust_settings(LearningSpec(robustify={"max_stride": 8}), seed=2)
    >>> r.max_stride, r.overrides["seed"], r.total_steps == ROBUST_TOTAL_STEPS
    (8, 2, True)
    """
    given = dict(spec.robustify)
    _checked("robustify", given, {f.name for f in fields(BackwardSettings)}, ROBUST_SET_HERE)
    overrides = {**dict(given.pop("overrides", None) or {}), "seed": seed}
    return BackwardSettings(**given, overrides=overrides, total_steps=ROBUST_TOTAL_STEPS)


def _budget(path: Path) -> dict[str, Any]:
    """Minutes a seed has spent so far (a missing file: none)."""
    if not path.is_file():
        return {"explore_minutes": 0.0, "robust_minutes": 0.0, "explore_done": False}
    return dict(json.loads(path.read_text()))


def _save_budget(path: Path, budget: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(budget) + "\n")


def _explore(
    env_id: str, out: Path, spec: LearningSpec, seed: int, minutes: float, budget_path: Path
) -> dict[str, Any]:
    """Explore within the seed's share of `minutes` (resumed when an archive is there)."""
    budget = _budget(budget_path)
    left = minutes * spec.explore_share - budget["explore_minutes"]
    if budget["explore_done"] or left <= 0:
        return budget
    start = time.monotonic()
    resume = (out / ARCHIVE_FILE).is_file()
    result = run_explore(env_id, out, explore_settings(spec, seed, left * 60), resume=resume)
    budget["explore_minutes"] += (time.monotonic() - start) / 60
    budget["explore_done"] = not result.interrupted
    budget.update(explore_frames=result.frames, explore_won=result.won, best=result.best)
    _save_budget(budget_path, budget)
    if result.interrupted:
        raise KeyboardInterrupt(f"{out}: exploring stopped; the archive is saved")
    return budget


def _robustify(
    out: Path, run_dir: Path, spec: LearningSpec, seed: int, minutes: float, budget_path: Path
) -> dict[str, Any]:
    """Robustify the archive's best path with the minutes the seed has left."""
    budget = _budget(budget_path)
    left = minutes - budget["explore_minutes"] - budget["robust_minutes"]
    if left <= 0:
        return budget
    start = time.monotonic()
    resume = RunDir(run_dir).is_run()
    result = run_robustify(
        out, run_dir, robust_settings(spec, seed), resume=resume, callbacks=[wall_clock_stop(left)]
    )
    budget["robust_minutes"] += (time.monotonic() - start) / 60
    budget.update(
        env_steps=result.num_timesteps,
        demo_steps=result.demo_steps,
        demo_won=result.demo_won,
        reached_step=result.reached_step,
        fresh_seeds=result.fresh_seeds,
    )
    _save_budget(budget_path, budget)
    if result.interrupted:
        raise KeyboardInterrupt(f"{run_dir} stopped at step {result.num_timesteps}")
    return budget


def explored_seed(
    env_id: str, where: Path, spec: LearningSpec, seed: int, minutes: float, train: bool, log: Log
) -> dict[str, Any]:
    """One seed of the Go-Explore method: explore, robustify (unless `train` is False: the
    seed's runs as they stand), then score the policy and the archive's replay."""
    out, run_dir = where / f"explore-seed{seed}", where / f"robust-seed{seed}"
    budget_path = where / f"budget-seed{seed}.json"
    if train:
        _explore(env_id, out, spec, seed, minutes, budget_path)
        log(f"seed {seed}: explored; robustifying for the rest of {minutes:g} min")
        _robustify(out, run_dir, spec, seed, minutes, budget_path)
    elif not budget_path.is_file():
        raise MetabonkError(f"{run_dir} was not trained by this bench: run it without --no-train")
    budget = _budget(budget_path)
    if not RunDir(run_dir).is_run():
        raise MetabonkError(f"{run_dir}: no policy (the budget went to exploring); raise --minutes")
    replay = f"replay:{out / ARCHIVE_FILE}"
    return {
        "seed": seed,
        "env_steps": int(budget.get("env_steps", 0)),
        "explore_frames": int(budget.get("explore_frames", 0)),
        "explore_won": bool(budget.get("explore_won", False)),
        "demo_steps": budget.get("demo_steps"),
        "reached_step": budget.get("reached_step"),
        "explore_minutes": round(budget["explore_minutes"], 1),
        "wall_minutes": round(budget["explore_minutes"] + budget["robust_minutes"], 1),
        "value": score(evaluate_spec(env_id, str(run_dir), spec, where), spec.metric),
        "replay": score(evaluate_spec(env_id, replay, spec, where), spec.metric),
    }
