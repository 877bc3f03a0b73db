"""Learned agents that finish whole games: the `quest-full` and `arena` parts of
`metabonk bench learning`, each a DAgger distillation of the game's scripted teacher
(`metabonk_gym.training.dagger`) on several training seeds, scored on fixed evaluation seeds.

* `quest_full`: the whole BonkQuest from the `start` state (five rooms, keys, chests, the
  treasure), from pixels (each 8x8 cell of the RGB screen as a code of its exact picture,
  `PixelCells`, 2 frames, read by `EgoCellCNN`; no RAM numbers or VRAM ids in the observation); the score is the game's own win (`game_won`: the treasure taken), never the
  room-1 goal (`won` of the `room1` config); judged by `QUEST_TARGETS` (the median and the worst
  win rate over 3 training seeds, the training hours of each seed).
* `arena`: BonkArena from the RAM state vector (the env's `state` observation) plus the level-up
  menu's three options (`ram_features`), taught by the game folder's `Teacher`; judged by
  `ARENA_TARGETS` (mean survival / a random agent's on 30 fixed seeds and the share of games
  survived to 5:00, each the median of 3 training seeds; the training hours of each seed).

Every run directory resumes (`train_dagger`), and each seed's evaluation is cached in its run
directory (`eval.json`), so a re-run prints the figure at once. `size="small"` runs the same code
for seconds (tests).

>>> sorted(SIZES)
['full', 'small']
>>> median_worst([0.9, 0.7, 0.8])
(0.8, 0.7)
>>> _judged(QUEST_TARGETS, [0.84, 0.78, 0.8])
{'target': 'median >= 0.8, worst >= 0.6, <= 2 h a seed', 'passed': True}
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.rundir import RunDir
from metabonk_gym.target import Target, judge
from metabonk_gym.training.dagger import DaggerSettings, train_dagger
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.seeds import EVAL_SEED
from metabonk_gym.utils import Log, atomic_write_text

QUEST = "MetaBonk/BonkQuest-v0"
ARENA = "MetaBonk/BonkArena-v0"

#: Evaluation envs at once (`evaluate(n_envs=)`: one shared-memory vector engine, batched policy).
EVAL_ENVS = 4
#: BonkQuest evaluation episodes end unfinished after this many steps (the teacher wins in
#: ~190-290; a policy stuck in a room would otherwise wander to the env's 5,000).
QUEST_EVAL_STEPS = 800
#: BonkQuest's observation: every 8x8 cell of the full RGB screen as 2 bytes of its picture hash
#: (`PixelCells`), 2 frames, read by `EgoCellCNN` (which finds the player on the screen and reads
#: every cell relative to it). Computed from pixels alone (no RAM, no VRAM); a grey frame of one
#: pixel per cell merged pictures of equal brightness (see docs/training.md).
CELLS: dict[str, Any] = {
    "state": "start",
    "obs_type": "rgb",
    "downscale": 1,
    "frame_stack": 2,
    "wrappers": [{"name": "pixel_cells"}],
    "features": "ego-cells",
    "features_dim": 128,
}
#: The info variables of the player's cell (BonkQuest's rooms fill the 30x20 cell screen): the
#: labels `EgoCellCNN`'s locator learns from while the teacher's samples are recorded.
QUEST_POSITION = ["player_y", "player_x"]

#: BonkArena's observation: the state vector plus the level-up menu's three options (one-hot of
#: the 8 upgrades, `RamFeatures`): the teacher picks upgrades by them, and with random upgrades
#: even the scripted expert survives 5:00 in none of the 30 evaluation games (docs/training.md).
ARENA_MENU: dict[str, Any] = {
    "wrappers": [{"name": "ram_features", "one_hot": {"menu_options": 8}}]
}

#: The level-up menu is 3% of BonkArena's samples, yet its choices decide whether a game lasts
#: 5:00; weighing its samples 10x lifted held-out menu agreement from 0.68 to 0.87 (on the
#: last stop's DAgger data of another seed, docs/training.md).
ARENA_EMPHASIS: dict[str, float] = {"menu_open": 10.0}

#: Training time a seed may take (hours of the 2-core machine), a mark of both parts.
HOURS_TARGET = Target("<=", 2.0, "h", suffix=" a seed")
#: `quest_full`'s pass marks: the median and the worst seed's win rate, and `HOURS_TARGET`
#: (read by its check, its printed line and its figure record, `metabonk_gym.bench.learning`).
QUEST_TARGETS = (
    Target(">=", 0.8, prefix="median "),
    Target(">=", 0.6, prefix="worst "),
    HOURS_TARGET,
)
#: `arena`'s pass marks: the median seed's survival ratio and share of games survived to 5:00,
#: and `HOURS_TARGET`.
ARENA_TARGETS = (
    Target(">=", 2.0, "x", prefix="median "),
    Target(">=", 0.25, "%", scale=100, prefix="5:00 survived in ", suffix=" of games (median)"),
    HOURS_TARGET,
)


@dataclass(frozen=True)
class Size:
    """One size of a whole-game run: its DAgger schedule, env overrides and evaluation."""

    quest: DaggerSettings
    quest_overrides: Mapping[str, Any]
    arena: DaggerSettings
    arena_overrides: Mapping[str, Any]
    quest_eval_episodes: int = 50
    arena_eval_episodes: int = 30
    quest_eval_steps: int = QUEST_EVAL_STEPS
    eval_envs: int = EVAL_ENVS


SIZES: dict[str, Size] = {
    "full": Size(
        quest=DaggerSettings(
            teacher_episodes=40,
            rounds=8,
            episodes_per_round=16,
            noise=0.2,
            round_noise=0.05,
            beta=0.5,
            epochs_first=3,
            epochs_round=1,
            batch_size=64,
            max_steps=500,
            position=QUEST_POSITION,
        ),
        quest_overrides={**CELLS, "max_episode_steps": 1500},
        arena=DaggerSettings(
            teacher_episodes=16,
            rounds=8,
            episodes_per_round=4,
            noise=0.1,
            round_noise=0.02,
            epochs_first=20,
            epochs_round=5,
            emphasis=ARENA_EMPHASIS,
        ),
        arena_overrides={**ARENA_MENU, "net_arch": [512, 512]},
    ),
    "small": Size(
        quest=DaggerSettings(
            teacher_episodes=2,
            rounds=1,
            episodes_per_round=1,
            epochs_first=1,
            epochs_round=1,
            position=QUEST_POSITION,
        ),
        quest_overrides={**CELLS, "max_episode_steps": 40},
        arena=DaggerSettings(
            teacher_episodes=1,
            rounds=1,
            episodes_per_round=1,
            epochs_first=1,
            epochs_round=1,
            emphasis=ARENA_EMPHASIS,
        ),
        arena_overrides={**ARENA_MENU, "net_arch": [32, 32], "max_episode_steps": 40},
        quest_eval_episodes=2,
        arena_eval_episodes=2,
        quest_eval_steps=40,
        eval_envs=2,
    ),
}


def median_worst(values: list[float]) -> tuple[float, float]:
    """The median and the minimum of per-seed figures, rounded to 3 places."""
    return round(float(np.median(values)), 3), round(float(min(values)), 3)


def _max_hours(per_seed: list[dict[str, Any]]) -> float:
    """The longest training of the seeds, in hours (what `HOURS_TARGET` checks)."""
    return max(s["train_wall_s"] for s in per_seed) / 3600


def _judged(targets: tuple[Target, ...], values: list[float]) -> dict[str, Any]:
    """A result's `target` (the words) and `passed` (every target met by its value)."""
    verdict = judge(zip(targets, values, strict=True))
    return {"target": verdict["target"], "passed": verdict["met"]}


