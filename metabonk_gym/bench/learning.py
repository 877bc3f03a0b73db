"""`metabonk bench learning --figures FILE`: each part's result as figure records
(`docs/figures/learning.json`), judged by the part's pass mark declared once beside its check
(`metabonk_gym.agents.proof`, `metabonk_gym.agents.whole_games`).

A part's record carries its headline value (the worst or the median of the training seeds where
there are several, as the target says), the detail per seed in `text`, and the command that
repeats it (`part_command`). A `--small` run is marked by a note: the same code, not the figure.

>>> r = part_records("megabonk", {"survival_ratio": 1.2, "ppo_mean_survival_s": 60.0,
...     "random_mean_survival_s": 50.0, "ppo_survival_s": [70.0, 50.0],
...     "random_survival_s": [50.0, 65.0], "env_steps": 300000})
>>> r[0]["id"], r[0]["value"], r[0]["target"], r[0]["met"]
('megabonk-ppo', 1.2, '> 1x survival', True)
>>> part_command("arena", out=Path("runs/a"), steps=None, seeds=2, small=True)
'metabonk bench learning arena --out runs/a --seeds 2 --small'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.agents.proof import (
    ARENA_SURVIVAL_TARGET,
    BC_TARGET,
    FINETUNE_TARGET,
    MEGABONK_TARGET,
    PPO_ROOM1_TARGET,
    SEEDED_PARTS,
)

#: `metabonk bench learning`'s default `--out` and `--seeds` (left out of a record's command).
DEFAULT_OUT = Path("runs/proof")
DEFAULT_SEEDS = 3
#: The record file's heading when `--figures` creates it.
TITLE = "Proof that it learns"
#: The note on every record of a `--small` run.
SMALL_NOTE = "--small: a tiny run of the same code (tests), not the benchmark's figure"

Record = dict[str, Any]

#: Go-Explore parts: the env each runs `bench teacherless --method explore` on (its game
#: folder's learning.yaml declares the figure), and their default budget a seed in minutes.
EXPLORE_PARTS = {
    "explore-quest": "MetaBonk/BonkQuest-v0",
    "explore-arena": "MetaBonk/BonkArena-v0",
}
EXPLORE_MINUTES = 120.0


def part_command(part: str, *, out: Path, steps: int | None, seeds: int, small: bool) -> str:
    """The command line that repeats one part with the options that change it."""
    words = ["metabonk bench learning", part]
    words += [f"--out {out}"] * (Path(out) != DEFAULT_OUT)
    words += [f"--steps {steps}"] * (steps is not None and part not in ("quest-full", "arena"))
    seeded = part in SEEDED_PARTS
    words += [f"--seeds {seeds}"] * (seeded and seeds != DEFAULT_SEEDS)
    words += ["--small"] * (small and part in ("quest-full", "arena"))
    return " ".join(words)


def explore_command(part: str, *, out: Path, seeds: int, minutes: float) -> str:
    """The command line that repeats a Go-Explore part.

    >>> explore_command("explore-quest", out=DEFAULT_OUT, seeds=3, minutes=120.0)
    'metabonk bench learning explore-quest'
    >>> explore_command("explore-arena", out=Path("r"), seeds=1, minutes=5.0)
    'metabonk bench learning explore-arena --out r --seeds 1 --minutes 5'
    """
    words = ["metabonk bench learning", part]
    words += [f"--out {out}"] * (Path(out) != DEFAULT_OUT)
    words += [f"--seeds {seeds}"] * (seeds != DEFAULT_SEEDS)
    words += [f"--minutes {minutes:g}"] * (minutes != EXPLORE_MINUTES)
    return " ".join(words)


def part_seeds(part: str, seeds: int) -> list[int] | None:
    """The training seeds behind a part's records (None: one run, the config's seed)."""
    return list(range(seeds)) if part in SEEDED_PARTS else None


def _per_seed(values: list[float], fmt: str) -> str:
    return " / ".join(format(v, fmt) for v in values)


def _ppo_room1(r: Mapping[str, Any]) -> list[Record]:
    reached = r.get("steps_to_win_rate_0.8")
    at = f"at {reached / 1000:.1f}k steps" if reached is not None else "not reached"
    episodes = r.get("eval_episodes", 50)
    return [
        {
            "id": "ppo-room1",
            "name": "PPO from scratch, BonkQuest room1 (take the key, leave the room): eval win "
            f"rate on {episodes} seeds",
            "value": r["eval_win_rate"],
            "unit": "",
            "text": f"eval win rate {r['eval_win_rate']:.2f} on {episodes} seeds; rolling win "
            f"rate {PPO_ROOM1_TARGET.value:g} {at}; {r['env_steps']:,} env steps",
            "target": str(PPO_ROOM1_TARGET),
            "met": bool(r["passed"]),
            "headline": "PPO learns BonkQuest room 1: win rate",
            "short": f"{r['eval_win_rate']:.2f}",
        }
    ]


def _bc_room1(r: Mapping[str, Any]) -> list[Record]:
    worst, median = r["bc_to_expert_return_worst"], r["bc_to_expert_return_median"]
    ratios = [s["bc_to_expert_return"] for s in r["seeds"]]
    rows: list[Record] = [
        {
            "id": "bc-room1",
            "name": "BC from scripted-expert episodes, room1: return vs the expert's mean",
            "value": worst,
            "unit": "x",
            "text": f"median {median:.2f}x, worst {worst:.2f}x ({_per_seed(ratios, '.2f')})",
            **BC_TARGET.record(worst),
            "short": f"{worst:.2f}x",
        }
    ]
    if "bc_ppo_win_rate" in r:
        rows.append(
            {
                "id": "bc-ppo",
                "name": f"BC + PPO vs PPO from scratch, {r['env_steps'] / 1000:g}k steps each: "
                "win rate",
                "value": r["bc_ppo_win_rate"],
                "unit": "",
                "text": f"{r['bc_ppo_win_rate']:.2f} vs {r['scratch_win_rate']:.2f}",
                "target": FINETUNE_TARGET,
                "met": bool(r["passed_finetune"]),
                "seeds": None,
            }
        )
    return rows


def _arena_ppo(part: str, r: Mapping[str, Any]) -> list[Record]:
    ratio = float(r["survival_ratio"])
    start = f"a BC clone of {r['expert_episodes']} expert episodes" if part == "arena-bc" else ""
    return [
        {
            "id": part,
            "name": f"PPO on BonkArena (RAM state vector, MLP){' from ' + start if start else ''}"
            f", {r['env_steps'] / 1e6:g}M steps: mean survival vs random, "
            f"{r['eval_episodes']} seeds",
            "value": round(ratio, 3),
            "unit": "x",
            "text": f"{ratio:.2f}x ({r['ppo_mean_time_s']:.1f} s vs {r['random_mean_time_s']:.1f}"
            f" s; medians {r['median_ratio']:.2f}x), longer in {r['longer_than_random']} of "
            f"{r['eval_episodes']} games",
            **ARENA_SURVIVAL_TARGET.record(ratio),
        }
    ]


def _quest_full(r: Mapping[str, Any]) -> list[Record]:
    median, worst = r["game_win_rate_median"], r["game_win_rate_worst"]
    rates = [s["game_win_rate"] for s in r["seeds"]]
    rooms = [s["mean_rooms_visited"] for s in r["seeds"]]
    minutes = r["train_minutes_per_seed"]
    return [
        {
            "id": "quest-full",
            "name": "whole BonkQuest from `start`, learned from pixels (DAgger from the "
            "screen-only teacher, `EgoCellCNN`): the game's win rate on "
            f"{r['eval_episodes']} seeds",
            "value": median,
            "unit": "",
            "text": f"median {median:.2f}, worst {worst:.2f} ({_per_seed(rates, '.2f')}); mean "
            f"rooms visited {min(rooms):.2f}-{max(rooms):.2f} of 5; "
            f"{_per_seed(r['env_steps_per_seed'], ',')} env steps, "
            f"{_per_seed(minutes, 'g')} min a seed",
            "target": r["target"],
            "met": bool(r["passed"]),
            "headline": "whole BonkQuest learned from pixels: win rate",
            "short": f"{median:.2f} median, {worst:.2f} worst",
        }
    ]


def _arena_dagger(r: Mapping[str, Any]) -> list[Record]:
    median, worst = r["survival_ratio_median"], r["survival_ratio_worst"]
    ratios = [s["survival_ratio"] for s in r["seeds"]]
    share, share_worst = r["survived_5min_share_median"], r["survived_5min_share_worst"]
    return [
        {
            "id": "arena-dagger",
            "name": "BonkArena learned (state vector + the level-up menu's options, DAgger from "
            f"the scripted expert): mean survival vs random, {r['eval_episodes']} seeds",
            "value": median,
            "unit": "x",
            "text": f"median {median:.2f}x random, worst {worst:.2f}x ({_per_seed(ratios, '.2f')}"
            f"; random {r['random_mean_time_s']:.1f} s); the full 5:00 survived in {share:.0%} "
            f"of games (worst {share_worst:.0%}); {_per_seed(r['env_steps_per_seed'], ',')} env"
            f" steps, {_per_seed(r['train_minutes_per_seed'], 'g')} min a seed",
            "target": r["target"],
            "met": bool(r["passed"]),
            "headline": "BonkArena learned: survival vs random",
            "short": f"{median:.2f}x median, {worst:.2f}x worst",
        }
    ]


def _megabonk(r: Mapping[str, Any]) -> list[Record]:
    ratio = float(r["survival_ratio"])
    ppo, rand = r["ppo_survival_s"], r["random_survival_s"]
    longer = sum(p > q for p, q in zip(ppo, rand, strict=False))
    return [
        {
            "id": "megabonk-ppo",
            "name": "PPO on Megabonk (`bonklink-sim --lockstep`, state vector), "
            f"{r['env_steps'] / 1000:g}k steps: mean survival vs random",
            "value": round(ratio, 3),
            "unit": "x",
            "text": f"{r['ppo_mean_survival_s']:.1f} s vs {r['random_mean_survival_s']:.1f} s "
            f"({ratio:.2f}x), longer in {longer} of {len(ppo)} paired games",
            **MEGABONK_TARGET.record(ratio),
        }
    ]


_RECORDS: dict[str, Callable[[Mapping[str, Any]], list[Record]]] = {
    "ppo-room1": _ppo_room1,
    "bc-room1": _bc_room1,
    "arena-ppo": lambda r: _arena_ppo("arena-ppo", r),
    "arena-bc": lambda r: _arena_ppo("arena-bc", r),
    "quest-full": _quest_full,
    "arena": _arena_dagger,
    "megabonk": _megabonk,
}


def part_records(part: str, result: Mapping[str, Any], *, small: bool = False) -> list[Record]:
    """One part's result (what `metabonk_gym.agents.proof.PARTS[part]` returned) as records."""
    rows = _RECORDS[part](result)
    return [row | {"note": SMALL_NOTE} for row in rows] if small else rows
