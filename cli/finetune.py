"""`metabonk think finetune`, `mix` and `examples`: teach a small language model with the oracle.

Thin typer layer over `metabonk_gym.think.finetune` (decision logs -> LoRA -> GGUF),
`metabonk_gym.think.mixlogs` (a log of chosen shares of other logs' calls) and
`metabonk_gym.think.examples` (the compact prompt's worked examples). Bad input is one line and
exit code 2:

>>> from typer.testing import CliRunner
>>> app = typer.Typer()
>>> register(app)
>>> from metabonk_gym.cli.errors import guard_commands
>>> guard_commands(app)  # as cli/main.py does: the CLI's one error path
>>> result = CliRunner().invoke(app, ["think", "finetune", "/no/such/log", "--out", "/no/such/out"])
>>> print(result.output.strip()); result.exit_code  # doctest: +ELLIPSIS
error: no decision log at /no/such/log/decisions.jsonl; pass ...
2
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import gymnasium as gym
import typer
from metabonk_gym.cli.bench import _print
from metabonk_gym.cli.errors import fail
from metabonk_gym.cli.train import guarded
from rich.console import Console

from metabonk_gym.bench.figures import load_group, put_figures
from metabonk_gym.bench.think_model import (
    STARTS,
    model_figure_records,
    model_figures,
    play_figure_records,
    play_figures,
)
from metabonk_gym.think.calibrate import calibrate_model
from metabonk_gym.think.examples import oracle_choice_examples, oracle_examples, write_examples
from metabonk_gym.think.finetune import FinetuneConfig, finetune, load_pairs
from metabonk_gym.think.mixlogs import MixSpec, mix_logs
from metabonk_gym.think.models import check_gguf, resolve_model
from metabonk_gym.utils import check_number

console = Console(markup=False)  # print text as given: no markup in user text
think_app = typer.Typer(
    help="Real language models for System 2: fine-tune one on decision logs, write prompt "
    "examples.",
    no_args_is_help=True,
)


@think_app.command("finetune")
def finetune_command(
    logdirs: list[Path] = typer.Argument(
        ...,
        help="Decision log folders (e.g. `metabonk play ... --model oracle --agent-opt log_dir=DIR`).",
    ),
    out: Path = typer.Option(
        ..., help="The run dir: model.gguf, README.md, checkpoints, tensorboard/."
    ),
    model: str | None = typer.Option(
        None, help="The base GGUF (llama architecture; default: SmolLM2-135M-Instruct)."
    ),
    steps: int = typer.Option(300, help="Optimizer steps (a resumed run goes on to this many)."),
    batch_size: int = typer.Option(4, help="Pairs per step."),
    lr: float = typer.Option(1e-3, help="Peak learning rate."),
    rank: int = typer.Option(16, help="LoRA rank."),
    quant: str = typer.Option("q8_0", help="Type of the merged weights: q8_0, f16 or f32."),
    threads: int = typer.Option(2, help="torch CPU threads."),
    save_every: int = typer.Option(20, help="Steps between checkpoints."),
    seed: int = typer.Option(0, help="Data order and adapter initialisation."),
    top_layers: int = typer.Option(12, help="Adapters in this many top blocks (0: all)."),
    max_minutes: float = typer.Option(
        0.0, help="Stop training after this many minutes and write the GGUF (0: no limit)."
    ),
    game: str | None = typer.Option(None, help="Only this game's logs (default: the first log's)."),
    resume: bool = typer.Option(False, help="Go on from the checkpoint in --out."),
    device: str = typer.Option("cpu", help="Where torch trains: cpu, or cuda with a GPU."),
) -> None:
    """Fine-tune the model on (prompt, directive) pairs of decision logs and write a GGUF that
    `--model` and `metabonk serve-vlm` take. Ctrl-C saves a checkpoint; --resume goes on."""
    config = FinetuneConfig(
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        rank=rank,
        quant=quant,
        threads=threads,
        save_every=save_every,
        seed=seed,
        top_layers=top_layers,
        max_minutes=max_minutes,
        device=device,
    )
    figures = guarded(
        lambda: finetune(
            logdirs,
            out,
            base=model,
            config=config,
            game=game,
            resume=resume,
            progress=console.print,
        )
    )
    console.print_json(json.dumps(figures))
    console.print(f"wrote {figures['gguf']} (model card: {out / 'README.md'})")


@think_app.command("pairs")
def pairs_command(
    logdirs: list[Path] = typer.Argument(..., help="Decision log folders."),
    show: int = typer.Option(1, help="How many pairs to print."),
) -> None:
    """Count the (prompt, directive) pairs of decision logs and print the first ones."""
    guarded(lambda: check_number("--show", show, 0, 1_000_000, integer=True))
    game, pairs = guarded(lambda: load_pairs(logdirs))
    console.print(f"{len(pairs)} pairs of {game}")
    for pair in pairs[:show]:
        console.print(pair.user, markup=False)
        console.print(pair.answer, markup=False)


@think_app.command("mix")
def mix_command(
    sources: list[Path] = typer.Argument(..., help="Decision log folders to mix."),
    out: Path = typer.Option(..., help="The folder of the mixed decisions.jsonl."),
    group: list[str] | None = typer.Option(
        None,
        help="NAME=REGEX: calls whose goal line matches (first group wins); the others are 'rest'.",
    ),
    keep: list[str] | None = typer.Option(None, help="A group to keep whole (e.g. rest)."),
    ratio: list[str] | None = typer.Option(
        None,
        help="NAME=FRACTION: a seeded sample of that group, FRACTION (1/3, 0.5) times the kept "
        "groups' calls. Groups neither kept nor sampled are dropped.",
    ),
    seed: int = typer.Option(0, help="The sampling's seed."),
    match: str = typer.Option("goal", help="Match the prompt's goal line (goal) or all (prompt)."),
    force: bool = typer.Option(False, help="Replace the mix in a folder that holds files."),
) -> None:
    """Mix decision logs into one for `metabonk think finetune`: keep whole groups of calls and
    seeded samples of the others, with every source's meta records (the system prompts)."""
    spec = MixSpec.parse(group or [], keep or [], ratio or [], seed, match)
    result = guarded(lambda: mix_logs(sources, out, spec, force=force))
    console.print(result.summary())
    kept = sum(result.kept.values())
    console.print(f"wrote {result.path} ({result.metas} meta records, {kept} calls)")


