"""The ladder's format: one entry per (env, agent) evaluation, ranked within each env.

What: `ladder_entry(report)` turns an `evaluate` report into a ladder entry (win rate with a 95%
Wilson interval, mean return, steps to a win, videos, think and replay notes), `rank` orders the
entries env by env, and `update_ladder(path, report)` adds an evaluation to a ladder file (what
`metabonk eval --ladder FILE.json` does); `read_ladder` reads a ladder file of either format:
this one (`{"format": 1, "cells": [...]}`, also `metabonk ladder`'s `ladder.json`) or the older
list of `eval --ladder` entries (`{"entries": [...]}`), converted. Why: one format for both
commands, so a ladder file reads the same whoever wrote it.

>>> [round(x, 3) for x in wilson(8, 10)]
[0.49, 0.943]
>>> old = {"agent": "random", "env_id": "E", "state": "s", "seed": 0, "episodes": 4,
...        "win_rate": 0.5, "mean_return": 1.0, "std_return": 0.5}
>>> entry = from_old_entry(old)
>>> entry["wins"], entry["seeds"], [round(x, 2) for x in entry["win_ci95"]]
(2, [0, 1, 2, 3], [0.15, 0.85])
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.training.errors import ConfigError
from metabonk_gym.utils import atomic_write_text

#: The `format` of a ladder file.
LADDER_FORMAT = 1

#: z of a two-sided 95% interval.
Z95 = 1.959963984540054


def wilson(wins: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a win rate (95% by default): honest at 0/n and n/n, where
    the normal approximation collapses to a point.

    >>> wilson(0, 3)[0], round(wilson(0, 3)[1], 3), wilson(3, 3)[1]
    (0.0, 0.561, 1.0)
    """
    if n <= 0:
        return (0.0, 1.0)
    p = wins / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if wins <= 0 else max(0.0, centre - half)
    high = 1.0 if wins >= n else min(1.0, centre + half)
    return (low, high)


def agent_key(spec: str) -> str:
    """What an agent spec names, for telling agents apart: a path that exists (a model zip, a
    run directory, the model of `think:PATH`) by its resolved path, so `./runs/x`, `runs/x/`
    and `/home/me/runs/x` are one agent; anything else as written.

    >>> agent_key("random"), agent_key("think:oracle")
    ('random', 'think:oracle')
    """
    prefix, rest = ("think:", spec[6:]) if spec.startswith("think:") else ("", spec)
    path = Path(rest).expanduser()
    if rest and "://" not in rest and path.exists():
        return prefix + str(path.resolve())
    return spec


def _relative(path: str, out_dir: Path) -> str:
    """A video's path relative to the ladder's folder (so a copied folder keeps its links), or
    absolute when it lies elsewhere."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(out_dir.resolve()).as_posix()
    except ValueError:
        return str(resolved)


def ladder_entry(report: Mapping[str, Any], out_dir: Path) -> dict[str, Any]:
    """An evaluation's line of the ladder from its `evaluate` report (video paths relative to
    the ladder's folder `out_dir`)."""
    episodes = list(report["episodes"])
    wins = sum(bool(e["won"]) for e in episodes)
    n = len(episodes)
    low, high = wilson(wins, n)
    won_lengths = [int(e["length"]) for e in episodes if e["won"]]
    videos: dict[str, Any] = {}
    for label in ("best", "worst"):
        path = (report.get("videos") or {}).get(label)
        if path:
            videos[label] = _relative(path, out_dir)
            videos[f"{label}_episode"] = report["videos"].get(f"{label}_episode")
    run = dict(report.get("run") or {})
    return {
        "env_id": report["env_id"],
        "agent": report["agent"],
        "kind": run.get("kind"),
        "run": run,
        "episodes": n,
        "wins": wins,
        "win_rate": wins / n if n else 0.0,
        "win_ci95": [low, high],
        "game_win_rate": float(report.get("game_win_rate", 0.0)),
        "mean_return": float(report["mean_return"]),
        "std_return": float(report["std_return"]),
        "steps_to_win": (sum(won_lengths) / len(won_lengths)) if won_lengths else None,
        "mean_length": float(report["mean_length"]),
        "state": report.get("state"),
        "scoring": report.get("scoring"),
        "deterministic": report.get("deterministic"),
        "videos": videos,
        "think": report.get("think"),
        **({"replay": report["replay"]} if report.get("replay") else {}),
        "seeds": [e["seed"] for e in episodes],
        "episode_results": [
            {k: e[k] for k in ("seed", "return", "length", "won", "game_won")} for e in episodes
        ],
    }


