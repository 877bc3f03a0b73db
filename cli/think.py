"""`metabonk serve-vlm`, `metabonk distill` and `metabonk bench think`: System 2 on the command line.

Thin typer layer over `metabonk_gym.think` (serve, distill) and `metabonk_gym.bench.think_speed`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import typer
from rich.console import Console

console = Console()


def serve_vlm(
    model: Path = typer.Argument(..., help="The GGUF model to serve."),
    mmproj: Path | None = typer.Option(None, help="Vision projector GGUF (enables images)."),
    port: int = typer.Option(8000, help="Port on 127.0.0.1."),
    chat_format: str = typer.Option(
        "auto", help="Chat handler family (auto, llava-1.5, qwen2.5-vl, mtmd, ...)."
    ),
    n_ctx: int = typer.Option(8192, help="Context length."),
    n_gpu_layers: int | None = typer.Option(
        None, help="Layers on the GPU (default: all when built with GPU support)."
    ),
) -> None:
    """Serve MODEL with llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (loopback only).

    Point envs at it with PauseToThink(backend="openai", base_url="http://127.0.0.1:PORT/v1").
    """
    from metabonk_gym.think.serve import server_command

    cmd = server_command(
        model, mmproj, port=port, chat_format=chat_format, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers
    )
    console.print(f"serving {model} on http://127.0.0.1:{port}/v1 (Ctrl-C stops)")
    try:
        raise typer.Exit(subprocess.call(cmd))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def distill_command(
    logdir: Path = typer.Argument(..., help="A decision log folder (PauseToThink(log_dir=...))."),
    out: Path = typer.Option(Path("distilled.pt"), help="Where to write the policy."),
    epochs: int = typer.Option(40, help="Training epochs."),
    seed: int = typer.Option(0, help="Random seed."),
) -> None:
    """Train a small net to predict the strategist's directives from observations.

    Run it with `metabonk play ENV --agent think --model OUT` or PauseToThink(backend="distilled").
    """
    from metabonk_gym.think.distill import distill

    figures = distill(logdir, out, epochs=epochs, seed=seed)
    console.print_json(json.dumps(figures))
    console.print(f"wrote {out}")


def bench_think(
    seeds: int = typer.Option(20, help="BonkQuest seeds for the oracle + follower win rate."),
    calls: int = typer.Option(8, help="Think calls per backend (0: skip the latency part)."),
    model: Path | None = typer.Option(
        None, help="A GGUF to time (default: the tiny random test model)."
    ),
    mmproj: Path | None = typer.Option(None, help="Its vision projector."),
    server: bool = typer.Option(True, help="Also time llama-cpp-python's server over loopback."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
) -> None:
    """Oracle + DirectiveFollower win rate on BonkQuest, and think latency per backend vs env steps."""
    from metabonk_gym.cli.bench import _print

    from metabonk_gym.bench.think_speed import run

    _print("metabonk bench think", run(seeds, calls, model, mmproj, server), out)


def register(app: typer.Typer) -> None:
    from metabonk_gym.cli.bench import bench_app

    app.command("serve-vlm")(serve_vlm)
    app.command("distill")(distill_command)
    bench_app.command("think")(bench_think)