@think_app.command("examples")
def examples_command(
    env_id: str = typer.Argument(..., help="The game env (e.g. MetaBonk/BonkQuest-v0)."),
    count: int = typer.Option(2, help="Examples to keep (different actions)."),
    seed: int = typer.Option(0, help="The oracle episode's seed."),
    write: bool = typer.Option(False, help="Write them as the game folder's think_examples.json."),
    profile: str = typer.Option(
        "compact", help="compact (directives) or choice (numbered options and the pick)."
    ),
) -> None:
    """The compact or choice prompt's worked examples, from an oracle episode of ENV_ID."""
    if profile not in ("compact", "choice"):
        fail(f"--profile must be compact or choice, not {profile!r}")
    guarded(lambda: check_number("--count", count, 1, 64, integer=True))
    env = guarded(lambda: gym.make(env_id))
    try:
        if profile == "choice":
            examples = oracle_choice_examples(env, count=count, seed=seed)
        else:
            examples = oracle_examples(env, count=count, seed=seed)
        console.print_json(json.dumps(examples))
        folder = getattr(env.unwrapped, "game_data", None)
        if write and folder is not None:
            key = "choice_examples" if profile == "choice" else "examples"
            console.print(f"wrote {write_examples(folder.folder, examples, key)}")
    finally:
        env.close()