def never_answered(cell: Mapping[str, Any]) -> str | None:
    """Why a think cell is not ranked: its strategist was asked and never answered (every call
    fell back, or was still pending at the episode's end), so what played was the follower on
    fallback directives, not the agent named. None for any other cell.

    >>> never_answered({"think": {"calls": 4, "answered": 0, "dropped": 1,
    ...                           "fallback_reasons": {"timeout": 4}}})
    'the strategist never answered (4 calls fell back: timeout; 1 unanswered at an episode end)'
    >>> never_answered({"think": {"calls": 4, "answered": 1, "dropped": 0}}) is None
    True
    """
    think = cell.get("think")
    if (
        not isinstance(think, Mapping)
        or think.get("answered", 1)
        or not (think.get("calls") or think.get("dropped"))
    ):
        return None
    reasons = ", ".join(sorted(think.get("fallback_reasons") or {}))
    parts = []
    if think.get("calls"):
        parts.append(f"{think['calls']} calls fell back{': ' + reasons if reasons else ''}")
    if think.get("dropped"):
        parts.append(f"{think['dropped']} unanswered at an episode end")
    return f"the strategist never answered ({'; '.join(parts)})"


def rank(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cells in order, env by env (as given), best first: win rate, then the interval's low
    end, then mean return; each gets its `rank` within its env. A cell whose strategist never
    answered (`never_answered`) is not ranked: `rank` None and a `note`, after the others."""
    envs = list(dict.fromkeys(c["env_id"] for c in cells))
    out = []
    for env_id in envs:
        mine = [c for c in cells if c["env_id"] == env_id]
        mine.sort(key=lambda c: (-c["win_rate"], -c["win_ci95"][0], -c["mean_return"]))
        ranked = [c for c in mine if never_answered(c) is None]
        for position, cell in enumerate(ranked, start=1):
            cell["rank"] = position
        unranked = [c for c in mine if never_answered(c) is not None]
        for cell in unranked:
            cell["rank"] = None
            cell["note"] = never_answered(cell)
        out += ranked + unranked
    return out


def from_old_entry(old: Mapping[str, Any]) -> dict[str, Any]:
    """An entry of an older `eval --ladder` file (`{"entries": [...]}`) as a ladder entry: its
    wins and interval from the win rate and episode count, its seeds from the first seed."""
    n = int(old.get("episodes") or 0)
    wins = round(float(old["win_rate"]) * n)
    seed = int(old.get("seed") or 0)
    return {
        "env_id": old.get("env_id"),
        "agent": old.get("agent"),
        "kind": None,
        "episodes": n,
        "wins": wins,
        "win_rate": float(old["win_rate"]),
        "win_ci95": list(wilson(wins, n)),
        "mean_return": float(old["mean_return"]),
        "std_return": float(old.get("std_return") or 0.0),
        "steps_to_win": None,
        "mean_length": None,
        "state": old.get("state"),
        "reward": old.get("reward"),
        "videos": {},
        "seeds": [seed + i for i in range(n)],
        "created": old.get("created"),
    }


def load_ladder(path: str | Path) -> dict[str, Any]:
    """A ladder file as this format (an older `{"entries": [...]}` file converted and ranked);
    `ConfigError` for a file that is no ladder."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        if "cells" in data:
            return data
        if "entries" in data:
            cells = [from_old_entry(e) for e in data["entries"]]
            return {"format": LADDER_FORMAT, "cells": rank(cells)}
        raise KeyError("neither cells nor entries")
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError, ValueError) as exc:
        raise ConfigError(
            f"ladder file {path} is not a metabonk ladder ({exc}); choose another file"
        ) from exc


def read_ladder(path: str | Path) -> list[dict[str, Any]]:
    """The ranked entries of a ladder file (either format)."""
    cells: list[dict[str, Any]] = load_ladder(path)["cells"]
    return cells


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two entries are one evaluation (the same agent, env, start, reward and seeds):
    the newer replaces the older."""
    keys = ("env_id", "state", "reward", "seeds")
    return agent_key(str(a["agent"])) == agent_key(str(b["agent"])) and all(
        a.get(k) == b.get(k) for k in keys
    )


def update_ladder(path: Path, report: Mapping[str, Any]) -> int | None:
    """Add (or replace) this evaluation in the ladder file `path` (made if missing; an older
    file is rewritten in this format); returns its rank within its env (None: not ranked)."""
    cells = read_ladder(path) if path.exists() else []
    reward = report.get("reward")
    entry = {
        **ladder_entry(report, path.parent),
        "reward": reward if isinstance(reward, str) else "custom",
        "created": report.get("created"),
    }
    cells = rank([c for c in cells if not _same(c, entry)] + [entry])
    ladder = {
        "format": LADDER_FORMAT,
        "envs": list(dict.fromkeys(c["env_id"] for c in cells)),
        "agents": list(dict.fromkeys(c["agent"] for c in cells)),
        "cells": cells,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    atomic_write_text(path, json.dumps(ladder, indent=2, default=str))
    rank_of: int | None = entry["rank"]
    return rank_of
