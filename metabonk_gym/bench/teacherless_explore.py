"""The Go-Explore method of `metabonk bench teacherless --method explore`: per seed, explore the
game from the spec's start with the folder's cells, then robustify the archive's best path into a
pixel policy, both within one wall-clock budget; the policy and the archive's replay are scored
on the spec's evaluation seeds.

Why one budget: the learning figure counts exploring and robustifying together, at most N
hours a seed. Exploring may take `explore_share` of it (it stops sooner when its own end, e.g.
the first win, comes); robustifying gets what is left. The minutes spent are kept per seed in
`budget-seedN.json`, so a stopped bench resumes (`explore --resume`, `robustify --resume`)
without granting a seed more than its budget. Nothing here names a game: the settings are the
folder's `learning.yaml` (`explore:`, `robustify:`), its cells are its `cells.yaml`.

Seeded variants: with `game_seeds: [G0, G1, ...]` under `explore:`, each game seed is explored in
turn (one archive each, within the one exploring share); the first archive's path is the
curriculum's, the others' won paths are started on by the uniform share (`robustify --also`),
so the policy sees the game as different seeds lay it out, not one path to memorise.

>>> spec = LearningSpec(state="start", explore={"until_prefer": 2, "stop_when_won": False})
>>> s = explore_settings(spec, seed=1, seconds=60.0)
>>> s.seed, s.state, s.until_prefer, s.stop_when_won, s.max_seconds
(1, 'start', 2, False, 60.0)
>>> explore_settings(LearningSpec(explore={"game_seeds": [4, 5]}), 0, 1.0, game_seed=5).game_seed
5
>>> game_seeds(LearningSpec(explore={"game_seeds": [4, 5]})), game_seeds(LearningSpec())
([4, 5], [0])
>>> explore_settings(LearningSpec(explore={"seed": 3}), 0, 1.0)
Traceback (most recent call last):
...
metabonk_gym.errors.MetabonkError: learning.yaml: explore: the bench sets seed, max_seconds, state and game_seed; unknown or set here: ['seed']
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
#: Seconds between two saves of a running phase's minutes.
SAVE_EVERY_S = 30.0
#: Keys the bench sets itself in each method's settings.
EXPLORE_SET_HERE = ("seed", "max_seconds", "state", "game_seed")
#: The bench's own key under `explore:`: the game seeds explored (default: game seed 0).
GAME_SEEDS_KEY = "game_seeds"
ROBUST_SET_HERE = ("total_steps",)


def _checked(section: str, given: dict[str, Any], known: set[str], set_here: tuple) -> None:
    bad = sorted(set(given) - known) + sorted(set(given) & set(set_here))
    if bad:
        raise MetabonkError(
            f"learning.yaml: {section}: the bench sets {', '.join(set_here[:-1])}"
            f"{' and ' if len(set_here) > 1 else ''}{set_here[-1]}; unknown or set here: {bad}"
        )


def game_seeds(spec: LearningSpec) -> list[int]:
    """The game seeds the Go-Explore method explores, the curriculum's first."""
    seeds = spec.explore.get(GAME_SEEDS_KEY, [0])
    if not isinstance(seeds, list) or not seeds or not all(type(g) is int for g in seeds):
        raise MetabonkError(f"learning.yaml: explore: {GAME_SEEDS_KEY} must be a list of ints")
    return list(seeds)


def explore_settings(
    spec: LearningSpec, seed: int, seconds: float, game_seed: int = 0
) -> ExploreSettings:
    """The explorer's settings of one seed: the spec's `explore:` keys (stopping at the first
    win unless they say otherwise), this seed, the spec's start, `game_seed` and `seconds` at
    most."""
    given = {k: v for k, v in spec.explore.items() if k != GAME_SEEDS_KEY}
    _checked("explore", given, {f.name for f in fields(ExploreSettings)}, EXPLORE_SET_HERE)
    values = {"stop_when_won": True, **given}
    values.update(seed=seed, max_seconds=seconds, state=spec.state, game_seed=game_seed)
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