def _size(size: str) -> Size:
    if size not in SIZES:
        raise ConfigError(f"unknown size {size!r}; choose from {', '.join(SIZES)}")
    return SIZES[size]


def _train_seed(
    env_id: str,
    run_dir: Path,
    settings: DaggerSettings,
    overrides: Mapping[str, Any],
    seed: int,
    log: Log,
) -> dict[str, Any]:
    """Train (or resume, or find finished) one seed's DAgger run; its env steps and wall time."""
    run = RunDir(run_dir)
    state = run.read_state() if run.is_run() else {}
    finished = state.get("status") == "finished"
    if not finished or int(state.get("rounds_done", 0)) < settings.rounds + 1:
        train_dagger(
            env_id,
            run_dir,
            settings=settings,
            overrides={**overrides, "seed": seed},
            log=lambda line: log(f"seed {seed}: {line}"),
        )
    state = run.read_state()
    return {
        "env_steps": int(state["env_steps"]),
        "train_wall_s": float(state["wall_s"]),
        "rounds": int(state["rounds_done"]) - 1,
    }


def _cached_eval(run_dir: Path, key: str, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`make()`'s result, kept in `run_dir/eval.json` under `key` (a re-run reads it back)."""
    path = run_dir / "eval.json"
    cache: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    if key not in cache:
        cache[key] = make()
        atomic_write_text(path, json.dumps(cache, indent=2))
    result: dict[str, Any] = cache[key]
    return result


def quest_seed(out_dir: Path, seed: int, spec: Size, log: Log = print) -> dict[str, Any]:
    """Train (or resume) one seed of `quest_full` in `out_dir/quest-full/seedN`, then score its
    greedy policy by the game's own win (cached in the run directory's `eval.json`)."""
    run_dir = Path(out_dir) / "quest-full" / f"seed{seed}"
    episodes = spec.quest_eval_episodes
    trained = _train_seed(QUEST, run_dir, spec.quest, spec.quest_overrides, seed, log)
    started = time.monotonic()

    def score() -> dict[str, Any]:
        report = evaluate(
            QUEST,
            str(run_dir / "model.zip"),
            n_envs=spec.eval_envs,
            episodes=episodes,
            seed=EVAL_SEED,
            deterministic=True,
            goal="game",
            overrides={"max_episode_steps": spec.quest_eval_steps},
        )
        rooms = [float(e["variables"].get("rooms_visited", 0)) for e in report["episodes"]]
        return {
            "scored_goal": "game_won (the game's own win: the treasure taken)",
            "scoring": report.get("scoring"),
            "state": report["state"],
            "goal": report["goal"],
            "max_episode_steps": spec.quest_eval_steps,
            "game_win_rate": report["game_win_rate"],
            "mean_rooms_visited": float(np.mean(rooms)),
            "mean_length": report["mean_length"],
        }

    result = _cached_eval(run_dir, f"greedy-{episodes}-rounds{trained['rounds']}", score)
    log(
        f"quest-full seed {seed}: game win rate {result['game_win_rate']:.2f} on {episodes} "
        f"seeds, mean rooms visited {result['mean_rooms_visited']:.2f}, "
        f"{trained['env_steps']} env steps, {trained['train_wall_s'] / 60:.1f} min training"
    )
    return {"seed": seed, **trained, **result, "eval_s": round(time.monotonic() - started, 1)}


def quest_full(
    out_dir: Path,
    seeds: int = 3,
    size: str = "full",
    log: Log = print,
) -> dict[str, Any]:
    """DAgger from pixels on the whole BonkQuest, `seeds` training seeds, each scored by the game's
    own win (`game_won`) on the same fixed evaluation seeds with its greedy policy."""
    if seeds < 1:
        raise ConfigError(f"seeds must be >= 1, not {seeds}")
    spec = _size(size)
    episodes = spec.quest_eval_episodes
    per_seed = [quest_seed(out_dir, seed, spec, log) for seed in range(seeds)]
    rates = [s["game_win_rate"] for s in per_seed]
    median, worst = median_worst(rates)
    figures: dict[str, Any] = {
        "observation": "pixels: 8x8 cell picture codes of the RGB screen (pixel_cells), 2 frames",
        "method": "DAgger from the game's screen-only teacher",
        "scored_goal": "game_won",
        "eval_episodes": episodes,
        "eval_seeds": f"{EVAL_SEED}..{EVAL_SEED + episodes - 1}",
        "eval_max_steps": spec.quest_eval_steps,
        "seeds": per_seed,
        "game_win_rate_median": median,
        "game_win_rate_worst": worst,
        "env_steps_per_seed": [s["env_steps"] for s in per_seed],
        "train_minutes_per_seed": [round(s["train_wall_s"] / 60, 1) for s in per_seed],
        "settings": asdict(spec.quest),
        **_judged(QUEST_TARGETS, [median, worst, _max_hours(per_seed)]),
    }
    log(
        f"quest-full figure: game win rate median {median:.2f}, worst {worst:.2f} over {seeds} "
        f"seeds ({episodes} eval seeds each); env steps {figures['env_steps_per_seed']}; "
        f"training minutes {figures['train_minutes_per_seed']}; "
        f"target {figures['target']} {'met' if figures['passed'] else 'NOT met'}"
    )
    return figures


def _survival(report: Mapping[str, Any]) -> list[float]:
    return [float(e["variables"].get("time_s", e["length"])) for e in report["episodes"]]


def _arena_limit(spec: Size) -> dict[str, Any] | None:
    limit = spec.arena_overrides.get("max_episode_steps")
    return {"max_episode_steps": limit} if limit else None


def arena_random(out_dir: Path, spec: Size) -> list[float]:
    """A random agent's survival times on the arena's evaluation seeds (cached in
    `out_dir/eval.json`)."""
    episodes = spec.arena_eval_episodes
    Path(out_dir).mkdir(parents=True, exist_ok=True)

    def random_eval() -> dict[str, Any]:
        report = evaluate(
            ARENA,
            "random",
            n_envs=spec.eval_envs,
            episodes=episodes,
            seed=EVAL_SEED,
            goal="game",
            overrides=_arena_limit(spec),
        )
        return {"times": _survival(report)}

    times: list[float] = _cached_eval(Path(out_dir), f"random-{episodes}", random_eval)["times"]
    return times


def arena_seed(
    out_dir: Path, seed: int, spec: Size, random_mean: float, log: Log = print
) -> dict[str, Any]:
    """Train (or resume) one seed of `arena` in `out_dir/seedN`, then score its greedy policy
    (cached in the run directory's `eval.json`) against `random_mean` seconds."""
    run_dir = Path(out_dir) / f"seed{seed}"
    episodes = spec.arena_eval_episodes
    trained = _train_seed(ARENA, run_dir, spec.arena, spec.arena_overrides, seed, log)

    def score() -> dict[str, Any]:
        report = evaluate(
            ARENA,
            str(run_dir / "model.zip"),
            n_envs=spec.eval_envs,
            episodes=episodes,
            seed=EVAL_SEED,
            deterministic=True,
            goal="game",
            overrides=_arena_limit(spec),
        )
        return {"times": _survival(report), "game_win_rate": report["game_win_rate"]}

    result = _cached_eval(run_dir, f"greedy-{episodes}-rounds{trained['rounds']}", score)
    times = result["times"]
    ratio = float(np.mean(times)) / max(random_mean, 1e-9)
    log(
        f"arena seed {seed}: mean survival {np.mean(times):.1f} s vs random "
        f"{random_mean:.1f} s ({ratio:.2f}x), 5:00 survived in "
        f"{result['game_win_rate']:.0%} of {episodes} games, {trained['env_steps']} env "
        f"steps, {trained['train_wall_s'] / 60:.1f} min training"
    )
    return {
        "seed": seed,
        **trained,
        "mean_time_s": round(float(np.mean(times)), 1),
        "survival_ratio": round(ratio, 3),
        "survived_5min_share": result["game_win_rate"],
    }


def arena(
    out_dir: Path,
    seeds: int = 3,
    size: str = "full",
    log: Log = print,
) -> dict[str, Any]:
    """DAgger on BonkArena's state vector, `seeds` training seeds, each against a random agent on
    the same fixed seeds: survival ratio (means) and the share of games survived to 5:00."""
    if seeds < 1:
        raise ConfigError(f"seeds must be >= 1, not {seeds}")
    spec = _size(size)
    out_dir = Path(out_dir) / "arena-dagger"
    episodes = spec.arena_eval_episodes
    rand = arena_random(out_dir, spec)
    random_mean = float(np.mean(rand))
    per_seed = [arena_seed(out_dir, seed, spec, random_mean, log) for seed in range(seeds)]
    ratios = [s["survival_ratio"] for s in per_seed]
    shares = [s["survived_5min_share"] for s in per_seed]
    ratio_median, ratio_worst = median_worst(ratios)
    share_median, share_worst = median_worst(shares)
    figures: dict[str, Any] = {
        "observation": "the RAM state vector (obs_type state) + the menu's options, not pixels",
        "method": "DAgger from the game's Teacher (the scripted expert)",
        "eval_episodes": episodes,
        "random_mean_time_s": round(random_mean, 1),
        "seeds": per_seed,
        "survival_ratio_median": ratio_median,
        "survival_ratio_worst": ratio_worst,
        "survived_5min_share_median": share_median,
        "survived_5min_share_worst": share_worst,
        "env_steps_per_seed": [s["env_steps"] for s in per_seed],
        "train_minutes_per_seed": [round(s["train_wall_s"] / 60, 1) for s in per_seed],
        "settings": asdict(spec.arena),
        **_judged(ARENA_TARGETS, [ratio_median, share_median, _max_hours(per_seed)]),
    }
    log(
        f"arena figure: survival {ratio_median:.2f}x random median, {ratio_worst:.2f}x worst over "
        f"{seeds} seeds ({episodes} eval seeds); 5:00 survived in {share_median:.0%} median, "
        f"{share_worst:.0%} worst; env steps {figures['env_steps_per_seed']}; training minutes "
        f"{figures['train_minutes_per_seed']}; "
        f"target {figures['target']} {'met' if figures['passed'] else 'NOT met'}"
    )
    return figures
