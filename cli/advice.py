"""Benchmarks of wrappers inside training: `metabonk bench advice` (PPO with advice, the oracle's
or a real model's, vs PPO alone on the whole BonkQuest) and `metabonk bench train-wrappers` (training env steps/s
with a wrapper stack vs none).

Thin typer layer over `metabonk_gym.bench.advice_learning` and `metabonk_gym.bench.train_wrappers`.

>>> from metabonk_gym.cli.bench import BENCHES
>>> BENCHES["advice"], BENCHES["train-wrappers"]
('advice:bench_advice', 'advice:bench_train_wrappers')
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from metabonk_gym.cli.bench import _print, console
from metabonk_gym.cli.train import guarded

from metabonk_gym.bench.advice_learning import figure_record, run_advice_bench
from metabonk_gym.bench.figures import put_figures
from metabonk_gym.bench.train_wrappers import figure_records, run_train_wrappers


def bench_advice(
    out: Path = typer.Option(Path("runs/advice"), help="Folder of the runs (they resume)."),
    seeds: int = typer.Option(3, min=1, help="Training seeds per arm."),
    steps: int = typer.Option(30_000, min=1000, help="Env steps of every run."),
    episodes: int = typer.Option(10, min=1, help="Evaluation games per run (fixed seeds)."),
    follow_weight: float = typer.Option(0.1, min=0.0, help="Weight of the follow term."),
    fade_start: float = typer.Option(0.5, min=0.0, max=1.0, help="Fade start, share of steps."),
    fade_end: float = typer.Option(0.9, min=0.0, max=1.0, help="Fade end, share of steps."),
    progress: bool = typer.Option(False, "--progress", help="Show training progress."),
    adviser: str = typer.Option(
        "oracle",
        help="Who advises: oracle, a rule (first, random: the baselines), model (the default "
        "GGUF model, SmolLM2-135M-Instruct) or model:PATH (a GGUF, e.g. a think finetune "
        "output); a model is served to all envs of a run by one llama-server, stopped with the "
        "run.",
    ),
    state: str = typer.Option("start", help="The start state of training and evaluation."),
    max_steps: int = typer.Option(1500, min=10, help="Episode length (training and evaluation)."),
    alone_from: Path | None = typer.Option(
        None,
        help="A folder of this bench whose alone runs (same seeds, steps and start) are compared "
        "here instead of training them again.",
    ),
    figures: Path | None = typer.Option(
        None, help="Put the figure into this record file (docs/figures/advice.json)."
    ),
    order: str | None = typer.Option(
        None,
        help="Seeds in the order this process takes them, e.g. 2,1,0: a second process on the "
        "same --out shares the work (runs another process trains are left to it).",
    ),
) -> None:
    """PPO with advice (the oracle's or a model's, fading out) vs PPO alone on the whole
    BonkQuest: game win rate and rooms reached, both played alone, median and worst of the seeds."""

    if order is not None and not all(v.strip().isdigit() for v in order.split(",")):
        raise typer.BadParameter(f"takes seeds like 2,1,0, not {order!r}", param_hint="--order")

    def run() -> dict:
        return run_advice_bench(
            out,
            seeds=seeds,
            total_steps=steps,
            episodes=episodes,
            fade=(fade_start, fade_end),
            follow_weight=follow_weight,
            progress=progress,
            order=[int(v) for v in order.split(",")] if order else None,
            adviser=adviser,
            state=state,
            max_steps=max_steps,
            alone_from=alone_from,
            on_result=lambda arm, row: console.print(f"{arm} seed {row['seed']}: {row}"),
        )

    result = guarded(run)
    console.print_json(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    if figures is not None:
        command = f"metabonk bench advice --out {out} --state {state} --steps {steps}"
        command += f" --seeds {seeds} --episodes {episodes} --max-steps {max_steps}"
        command += f" --adviser {adviser}"
        command += f" --alone-from {alone_from}" if alone_from is not None else ""
        put_figures(
            figures,
            [figure_record(result, adviser)],
            command=command,
            seeds=list(range(seeds)),
        )


def bench_train_wrappers(
    env_id: str = typer.Argument("MetaBonk/BonkQuest-v0", help="Env id to train on."),
    steps: int = typer.Option(4096, min=256, help="PPO env steps per variant and round."),
    rounds: int = typer.Option(5, min=1, help="Rounds (variants alternate; medians)."),
    n_envs: int = typer.Option(4, min=1, help="Training envs."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figure into this record file (docs/figures/train-wrappers.json)."
    ),
) -> None:
    """PPO training env steps/s with wrappers [tile_tokens] plus the frame stack vs no wrappers
    (same frame stack), and their ratio (target >= 0.8)."""
    result = guarded(lambda: run_train_wrappers(env_id, steps=steps, rounds=rounds, n_envs=n_envs))
    command = f"metabonk bench train-wrappers {env_id}"
    _print(command, result, out)
    if figures is not None:
        command += f" --steps {steps} --rounds {rounds} --n-envs {n_envs}"
        put_figures(figures, figure_records(result), command=command)


def register(app: typer.Typer) -> None:
    """Nothing to add to `app`: both commands are registered from `metabonk_gym.cli.bench.BENCHES`."""
