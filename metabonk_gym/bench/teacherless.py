"""Learning without a teacher on any game folder: PPO from pixels on 3 seeds against random,
scored by what the folder's `learning.yaml` declares (the win rate, the steps survived, or a
variable's final value), so a game nobody here wrote is measured with data, not code.

The folder's `learning.yaml` names the start, the episodes, the step limit, the metric and the
target (`at-least` a value, or a `ratio` to random's); training takes the folder's own
`defaults.yaml`. Runs resume from their run directories; a wall-clock budget per seed stops
training (the model is saved, then evaluated). `metabonk bench teacherless ENV` runs it.

>>> spec = LearningSpec.from_mapping({"metric": "length", "target": {"ratio": 3}})
>>> spec.metric, spec.episodes, spec.passed(6.0, 2.0), spec.passed(5.0, 2.0)
('length', 20, True, False)
>>> score({"episodes": [{"variables": {"population": 40}}, {"variables": {"population": 60}}]},
...       "variable:population")
50.0
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.bench.learning_spec import (
    LearningSpec,
    evaluate_spec,
    load_spec,
    score,
    wall_clock_stop,
)
from metabonk_gym.bench.teacherless_explore import explored_seed
from metabonk_gym.errors import MetabonkError
from metabonk_gym.registration import short_id
from metabonk_gym.rundir import RunDir
from metabonk_gym.training.seeds import EVAL_SEED
from metabonk_gym.utils import Log, atomic_write_text

__all__ = ["LearningSpec", "figure_records", "load_spec", "score", "teacherless", "train_seed"]
#: The learners `teacherless` compares with random: PPO from pixels, or Go-Explore then the
#: backward curriculum (`metabonk_gym.bench.teacherless_explore`).
METHODS = ("ppo", "explore")


def train_seed(env_id: str, run_dir: Path, spec: LearningSpec, seed: int, minutes: float) -> Any:
    """PPO on one seed in `run_dir` (resumed when it holds a run), at most `minutes` of wall time."""
    from metabonk_gym.training.ppo import train_ppo

    overrides: dict[str, Any] = {"seed": seed}
    if spec.state is not None:
        overrides["state"] = spec.state
    if spec.total_steps is not None:
        overrides["total_steps"] = spec.total_steps
    stop = [wall_clock_stop(minutes)]
    if RunDir(run_dir).is_run():
        resumed = {k: v for k, v in overrides.items() if k == "total_steps"}
        return train_ppo(env_id, run_dir, resume=True, overrides=resumed, callbacks=stop)
    return train_ppo(env_id, run_dir, overrides=overrides, callbacks=stop, progress=True)


def _trained_seed(
    env_id: str, where: Path, spec: LearningSpec, seed: int, minutes: float, train: bool
) -> dict[str, Any]:
    """One seed: train it (unless `train` is False: its run as it stands), evaluate it; its
    training record (steps, wall minutes) is kept beside the run, so a re-score reads it."""
    run_dir, record_path = where / f"seed{seed}", where / f"seed{seed}.json"
    if train:
        start = time.monotonic()
        result = train_seed(env_id, run_dir, spec, seed, minutes)
        if result.interrupted:
            raise KeyboardInterrupt(f"{run_dir} stopped at step {result.num_timesteps}")
        record = {
            "seed": seed,
            "env_steps": result.num_timesteps,
            "wall_minutes": round((time.monotonic() - start) / 60, 1),
        }
        atomic_write_text(record_path, json.dumps(record) + "\n")
    elif record_path.is_file():
        record = json.loads(record_path.read_text())
    else:
        raise MetabonkError(f"{run_dir} was not trained by this bench: run it without --no-train")
    return {**record, "value": score(evaluate_spec(env_id, str(run_dir), spec, where), spec.metric)}


def teacherless(
    env_id: str,
    out_dir: Path,
    seeds: int = 3,
    minutes: float = 60.0,
    log: Log = print,
    train: bool = True,
    method: str = "ppo",
) -> dict[str, Any]:
    """Random and the spec's rules, then `method` on `seeds` seeds (each at most `minutes`;
    with `train=False` the runs as they stand), scored by the folder's spec; the figures are
    written to `out_dir/<game>/figures.json` (`figures-explore.json`) and returned."""
    if method not in METHODS:
        raise MetabonkError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    data, spec = load_spec(env_id)
    where = Path(out_dir) / data.name
    where.mkdir(parents=True, exist_ok=True)
    random_value = score(evaluate_spec(env_id, "random", spec, where), spec.metric)
    rules = {r: score(evaluate_spec(env_id, r, spec, where), spec.metric) for r in spec.rules}
    log(f"{data.name}: random {spec.metric} = {random_value:.3f}; rules {rules}")
    per_seed = []
    for seed in range(seeds):
        if method == "explore":
            per_seed.append(explored_seed(env_id, where, spec, seed, minutes, train, log))
        else:
            per_seed.append(_trained_seed(env_id, where, spec, seed, minutes, train))
        log(f"{data.name}: seed {seed}: {per_seed[-1]}")
    figures = _figures(env_id, spec, random_value, rules, per_seed, method)
    spent = max(s["wall_minutes"] for s in per_seed)
    figures["command"] = (
        f"metabonk bench teacherless {short_id(env_id)}"
        + (f" --method {method}" if method != "ppo" else "")
        + f" --seeds {seeds} --minutes {minutes if train else spent:g}"
    )
    name = "figures.json" if method == "ppo" else f"figures-{method}.json"
    atomic_write_text(where / name, json.dumps(figures, indent=2) + "\n")
    return figures


def _figures(
    env_id: str,
    spec: LearningSpec,
    random_value: float,
    rules: dict[str, float],
    per_seed: list[dict[str, Any]],
    method: str,
) -> dict[str, Any]:
    """The figures of one bench run: median and worst of the seeds, judged by the spec."""
    values = [s["value"] for s in per_seed]
    median = statistics.median(values)
    return {
        "env_id": short_id(env_id),
        "method": method,
        "metric": spec.metric,
        "state": spec.state,
        "eval_episodes": spec.episodes,
        "eval_seed": EVAL_SEED,
        "random": random_value,
        "rules": rules,
        "median": median,
        "worst": min(values),
        "seeds": per_seed,
        "target": spec.describe(),
        "worst_target": spec.describe(worst=True),
        "met": spec.passed(median, random_value),
        "worst_met": spec.passed(min(values), random_value, worst=True),
        "date": time.strftime("%Y-%m-%d"),
    }


def _fmt(value: float, metric: str) -> str:
    return f"{value:.2f}" if metric == "won" else f"{value:.1f}"


#: How a record names each method: (id suffix, the learner in words, its short name in text).
METHOD_WORDS = {
    "ppo": ("teacherless", "PPO from pixels", "PPO"),
    "explore": ("explore", "Go-Explore then a robustified pixel policy", "robust policy"),
}


def _explore_text(seeds: list[Mapping[str, Any]], metric: str) -> str:
    """The Go-Explore method's per-seed detail: the archive's replay, exploring, robustifying."""
    replay = " / ".join(_fmt(s["replay"], metric) for s in seeds)
    won = " / ".join("won" if s["explore_won"] else "not won" for s in seeds)
    frames = " / ".join(f"{s['explore_frames']:,}" for s in seeds)
    spent = " / ".join(_duration(s["explore_minutes"]) for s in seeds)
    starts = sorted({s.get("start", "") for s in seeds})
    where = " / ".join(s.get("start", "") for s in seeds) if len(starts) > 1 else starts[0]
    return (
        f"; the archives' best paths replayed {replay} ({won} in {frames} frames, {spent}"
        f" of exploring); robustifying's episodes started from {where} at the end"
    )


def _duration(minutes: float) -> str:
    """Minutes in words: seconds under one.

    >>> _duration(0.02), _duration(12.34)
    ('1 s', '12.3 min')
    """
    return f"{minutes * 60:.0f} s" if minutes < 1 else f"{minutes:.1f} min"


def figure_records(figures: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`teacherless`'s figures as one record (`docs/figures/public-games.json`,
    `docs/figures/learning.json`): the median and worst of the seeds beside random and the
    rules, the targets and whether both were met."""
    metric, random_value = figures["metric"], figures["random"]
    method = figures.get("method", "ppo")
    suffix, learner, short = METHOD_WORDS[method]
    name = short_id(figures["env_id"]).split("/")[-1].removesuffix("-v0")
    seeds = figures["seeds"]
    per_seed = " / ".join(_fmt(s["value"], metric) for s in seeds)
    rules = ", ".join(f"{rule} {_fmt(v, metric)}" for rule, v in figures.get("rules", {}).items())
    walls = " / ".join(f"{s['wall_minutes']:g}" for s in seeds)
    steps = " / ".join(f"{s['env_steps']:,}" for s in seeds)
    text = (
        f"{short} median {_fmt(figures['median'], metric)}, worst "
        f"{_fmt(figures['worst'], metric)} (seeds {per_seed}); random {_fmt(random_value, metric)}"
        + (f"; rules: {rules}" if rules else "")
        + (_explore_text(seeds, metric) if method == "explore" else "")
        + f"; {steps} PPO env steps in {walls} min a seed"
    )
    worst_target = figures.get("worst_target", figures["target"])
    target = figures["target"] + (
        f", worst {worst_target}" if worst_target != figures["target"] else ""
    )
    return [
        {
            "id": f"{name.lower()}-{suffix}",
            "name": f"{name} from `{figures['state']}`, {learner}, no teacher: {metric}",
            "value": round(float(figures["median"]), 3),
            "unit": "",
            "text": text,
            "target": target,
            "met": bool(figures["met"]) and bool(figures.get("worst_met", True)),
            "seeds": {"first": figures["eval_seed"], "count": figures["eval_episodes"]},
        }
    ]
