"""`metabonk bench vector`: the shared-memory vector engine against gymnasium's `AsyncVectorEnv`
and SB3's `SubprocVecEnv` (thin typer layer over `metabonk_gym.bench.vector_speed`).

>>> from metabonk_gym.cli.bench import BENCHES
>>> BENCHES["vector"]
'vector:bench_vector'
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from metabonk_gym.cli.bench import console

from metabonk_gym.bench.figures import put_figures
from metabonk_gym.bench.vector_speed import figure_records, run
from metabonk_gym.utils import atomic_write_text


def bench_vector(
    counts: str = typer.Option("2,4,8,16", help="Env counts for the main-process CPU figure."),
    steps: int = typer.Option(300, help="Vector steps per measurement."),
    collect: bool = typer.Option(True, help="Also measure PPO's collection phase (SB3)."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures_file: Path | None = typer.Option(
        None, "--figures", help="Put the figures into this record file (docs/figures/vector.json)."
    ),
) -> None:
    """Main-process CPU per env step, N envs vs one plain env, and PPO collection steps/s."""
    try:
        sizes = [int(c) for c in counts.split(",") if c.strip()]
    except ValueError:
        raise typer.BadParameter(f"--counts takes numbers such as 2,4,8, not {counts!r}") from None
    figures = run(sizes, steps=steps, collect=collect)
    console.print_json(json.dumps(figures, default=float))
    if out is not None:
        atomic_write_text(out, json.dumps(figures, indent=2, default=float))
    if figures_file is not None:
        command = f"metabonk bench vector --counts {counts} --steps {steps}"
        put_figures(
            figures_file,
            figure_records(figures),
            command=command + " --no-collect" * (not collect),
            title="Vector envs",
        )


def register(app: typer.Typer) -> None:
    """Nothing to add to `app`: `bench vector` is registered from `metabonk_gym.cli.bench.BENCHES`."""
