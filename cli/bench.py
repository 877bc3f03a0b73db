"""`metabonk bench ...`: every benchmark of the suite, printed as ratios against baselines.

>>> "env" in {command.name for command in bench_app.registered_commands}
True
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from metabonk_gym.cli.errors import plain_console
from rich.table import Table

from metabonk_gym.bench.env_speed import run as run_env_speed
from metabonk_gym.utils import atomic_write_text

bench_app = typer.Typer(
    help="Benchmarks: figures as ratios against a baseline run in the same process.",
    no_args_is_help=True,
)
console = plain_console()


def _print(title: str, result: dict, out: Path | None) -> None:
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, f"{value:,.3f}" if isinstance(value, float) else str(value))
    console.print(table)
    if out is not None:
        atomic_write_text(out, json.dumps(result, indent=2))


@bench_app.command("env")
def bench_env(
    env_id: str = typer.Argument("MetaBonk/BonkQuest-v0", help="Env id to measure."),
    steps: int = typer.Option(1500, help="Env steps per round."),
    rounds: int = typer.Option(3, help="Alternating raw/env rounds (medians are reported)."),
    vector: bool = typer.Option(True, help="Also measure 1 vs 2 subprocess envs."),
    retro_env: bool = typer.Option(True, help="Also measure stable-retro's RetroEnv."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    """Env frame rate vs the raw mGBA core, stable-retro's RetroEnv, and 2 vectorised envs."""
    _print(
        f"metabonk bench env {env_id}",
        run_env_speed(env_id, steps=steps, rounds=rounds, vector=vector, retro_env=retro_env),
        out,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
