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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.errors import MetabonkError
from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.registration import env_traits, short_id
from metabonk_gym.rundir import RunDir
from metabonk_gym.training.seeds import EVAL_SEED
from metabonk_gym.utils import Log, atomic_write_text


@dataclass(frozen=True)
class LearningSpec:
    """What a game's teacher-free figure measures (its folder's `learning.yaml`).

    Args:
        metric: "won" (win rate), "length" (mean steps per episode: survival), or
            "variable:NAME" (mean final value of a game variable).
        state: the start state of training and evaluation (None: the defaults' own).
        episodes: evaluation episodes per agent, on seeds EVAL_SEED + i.
        max_steps: the episode step limit of evaluation (None: the config's).
        target: {"at-least": X} (the learned value) or {"ratio": R} (learned / random).
        total_steps: PPO env steps per seed (None: the folder's defaults.yaml).
        rules: the obvious rules measured beside random (agent specs such as `repeat:2`).
    """

    metric: str = "won"
    state: str | None = None
    episodes: int = 20
    max_steps: int | None = None
    target: Mapping[str, float] = field(default_factory=dict)
    total_steps: int | None = None
    rules: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LearningSpec:
        """The spec from `learning.yaml`'s mapping, checked."""
        unknown = set(data) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise MetabonkError(f"learning.yaml: unknown keys {sorted(unknown)}")
        values = dict(data)
        values["rules"] = tuple(str(rule) for rule in values.get("rules") or ())
        spec = cls(**values)
        if not (spec.metric in ("won", "length") or spec.metric.startswith("variable:")):
            raise MetabonkError(
                f"learning.yaml: metric must be won, length or variable:NAME, not {spec.metric!r}"
            )
        if len(spec.target) != 1 or next(iter(spec.target)) not in ("at-least", "ratio"):
            raise MetabonkError("learning.yaml: target must be {at-least: X} or {ratio: R}")
        return spec

    def passed(self, learned: float, random: float) -> bool:
        """Whether `learned` meets the target (beside `random`'s value)."""
        kind, value = next(iter(self.target.items()))
        if kind == "ratio":
            return learned >= value * random if random > 0 else learned > 0
        return learned >= value

    def describe(self) -> str:
        kind, value = next(iter(self.target.items()))
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


def _wall_clock_stop(minutes: float) -> Any:
    """An SB3 callback that ends `learn` once `minutes` have passed (the model is then saved)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class WallClockStop(BaseCallback):
        def _on_training_start(self) -> None:
            self.deadline = time.monotonic() + minutes * 60

        def _on_step(self) -> bool:
            return time.monotonic() < self.deadline

    return WallClockStop()


def train_seed(env_id: str, run_dir: Path, spec: LearningSpec, seed: int, minutes: float) -> Any:
    """PPO on one seed in `run_dir` (resumed when it holds a run), at most `minutes` of wall time."""
    from metabonk_gym.training.ppo import train_ppo

    overrides: dict[str, Any] = {"seed": seed}
    if spec.state is not None:
        overrides["state"] = spec.state
    if spec.total_steps is not None:
        overrides["total_steps"] = spec.total_steps
    stop = [_wall_clock_stop(minutes)]
    if RunDir(run_dir).is_run():
        resumed = {k: v for k, v in overrides.items() if k == "total_steps"}
        return train_ppo(env_id, run_dir, resume=True, overrides=resumed, callbacks=stop)
    return train_ppo(env_id, run_dir, overrides=overrides, callbacks=stop, progress=True)


def _evaluate(env_id: str, agent: str, spec: LearningSpec, where: Path) -> dict[str, Any]:
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
    return {**record, "value": score(_evaluate(env_id, str(run_dir), spec, where), spec.metric)}


def teacherless(
    env_id: str,
    out_dir: Path,
    seeds: int = 3,
    minutes: float = 60.0,
    log: Log = print,
    train: bool = True,
) -> dict[str, Any]:
    """Random and the spec's rules, then PPO on `seeds` seeds (each at most `minutes`; with
    `train=False` the runs as they stand), scored by the folder's spec; the figures are written
    to `out_dir/<game>/figures.json` and returned."""
    data, spec = load_spec(env_id)
    where = Path(out_dir) / data.name
    where.mkdir(parents=True, exist_ok=True)
    random_value = score(_evaluate(env_id, "random", spec, where), spec.metric)
    rules = {rule: score(_evaluate(env_id, rule, spec, where), spec.metric) for rule in spec.rules}
    log(f"{data.name}: random {spec.metric} = {random_value:.3f}; rules {rules}")
    per_seed = []
    for seed in range(seeds):
        per_seed.append(_trained_seed(env_id, where, spec, seed, minutes, train))
        log(f"{data.name}: seed {seed}: {per_seed[-1]}")
    values = [s["value"] for s in per_seed]
    figures = {
        "env_id": short_id(env_id),
        "metric": spec.metric,
        "state": spec.state,
        "eval_episodes": spec.episodes,
        "eval_seed": EVAL_SEED,
        "random": random_value,
        "rules": rules,
        "median": statistics.median(values),
        "worst": min(values),
        "seeds": per_seed,
        "target": spec.describe(),
        "met": spec.passed(statistics.median(values), random_value),
        "worst_met": spec.passed(min(values), random_value),
        "command": f"metabonk bench teacherless {short_id(env_id)} --seeds {seeds} --minutes "
        f"{minutes if train else max(s['wall_minutes'] for s in per_seed):g}",
        "date": time.strftime("%Y-%m-%d"),
    }
    atomic_write_text(where / "figures.json", json.dumps(figures, indent=2) + "\n")
    return figures


def _fmt(value: float, metric: str) -> str:
    return f"{value:.2f}" if metric == "won" else f"{value:.1f}"


def figure_records(figures: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`teacherless`'s figures as one record for `docs/figures/public-games.json`: the median
    and worst of the seeds beside random and the rules, the target and whether it was met."""
    metric, random_value = figures["metric"], figures["random"]
    name = short_id(figures["env_id"]).split("/")[-1].removesuffix("-v0")
    seeds = figures["seeds"]
    per_seed = " / ".join(_fmt(s["value"], metric) for s in seeds)
    rules = ", ".join(f"{rule} {_fmt(v, metric)}" for rule, v in figures.get("rules", {}).items())
    walls = " / ".join(f"{s['wall_minutes']:g}" for s in seeds)
    steps = " / ".join(f"{s['env_steps']:,}" for s in seeds)
    text = (
        f"PPO median {_fmt(figures['median'], metric)}, worst {_fmt(figures['worst'], metric)} "
        f"(seeds {per_seed}); random {_fmt(random_value, metric)}"
        + (f"; rules: {rules}" if rules else "")
        + f"; {steps} env steps in {walls} min a seed"
    )
    return [
        {
            "id": f"{name.lower()}-teacherless",
            "name": f"{name} from `{figures['state']}`, PPO from pixels, no teacher: {metric}",
            "value": round(float(figures["median"]), 3),
            "unit": "",
            "text": text,
            "target": figures["target"],
            "met": bool(figures["met"]),
            "seeds": {"first": figures["eval_seed"], "count": figures["eval_episodes"]},
        }
    ]