@think_app.command("calibrate")
def calibrate_command(
    model: str = typer.Argument("default", help="A GGUF file (default: the default model)."),
    env_id: str = typer.Option("MetaBonk/BonkQuest-v0", help="The game whose prompts to time."),
    refresh: bool = typer.Option(False, help="Measure again instead of reading the cache."),
) -> None:
    """Time MODEL on ENV_ID's prompts here (in process) and print the think deadline and
    cooldown `--agent think` derives from it (cached per model, game and machine)."""
    env = guarded(lambda: gym.make(env_id))
    try:
        found = guarded(lambda: calibrate_model(env, model, refresh=refresh))
    finally:
        env.close()
    figures = {
        **asdict(found.latency),
        **asdict(found.timing),
        "profile": found.profile,
        "from_cache": found.cached,
    }
    console.print_json(json.dumps(figures))


@think_app.command("check")
def check_command(
    model: str = typer.Argument("default", help="A GGUF file (default: the default model)."),
) -> None:
    """Check that MODEL is a complete GGUF file (the default: that the default model is installed)."""
    path = check_gguf(resolve_model(model))
    console.print(f"ok: {path}")


def bench_think_model(
    model: str = typer.Option(
        "default",
        help="The GGUF to measure (default: the default model), or a rule: first, random.",
    ),
    episodes: int = typer.Option(2, help="Oracle episodes whose decision points are asked."),
    state: str = typer.Option(
        "start", help="Start of the oracle's episodes (riddles: the riddle quest)."
    ),
    profile: str = typer.Option(
        "auto",
        help="Prompt profile: auto (choice where the game offers options), choice, compact or full.",
    ),
    n_threads: int | None = typer.Option(
        None, help="llama.cpp threads (default: the engine's, 1 on <= 4 CPUs)."
    ),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/think-model.json)."
    ),
) -> None:
    """A real model at the oracle's decision points on BonkQuest: prompt tokens (evaluated vs
    cached), latency p50/p95 at 1 env, schema-valid, sensible, agreement with the oracle."""
    result = guarded(
        lambda: model_figures(
            model,
            episodes=episodes,
            profile=profile,
            progress=console.print,
            n_threads=n_threads,
            state=state,
        )
    )
    _print("metabonk bench think-model", result, out)
    if figures is not None:
        records = model_figure_records(result, episodes)
        command = (
            f"metabonk bench think-model --model {model} --state {state} --episodes {episodes}"
        )
        guarded(lambda: put_figures(figures, records, command=command))


def bench_think_play(
    model: str = typer.Option(
        "default", help="A GGUF, oracle (ceiling), first or random (rules) or fallback (floor)."
    ),
    starts: str = typer.Option(
        ",".join(STARTS), help="Start states (roomN: leave room N; riddles: the riddle quest)."
    ),
    seeds: int = typer.Option(20, help="Seeds per start."),
    max_steps: int = typer.Option(600, help="Step limit per episode."),
    timeout_s: float | None = typer.Option(
        None, help="The think deadline (pause mode); default: calibrated on this machine."
    ),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None,
        help="Put the figures into this record file (docs/figures/think-model.json), beside "
        "the other strategists' of the same starts.",
    ),
    log_dir: Path | None = typer.Option(
        None, help="Keep the agent's decision logs here (one folder per start)."
    ),
) -> None:
    """The think agent (strategist + follower) on BonkQuest starts: win rate, steps to win."""
    result = guarded(
        lambda: play_figures(
            model,
            [s.strip() for s in starts.split(",") if s.strip()],
            seeds=seeds,
            max_steps=max_steps,
            timeout_s=timeout_s,
            progress=console.print,
            log_dir=log_dir,
        )
    )
    _print("metabonk bench think-play", result, out)
    if figures is not None:
        known = guarded(lambda: load_group(figures).figures) if figures.exists() else []
        baselines = {f.id: f.short or f.number() for f in known if f.id.startswith("play-")}
        records = play_figure_records(result, baselines)
        command = f"metabonk bench think-play --model {model} --starts {starts} --seeds {seeds}"
        command += f" --max-steps {max_steps}" + (
            f" --timeout-s {timeout_s:g}" if timeout_s else ""
        )
        guarded(lambda: put_figures(figures, records, command=command))


def register(app: typer.Typer) -> None:
    app.add_typer(think_app, name="think")
