"""`metabonk bench ...`: every benchmark of the suite, printed as ratios against baselines.

`BENCHES` is the one table of the bench commands: each name maps to the function behind it
(kept beside its area's other commands), and `register` adds them all to `bench_app`.

>>> BENCHES["env"], BENCHES["vector"]
('bench:bench_env', 'vector:bench_vector')
>>> import typer
>>> register(typer.Typer())
>>> [c.name for c in bench_app.registered_commands] == list(BENCHES)
True
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import typer
from metabonk_gym.cli.errors import plain_console
from rich.table import Table

from metabonk_gym.bench import report
from metabonk_gym.bench.env_speed import ENV_VS_RAW_TARGET as ENV_VS_RAW_TARGET
from metabonk_gym.bench.env_speed import figure_records as env_figures
from metabonk_gym.bench.env_speed import run as run_env_speed
from metabonk_gym.bench.figures import put_figures
from metabonk_gym.utils import atomic_write_text

bench_app = typer.Typer(
    help="Benchmarks: figures as ratios against a baseline run in the same process.",
    no_args_is_help=True,
)
console = plain_console()
#: Every `metabonk bench` command, in the order `metabonk bench --help` lists them: its name and
#: the function behind it, "module:function" of a module under `metabonk_gym.cli`.
BENCHES: dict[str, str] = {
    "env": "bench:bench_env",
    "report": "bench:bench_report",
    "learning": "train:bench_learning",
    "teacherless": "train:bench_teacherless",
    "tiles": "observe:bench_tiles",
    "predictors": "observe:bench_predictors",
    "think": "think:bench_think",
    "serve": "think:bench_serve",
    "think-model": "finetune:bench_think_model",
    "think-play": "finetune:bench_think_play",
    "bonklink": "bonklink:bench_bonklink",
    "skyemu": "skyemu:bench_skyemu",
    "distributed": "tune:bench_distributed",
    "vector": "vector:bench_vector",
    "memory": "memory:bench_memory",
    "video": "video:bench_video",
    "world-model": "world:bench_world_model",
    "advice": "advice:bench_advice",
    "train-wrappers": "advice:bench_train_wrappers",
    "watch": "watch:bench_watch",
    "integrate": "integrate:bench_integrate",
    "explore": "explore:bench_explore",
}


def _print(title: str, result: dict, out: Path | None) -> None:
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, f"{value:,.3f}" if isinstance(value, float) else str(value))
    console.print(table)
    if out is not None:
        atomic_write_text(out, json.dumps(result, indent=2))


def bench_env(
    env_id: str = typer.Argument("MetaBonk/BonkQuest-v0", help="Env id to measure."),
    steps: int = typer.Option(1500, help="Env steps per round."),
    rounds: int = typer.Option(3, help="Alternating raw/env rounds (medians are reported)."),
    vector: bool = typer.Option(True, help="Also measure 1 vs 2 subprocess envs."),
    retro_env: bool = typer.Option(True, help="Also measure stable-retro's RetroEnv."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Write the figure record here (docs/figures/env.json), then `bench report`."
    ),
) -> None:
    """Env frame rate vs the raw mGBA core, stable-retro's RetroEnv, and 2 vectorised envs."""
    command = f"metabonk bench env {env_id}"
    result = run_env_speed(env_id, steps=steps, rounds=rounds, vector=vector, retro_env=retro_env)
    _print(command, result, out)
    if figures is not None:
        put_figures(figures, env_figures(result), command=command, title="GBA envs")


def bench_report(
    check: bool = typer.Option(False, help="Only check: exit 1 if docs/benchmarks.md is stale."),
    headline: bool = typer.Option(False, help="Print the README's headline table rows."),
    figures: Path = typer.Option(report.FIGURES_DIR, help="Folder of the figure records."),
    page: Path = typer.Option(report.PAGE, help="The page to write."),
) -> None:
    """Write docs/benchmarks.md from the figure records in docs/figures/ (run at the repo root)."""
    args = ["--figures", str(figures), "--page", str(page)]
    args += ["--check"] * check + ["--headline"] * headline
    code = report.main(args)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add every command of `BENCHES` to `bench_app` (once) and `bench_app` to `app` as `bench`."""
    registered = {command.name for command in bench_app.registered_commands}
    for name, where in BENCHES.items():
        if name not in registered:
            module, function = where.split(":")
            callback = getattr(importlib.import_module(f"metabonk_gym.cli.{module}"), function)
            bench_app.command(name)(callback)
    app.add_typer(bench_app, name="bench")
