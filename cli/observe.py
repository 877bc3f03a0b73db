"""Observation-wrapper commands: `metabonk bench tiles`, `metabonk bench predictors`, and the
predictor trainer `predictor_command` (mounted as `metabonk train predictor` by cli/train.py,
and as the hidden alias `metabonk train-predictor`).

Thin typer layer over `metabonk_gym.bench.wrappers_speed` and
`metabonk_gym.training.predictor.train_predictor`; without `--env`, the predictor trains on

>>> PREDICTOR_ENVS
('MetaBonk/BonkQuest-v0', 'MetaBonk/BonkArena-v0')
"""

from __future__ import annotations

from pathlib import Path

import typer
from metabonk_gym.cli.bench import _print, console

from metabonk_gym.bench.figures import invoked_command, put_figures
from metabonk_gym.bench.wrappers_speed import DEFAULT_ENVS as BENCH_ENVS
from metabonk_gym.bench.wrappers_speed import (
    predictor_records,
    run_predictors,
    run_tiles,
    tile_records,
)
from metabonk_gym.training.predictor import DEFAULT_ENVS as PREDICTOR_ENVS
from metabonk_gym.training.predictor import train_predictor


def bench_tiles(
    env_id: str = typer.Argument("MetaBonk/BonkQuest-v0", help="GBA env id to measure."),
    steps: int = typer.Option(2000, help="Env steps (each timed: env, VRAM tokens, pixel tokens)."),
    seed: int = typer.Option(0, help="Reset seed and policy seed."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/wrappers.json)."
    ),
) -> None:
    """TileTokens cost per step (VRAM and pixel paths) as ratios to the env step."""
    command = f"metabonk bench tiles {env_id}"
    result = run_tiles(env_id, steps=steps, seed=seed)
    _print(command, result, out)
    if figures is not None:
        put_figures(
            figures, tile_records(result), command=f"{command} --steps {steps} --seed {seed}"
        )


def bench_predictors(
    env_ids: list[str] = typer.Argument(None, help="Env ids (default: BonkQuest and BonkArena)."),
    episodes: int = typer.Option(2, help="Held-out episodes per env."),
    steps: int = typer.Option(300, help="Steps per episode."),
    model: Path | None = typer.Option(
        None, help="A learned predictor (from `metabonk train predictor`)."
    ),
    train_seconds: float = typer.Option(
        0.0,
        help="Without --model: train a learned predictor for this long first (0: leave it out).",
    ),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/wrappers.json)."
    ),
) -> None:
    """PSNR / SSIM at t+1..t+3 of each predictor vs `copy` on held-out episodes, and cost per step."""
    result = run_predictors(
        tuple(env_ids) if env_ids else BENCH_ENVS,
        episodes=episodes,
        steps=steps,
        model=model,
        train_seconds=train_seconds,
        log=console.print,
    )
    _print("metabonk bench predictors", result, out)
    if figures is not None:
        put_figures(figures, predictor_records(result), command=invoked_command())


def predictor_command(
    out: Path = typer.Option(Path("predictor.pt"), help="Where to write the model."),
    env_ids: list[str] = typer.Option(
        None, "--env", help="Env ids to record (repeat; default both bundled games)."
    ),
    episodes: int = typer.Option(3, help="Recorded episodes per env."),
    steps: int = typer.Option(300, help="Steps per episode."),
    iterations: int = typer.Option(1500, help="Training iterations at most."),
    time_limit: float = typer.Option(180.0, help="Seconds of training at most."),
    batch_size: int = typer.Option(16, help="Crops per iteration."),
    threads: int = typer.Option(1, help="Torch CPU threads."),
    seed: int = typer.Option(0, help="Seed of the recorded episodes and of training."),
) -> None:
    """Train the learned frame predictor (a tiny conv net, CPU) on recorded episodes."""
    result = train_predictor(
        out,
        env_ids=tuple(env_ids) if env_ids else PREDICTOR_ENVS,
        episodes=episodes,
        steps=steps,
        iterations=iterations,
        time_limit_s=time_limit,
        batch_size=batch_size,
        threads=threads,
        seed=seed,
        log=console.print,
    )
    _print("metabonk train predictor", result, None)


def register(app: typer.Typer) -> None:
    # the bench commands are registered from metabonk_gym.cli.bench.BENCHES
    app.command("train-predictor", hidden=True)(predictor_command)  # alias of `train predictor`
