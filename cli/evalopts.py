"""The options of `metabonk eval` that `metabonk ladder`, `play` and `record` share, and the
printing of an evaluation's report.

Why one module: the same flag (`--max-steps`, `--deterministic`, `--goal`, `--agent-opt`,
`--server`) says the same thing in every command that evaluates or plays an agent; the
commands keep only what is theirs.

>>> sorted(GOAL_WORDS)
['config', 'game']
>>> report = {"episodes": [{"index": 0, "seed": 0, "return": 1.0, "length": 5, "won": True,
...           "variables": {}}], "mean_return": 1.0, "std_return": 0.0, "win_rate": 1.0,
...           "game_win_rate": 1.0, "scoring": {"won_means": "the game's own win"}}
>>> print_report(report, "eval random", "game")  # doctest: +ELLIPSIS
eval random...
mean return 1.000 ± 0.000, win rate 1.00
won scores --goal game: the game's own win; game win rate 1.00
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from metabonk_gym.cli.errors import plain_console
from rich.table import Table

from metabonk_gym.agents.ranking import read_ladder

console = plain_console()

#: What `--goal` may say, in words.
GOAL_WORDS: dict[str, str] = {
    "config": "the config's goal, e.g. BonkQuest's room1 goal: leave room 1; the same for "
    "every agent",
    "game": "the game's own win, game_won; the config's goal is dropped",
}


def goal_option(default: str) -> Any:
    """`--goal` with its default (`eval`: config, `ladder`: game)."""
    return typer.Option(
        default,
        "--goal",
        help="What `won` scores: " + ", or ".join(f"{k} ({v})" for k, v in GOAL_WORDS.items()),
    )


SEED_OPTION: Any = typer.Option(0, help="First reset seed (episode i is reset with SEED+i).")
MAX_STEPS_OPTION: Any = typer.Option(None, "--max-steps", help="Episode step limit.")
DETERMINISTIC_OPTION: Any = typer.Option(
    False,
    "--deterministic/--stochastic",
    help="Models: always take the most likely action, or sample (seeded per episode).",
)
AGENT_OPT_OPTION: Any = typer.Option(
    None, "--agent-opt", help="KEY=VALUE for the agent (think: model_path=M.gguf)."
)
SERVER_OPTION: Any = typer.Option(
    None, "--server", help="think: a model server's URL (see `metabonk serve-vlm`)."
)


def print_report(
    report: dict[str, Any],
    title: str,
    goal: str,
    out: Path | None = None,
    ladder: Path | None = None,
) -> None:
    """An evaluation's report as `eval` prints it: a row per episode, the means, what `won`
    scored, the videos kept, where the report went and the ladder it joined."""
    table = Table(title=title)
    survival = "mean_survival_time" in report  # Megabonk: game seconds survived
    columns = ["episode", "seed", "return", "length", "won"] + (["survival s"] if survival else [])
    for column in columns:
        table.add_column(column)
    for e in report["episodes"]:
        row = [str(e["index"]), str(e["seed"]), f"{e['return']:.2f}", str(e["length"])]
        row.append(str(e["won"]))
        if survival:
            row.append(f"{e['variables'].get('survival_time', 0.0):.1f}")
        table.add_row(*row)
    console.print(table)
    console.print(
        f"mean return {report['mean_return']:.3f} ± {report['std_return']:.3f}, "
        f"win rate {report['win_rate']:.2f}"
    )
    console.print(
        f"won scores --goal {goal}: {report['scoring']['won_means']}; "
        f"game win rate {report['game_win_rate']:.2f}"
    )
    if survival:
        console.print(f"mean survival {report['mean_survival_time']:.1f} game seconds")
    for label in ("best", "worst"):
        if label in report.get("videos", {}):
            console.print(f"{label} episode video: {report['videos'][label]}")
    if out is not None:
        console.print(f"report: {out}")
    if ladder is not None:
        print_ladder(ladder)


def print_ladder(path: Path) -> None:
    """A ladder file's entries (`eval --ladder`): rank, agent, state, episodes, win rate, mean
    return."""
    ranking = Table(title=f"ladder {path}")
    for column in ("rank", "agent", "state", "episodes", "win rate", "mean return"):
        ranking.add_column(column)
    for entry in read_ladder(path):
        ranking.add_row(
            "-" if entry.get("rank") is None else str(entry["rank"]),
            str(entry["agent"]),
            str(entry.get("state")),
            str(entry["episodes"]),
            f"{entry['win_rate']:.2f}",
            f"{entry['mean_return']:.2f}",
        )
    console.print(ranking)
