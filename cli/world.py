"""World-model commands: `metabonk train world-model`, `train dreamer`, `dream`, `bench world-model`.

A thin typer layer over `metabonk_gym.worldmodel` (training, imagined rollouts) and
`metabonk_gym.bench.worldmodel_speed`, and DreamerV3 through sheeprl
(`metabonk_gym.worldmodel.dreamer`). `train world-model` and `train dreamer` join `metabonk train`
(cli/train.py's group) when this module registers.

>>> from metabonk_gym.cli.bench import BENCHES
>>> BENCHES["world-model"]
'world:bench_world_model'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from metabonk_gym.cli.bench import _print, console
from metabonk_gym.cli.errors import fail
from metabonk_gym.cli.train import (
    TRUST_GAME_FOLDER_OPTION,
    check_run_game_code,
    guarded,
    train_app,
)

from metabonk_gym.bench.figures import invoked_command, put_figures
from metabonk_gym.bench.worldmodel_speed import DEFAULT_ENVS, figure_records, run_world_model_bench
from metabonk_gym.rundir import RunDir
from metabonk_gym.training.config import parse_env_kwargs
from metabonk_gym.training.errors import DatasetError
from metabonk_gym.worldmodel.data import load_source
from metabonk_gym.worldmodel.dreamer import read_dreamer_config, train_dreamer


def world_model_command(
    datasets: list[str] = typer.Argument(
        None, help="Minari dataset ids (from `metabonk record`); or use --env to roll out."
    ),
    out: Path = typer.Option(
        ..., "--out", help="Run directory (tensorboard/, checkpoints/, model.pt)."
    ),
    resume: bool = typer.Option(
        False, help="Continue the run in --out from its newest checkpoint."
    ),
    env_id: str | None = typer.Option(
        None, "--env", help="Roll out this env (sticky random policy) instead of datasets."
    ),
    episodes: int = typer.Option(8, help="With --env: episodes to roll out."),
    episode_steps: int = typer.Option(300, help="With --env: steps per episode."),
    obs_type: str | None = typer.Option(None, "--obs-type", help="With --env: rgb or grayscale."),
    downscale: int | None = typer.Option(None, help="With --env: 1, 2, 4 or 8."),
    env_kwarg: list[str] | None = typer.Option(
        None, "--env-kwarg", help="With --env: KEY=VALUE for gym.make, repeatable."
    ),
    steps: int | None = typer.Option(None, help="Gradient steps in all (default 2000)."),
    batch_size: int | None = typer.Option(None, help="Clips per step (default 16)."),
    crop: int | None = typer.Option(
        None, help="Square crop in pixels (0: whole frames; default 64)."
    ),
    lr: float | None = typer.Option(None, help="Adam learning rate (default 1e-3)."),
    width: int | None = typer.Option(None, help="Channels of the first stage (default 8)."),
    horizon: int | None = typer.Option(None, help="Frames ahead trained for (default 3)."),
    time_limit: float | None = typer.Option(
        None, "--time-limit", help="Stop after this many seconds."
    ),
    checkpoint_every: int | None = typer.Option(
        None, help="Steps between checkpoints (default 500)."
    ),
    eval_every: int | None = typer.Option(None, help="Steps between held-out evaluations (250)."),
    seed: int | None = typer.Option(None, help="Seed of sampling and initialisation (0)."),
    threads: int | None = typer.Option(None, help="torch threads (default: torch's)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
) -> None:
    """Train an action-conditioned world model of the next frames (t+1..t+3) on episodes."""
    from metabonk_gym.worldmodel.train import train_world_model

    if resume:
        named = guarded(lambda: parse_env_kwargs(env_kwarg or []))
        check_run_game_code(out, trust_game_folder, {"env_kwargs": named})

    def go() -> dict[str, Any]:

        if datasets and env_id:
            raise DatasetError("give Minari datasets or --env, not both")
        source: dict[str, Any]
        if datasets:
            source = {"datasets": list(datasets)}
        elif env_id:
            kwargs = parse_env_kwargs(env_kwarg or [])
            if obs_type is not None:
                kwargs["obs_type"] = obs_type
            if downscale is not None:
                kwargs["downscale"] = downscale
            source = {
                "env_id": env_id,
                "episodes": episodes,
                "episode_steps": episode_steps,
                "seed": 0 if seed is None else seed,
                "env_kwargs": kwargs,
            }
        elif resume:
            RunDir(out).check_resumable()
            source = dict(RunDir(out).read_config().get("source") or {})
        else:
            source = {}
        eps, facts = load_source(source, log=console.print)
        return train_world_model(
            eps,
            facts,
            out,
            resume=resume,
            source=source,
            threads=threads,
            log=console.print,
            steps=steps,
            batch_size=batch_size,
            crop=crop,
            lr=lr,
            width=width,
            horizon=horizon,
            time_limit_s=time_limit,
            checkpoint_every=checkpoint_every,
            eval_every=eval_every,
            seed=seed,
        )

    result = guarded(go)
    if as_json:
        console.print_json(json.dumps(result, default=str))
    else:
        _print("metabonk train world-model", result, None)
        console.print(f"TensorBoard: tensorboard --logdir {out / 'tensorboard'}")


def dreamer_command(
    env_id: str = typer.Argument(..., help="Env id (image observations, discrete actions)."),
    out: Path = typer.Option(..., "--out", "--run-dir", help="Run directory."),
    resume: bool = typer.Option(
        False, help="Continue the run in --out from its newest checkpoint."
    ),
    steps: int | None = typer.Option(None, help="Env steps in all (default 100000)."),
    size: str | None = typer.Option(None, help="Model size: XS, S, M, L or XL (default XS)."),
    learning_starts: int | None = typer.Option(None, help="Random steps before training (1024)."),
    batch_size: int | None = typer.Option(None, help="Sequences per batch (16)."),
    sequence_length: int | None = typer.Option(None, help="Steps per sequence (64)."),
    replay_ratio: float | None = typer.Option(None, help="Gradient steps per env step (0.5)."),
    checkpoint_every: int | None = typer.Option(None, help="Env steps between checkpoints."),
    log_every: int | None = typer.Option(None, help="Env steps between TensorBoard logs."),
    screen_size: int | None = typer.Option(None, help="Frames are resized to this square (64)."),
    grayscale: bool | None = typer.Option(None, "--grayscale/--rgb", help="Frames in grey."),
    downscale: int | None = typer.Option(None, help="The env's downscale before resizing."),
    env_kwarg: list[str] | None = typer.Option(None, "--env-kwarg", help="KEY=VALUE for gym.make."),
    seed: int | None = typer.Option(None, help="Seed."),
    accelerator: str | None = typer.Option(None, help="cpu, gpu or auto (default cpu)."),
    config: Path | None = typer.Option(
        None,
        "--config",
        help="YAML/TOML/JSON with a wrappers: list and Dreamer options (flags win).",
    ),
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
) -> None:
    """Train DreamerV3 (sheeprl) on an env: world model, actor and critic learn in imagination."""
    from_file, wrappers = guarded(lambda: read_dreamer_config(config)) if config else ({}, None)
    kwargs = {**dict(from_file.pop("env_kwargs", None) or {}), **parse_env_kwargs(env_kwarg or [])}
    if resume:
        check_run_game_code(out, trust_game_folder, {"env_kwargs": kwargs})
    if downscale is not None:
        kwargs["downscale"] = downscale
    flags = {
        "total_steps": steps,
        "size": size,
        "learning_starts": learning_starts,
        "batch_size": batch_size,
        "sequence_length": sequence_length,
        "replay_ratio": replay_ratio,
        "checkpoint_every": checkpoint_every,
        "log_every": log_every,
        "screen_size": screen_size,
        "grayscale": grayscale,
        "seed": seed,
        "accelerator": accelerator,
    }
    options = {**from_file, **{k: v for k, v in flags.items() if v is not None}}
    result = guarded(
        lambda: train_dreamer(
            env_id,
            out,
            resume=resume,
            log=console.print,
            wrappers=wrappers,
            env_kwargs=kwargs or None,
            **options,
        )
    )
    _print("metabonk train dreamer", result, None)
    console.print(f"TensorBoard: tensorboard --logdir {result['tensorboard']}")


def dream_command(
    model: Path = typer.Argument(..., help="World model: run directory or model.pt."),
    video: Path | None = typer.Option(
        None, "--video", help="Write real | imagined | uncertainty here."
    ),
    steps: int = typer.Option(60, help="Frames to imagine."),
    plan: str | None = typer.Option(
        None, help="Actions: 'RIGHT*10,UP*5' or '3*10,0*2' (default: sticky random actions)."
    ),
    seed: int = typer.Option(0, help="Reset seed of the start state."),
    state: str | None = typer.Option(None, help="Start state (savestate name)."),
    real: bool = typer.Option(
        True, "--real/--no-real", help="Play the same actions for real beside it."
    ),
    fps: float = typer.Option(15.0, help="Video frame rate."),
    agent: Path | None = typer.Option(
        None,
        help="A model zip or run directory of any trainer (train ppo/bc/appo/dreamer, "
        "curriculum, tune pbt; on the model's frames) that acts on imagined frames.",
    ),
    trust_model: bool = typer.Option(
        False, help="Load an --agent zip that needs unpickling (only one you trust)."
    ),
    env_kwarg: list[str] | None = typer.Option(
        None,
        "--env-kwarg",
        help="KEY=VALUE over the model's env kwargs, repeatable (a live game's port=5561).",
    ),
) -> None:
    """Render what a world model imagines from a start state under a plan or a policy."""
    from metabonk_gym.agents.runs import frame_policy
    from metabonk_gym.worldmodel.dream import dream
    from metabonk_gym.worldmodel.files import load_world_model

    if agent is not None and plan is not None:
        fail("give --plan or --agent, not both")

    def policy() -> Any:
        if agent is None:
            return None
        world, meta = load_world_model(model)
        shape = meta.get("obs_shape") or ()
        return frame_policy(agent, tuple(shape), world.config.n_actions, trust=trust_model)

    result = guarded(
        lambda: dream(
            model,
            steps=steps,
            plan=plan,
            policy=policy(),
            seed=seed,
            state=state,
            video=video,
            fps=fps,
            real=real,
            log=console.print,
            env_kwargs=parse_env_kwargs(env_kwarg or []) or None,
        )
    )
    result.pop("actions", None)
    _print(f"metabonk dream {model}", result, None)


def bench_world_model(
    env_ids: list[str] = typer.Argument(None, help="Env ids (default: BonkQuest and BonkArena)."),
    train_episodes: int = typer.Option(6, help="Training episodes per env (sticky random policy)."),
    heldout_episodes: int = typer.Option(2, help="Held-out episodes per env."),
    episode_steps: int = typer.Option(200, help="Steps per episode."),
    train_steps: int = typer.Option(400, help="Gradient steps per env's world model."),
    time_limit: float = typer.Option(240.0, help="Training seconds per env at most."),
    width: int = typer.Option(8, help="World-model width."),
    crop: int = typer.Option(64, help="Training crop (0: whole frames)."),
    model: list[Path] | None = typer.Option(
        None,
        "--model",
        help="Use these trained models (one per env, in order) instead of training.",
    ),
    threads: int = typer.Option(1, help="torch threads."),
    obs_type: str | None = typer.Option(None, "--obs-type", help="rgb or grayscale (env default)."),
    downscale: int | None = typer.Option(None, help="1, 2, 4 or 8 (env default: full frames)."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/world-models.json)."
    ),
) -> None:
    """PSNR / SSIM at t+1..t+3 on held-out episodes: world model vs flow vs copy, per game."""
    env_kwargs: dict[str, Any] = {}
    if obs_type is not None:
        env_kwargs["obs_type"] = obs_type
    if downscale is not None:
        env_kwargs["downscale"] = downscale
    result = guarded(
        lambda: run_world_model_bench(
            tuple(env_ids) if env_ids else DEFAULT_ENVS,
            train_episodes=train_episodes,
            heldout_episodes=heldout_episodes,
            episode_steps=episode_steps,
            train_steps=train_steps,
            time_limit_s=time_limit,
            width=width,
            crop=crop,
            models=list(model) if model else None,
            threads=threads,
            log=console.print,
            **env_kwargs,
        )
    )
    _print("metabonk bench world-model", result, out)
    if figures is not None:
        put_figures(figures, figure_records(result), command=invoked_command())


def register(app: typer.Typer) -> None:
    # `bench world-model` is registered from metabonk_gym.cli.bench.BENCHES
    train_app.command("world-model")(world_model_command)
    train_app.command("dreamer")(dreamer_command)
    app.command("dream")(dream_command)