def check_spec(spec: LearningSpec) -> None:
    """Refuse a spec whose method settings do not fit together, before anything runs.

    >>> check_spec(LearningSpec(explore={"game_seeds": [0, 1]}))
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.MetabonkError: learning.yaml: explore: game_seeds beyond the first are started on only by robustify: uniform_share; set it above 0
    """
    explore_settings(spec, 0, 1.0).check()
    robust = robust_settings(spec, 0)
    robust.check()
    if len(game_seeds(spec)) > 1 and robust.uniform_share <= 0:
        raise MetabonkError(
            f"learning.yaml: explore: {GAME_SEEDS_KEY} beyond the first are started on only by "
            "robustify: uniform_share; set it above 0"
        )


def _budget(path: Path) -> dict[str, Any]:
    """Minutes a seed has spent so far and what its explorations found (none: a fresh seed)."""
    if not path.is_file():
        return {"explore_minutes": 0.0, "robust_minutes": 0.0, "explored": {}}
    return dict(json.loads(path.read_text()))


def _save_budget(path: Path, budget: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(budget) + "\n")


class PhaseClock:
    """A phase's wall minutes, added to the seed's budget file as they pass (at most
    `SAVE_EVERY_S` behind), so a bench killed outright does not get them again on resume.

    Args:
        path: the seed's budget file.
        key: the phase's entry (explore_minutes, robust_minutes).
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = path, key
        self.base = float(_budget(path)[key])
        self.start = self.saved = time.monotonic()

    def tick(self, *_: Any) -> None:
        """Save the minutes so far when `SAVE_EVERY_S` have passed since the last save."""
        if time.monotonic() - self.saved >= SAVE_EVERY_S:
            self.save()

    def save(self, **more: Any) -> dict[str, Any]:
        """Write the minutes so far (and `more` entries) to the budget file; the budget."""
        budget = _budget(self.path)
        self.saved = time.monotonic()
        budget[self.key] = self.base + (self.saved - self.start) / 60
        budget.update(more)
        _save_budget(self.path, budget)
        return budget


def explore_dir(where: Path, seed: int, game_seed: int, first: bool) -> Path:
    """The archive folder of one training seed and game seed (the first game seed's is
    `explore-seedN`, the others' `explore-seedN-gG`)."""
    return where / (f"explore-seed{seed}" + ("" if first else f"-g{game_seed}"))


def _explore(
    env_id: str, where: Path, spec: LearningSpec, seed: int, minutes: float, budget_path: Path
) -> dict[str, Any]:
    """Explore each game seed in turn within the seed's share of `minutes` (an archive that is
    there is resumed); what each found is kept in the budget file."""
    for index, game_seed in enumerate(game_seeds(spec)):
        budget = _budget(budget_path)
        left = minutes * spec.explore_share - budget["explore_minutes"]
        if str(game_seed) in budget["explored"] or left <= 0:
            continue
        out = explore_dir(where, seed, game_seed, index == 0)
        clock = PhaseClock(budget_path, "explore_minutes")
        resume = (out / ARCHIVE_FILE).is_file()
        settings = explore_settings(spec, seed, left * 60, game_seed)
        result = run_explore(env_id, out, settings, resume=resume, progress=clock.tick)
        explored = dict(budget["explored"])
        if not result.interrupted:
            explored[str(game_seed)] = {"frames": result.frames, "won": result.won}
        clock.save(explored=explored)
        if result.interrupted:
            raise KeyboardInterrupt(f"{out}: exploring stopped; the archive is saved")
    return _budget(budget_path)


def _variants(where: Path, spec: LearningSpec, seed: int, budget: dict[str, Any]) -> list[Path]:
    """The other game seeds' archives the policy also starts on: those whose exploration won
    when the first one's did (the same goal), else none."""
    explored, seeds = budget["explored"], game_seeds(spec)
    first = explored.get(str(seeds[0]), {})
    if not first.get("won"):
        return []
    return [
        explore_dir(where, seed, g, False) for g in seeds[1:] if explored.get(str(g), {}).get("won")
    ]


def _robustify(
    where: Path, run_dir: Path, spec: LearningSpec, seed: int, minutes: float, budget_path: Path
) -> dict[str, Any]:
    """Robustify the first archive's best path (and start on the other game seeds' won paths)
    with the minutes the seed has left."""
    budget = _budget(budget_path)
    left = minutes - budget["explore_minutes"] - budget["robust_minutes"]
    if left <= 0:
        return budget
    clock = PhaseClock(budget_path, "robust_minutes")
    resume = RunDir(run_dir).is_run()
    out = explore_dir(where, seed, game_seeds(spec)[0], True)
    result = run_robustify(
        out,
        run_dir,
        robust_settings(spec, seed),
        resume=resume,
        callbacks=[wall_clock_stop(left, clock.tick)],
        also=_variants(where, spec, seed, budget),
    )
    budget = clock.save(
        env_steps=result.num_timesteps,
        demo_steps=result.demo_steps,
        demo_won=result.demo_won,
        reached_step=result.reached_step,
        fresh_seeds=result.fresh_seeds,
    )
    if result.interrupted:
        raise KeyboardInterrupt(f"{run_dir} stopped at step {result.num_timesteps}")
    return budget


def _start_reached(spec: LearningSpec, seed: int, budget: dict[str, Any]) -> str:
    """Where robustifying's episodes started at the end, in words.

    >>> _start_reached(LearningSpec(), 0, {"fresh_seeds": True})
    'fresh game seeds'
    >>> _start_reached(LearningSpec(), 0, {"reached_step": 40, "demo_steps": 105})
    'demo step 40 of 105'
    >>> _start_reached(LearningSpec(robustify={"uniform_share": 1.0}), 0, {})
    'anywhere on the paths (uniform starts)'
    """
    if robust_settings(spec, seed).uniform_share >= 1.0:
        return "anywhere on the paths (uniform starts)"
    if budget.get("fresh_seeds"):
        return "fresh game seeds"
    return f"demo step {budget.get('reached_step')} of {budget.get('demo_steps')}"


def explored_seed(
    env_id: str, where: Path, spec: LearningSpec, seed: int, minutes: float, train: bool, log: Log
) -> dict[str, Any]:
    """One seed of the Go-Explore method: explore, robustify (unless `train` is False: the
    seed's runs as they stand), then score the policy and the archive's replay."""
    out = explore_dir(where, seed, game_seeds(spec)[0], True)
    run_dir, budget_path = where / f"robust-seed{seed}", where / f"budget-seed{seed}.json"
    check_spec(spec)
    if train:
        _explore(env_id, where, spec, seed, minutes, budget_path)
        log(f"seed {seed}: explored; robustifying for the rest of {minutes:g} min")
        _robustify(where, run_dir, spec, seed, minutes, budget_path)
    elif not budget_path.is_file():
        raise MetabonkError(f"{run_dir} was not trained by this bench: run it without --no-train")
    budget = _budget(budget_path)
    if not RunDir(run_dir).is_run():
        raise MetabonkError(f"{run_dir}: no policy (the budget went to exploring); raise --minutes")
    replay = f"replay:{out / ARCHIVE_FILE}"
    explored = budget["explored"].get(str(game_seeds(spec)[0]), {})
    return {
        "seed": seed,
        "env_steps": int(budget.get("env_steps", 0)),
        "explore_frames": sum(int(e["frames"]) for e in budget["explored"].values()),
        "explore_won": bool(explored.get("won", False)),
        "variants": len(_variants(where, spec, seed, budget)),
        "demo_steps": budget.get("demo_steps"),
        "reached_step": budget.get("reached_step"),
        "start": _start_reached(spec, seed, budget),
        "explore_minutes": round(budget["explore_minutes"], 2),
        "wall_minutes": round(budget["explore_minutes"] + budget["robust_minutes"], 1),
        "value": score(evaluate_spec(env_id, str(run_dir), spec, where), spec.metric),
        "replay": score(evaluate_spec(env_id, replay, spec, where), spec.metric),
    }
