"""`metabonk train ppo|bc|config`, `metabonk curriculum` and `metabonk eval`.

A thin typer layer: each command parses flags into config overrides and calls the library
function research code can call too (`metabonk_gym.training`). Errors in the input print one line
that names the problem and the fix (exit code 2) and leave run directories untouched; Ctrl-C
during training saves a checkpoint and exits with 130; a dead env worker, a game gone or a full
disk saves a checkpoint where it can, marks `run.json` failed and exits with 1 and one line that
names the cause and `--resume` (docs/training.md, "When training fails").
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import typer
from metabonk_gym.cli.errors import fail, plain_console
from metabonk_gym.cli.evalopts import (
    AGENT_OPT_OPTION,
    DETERMINISTIC_OPTION,
    MAX_STEPS_OPTION,
    SEED_OPTION,
    SERVER_OPTION,
    goal_option,
    print_report,
)
from metabonk_gym.cli.rayopts import (
    ADDRESS_OPTION,
    ENGINE_OPTION,
    ENVS_PER_RUNNER_OPTION,
    GAME_OPTION,
    NUM_ENV_RUNNERS_OPTION,
    NUM_LEARNERS_OPTION,
    check_engine,
    ray_options,
    train_with_rllib,
)
from metabonk_gym.cli.watch import WATCH_OPTION, live_watch
from rich.table import Table

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.agents.proof import PARTS, SEEDED_PARTS
from metabonk_gym.bench import learning
from metabonk_gym.bench.figures import put_figures
from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.process import stop_exit_code, stop_on_signals, stop_signal
from metabonk_gym.training.config import (
    config_to_yaml,
    parse_env_kwargs,
    parse_key_values,
    parse_set_options,
    resolve_config,
)
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.gamecode import check_game_code
from metabonk_gym.training.runtrust import check_run_options

console = plain_console()
err_console = plain_console(stderr=True)
T = TypeVar("T")

train_app = typer.Typer(
    help="Train agents on MetaBonk envs: PPO, behavioural cloning; watch them in TensorBoard.",
    no_args_is_help=True,
)


def guarded(fn: Callable[[], T]) -> T:
    """Run `fn` so that a signal stops it cleanly: the one place long commands stop on a signal
    (`process.stop_on_signals`).

    Ctrl-C and SIGTERM (`kill PID`, a scheduler) interrupt `fn` once, its Ctrl-C path saves a
    checkpoint, and the command exits 130 / 143; a second signal (during the save) kills it at
    once. After a stop, no further `guarded` work starts: a command looping over runs ends
    there. Errors pass through: every command's `MetabonkError` becomes one `error:` line and
    exit code 2 in one place (`metabonk_gym.cli.errors.one_line_errors`).
    """
    if stop_signal() is not None:  # a stopped command carries on with nothing new
        raise typer.Exit(stop_exit_code())
    try:
        with stop_on_signals():
            return fn()
    except KeyboardInterrupt:
        if stop_signal() is None:  # raised by Python's own Ctrl-C handler (outside the block)
            raise
        err_console.print(f"stopped by {signal_name(stop_signal())}")
        raise typer.Exit(stop_exit_code()) from None


def exit_if_stopped(saved: str = "saved") -> None:
    """After work that a Ctrl-C or SIGTERM ended gracefully (its result saved and reported):
    say so and exit with the shell's code (130 / 143); nothing when no signal came."""
    if stop_signal() is not None:
        err_console.print(f"stopped by {signal_name(stop_signal())}; {saved}")
        raise typer.Exit(stop_exit_code())


def signal_name(signum: int | None) -> str:
    """SIGTERM for 15.

    >>> signal_name(15)
    'SIGTERM'
    """
    import signal

    return "a signal" if signum is None else signal.Signals(signum).name


def overrides_from(
    set_options: list[str] | None, env_kwargs: dict[str, Any] | None = None, **flags: Any
) -> dict[str, Any]:
    """Config overrides from explicit flags (None = not given) and `--set KEY=VALUE`;
    `env_kwargs` (from `env_options`) are merged into `--set env_kwargs=...`.

    >>> overrides_from(["gamma=0.9"], {"backend": "skyemu"}, n_envs=2, seed=None)
    {'n_envs': 2, 'gamma': 0.9, 'env_kwargs': {'backend': 'skyemu'}}
    """

    out = {k: v for k, v in flags.items() if v is not None}
    out.update(guarded(lambda: parse_set_options(set_options)))
    if env_kwargs:
        given = out.get("env_kwargs")
        out["env_kwargs"] = {**(given if isinstance(given, dict) else {}), **env_kwargs}
    return out


def env_options(
    integration: Path | None, rom: Path | None, env_kwarg: list[str] | None
) -> dict[str, Any]:
    """`--integration`, `--rom` and `--env-kwarg KEY=VALUE` as env keyword arguments."""

    return guarded(lambda: parse_env_kwargs(env_kwarg, integration, rom))


#: Options of every command that makes an env (module-level: typer reads them per command).
INTEGRATION_OPTION: Any = typer.Option(
    None,
    "--integration",
    help="Your game's folder (with MetaBonk/GBA-v0): integration data, presets.yaml, "
    "defaults.yaml, milestones.yaml, game_card.md, game.py (docs/new-game.md).",
)
ROM_OPTION: Any = typer.Option(None, "--rom", help="The .gba file (default: the folder's rom.gba).")
ENV_KWARG_OPTION: Any = typer.Option(
    None,
    "--env-kwarg",
    help="An env keyword argument, repeatable (YAML values): --env-kwarg backend=skyemu.",
)

ENV_HELP = (
    "Env id, e.g. MetaBonk/BonkQuest-v0 (see `metabonk list`); your own game: MetaBonk/GBA-v0 "
    "--integration FOLDER."
)

#: `--trust-model`: load a model zip the usual SB3 way, pickled entries included (docs/trust.md).
TRUST_MODEL_OPTION: Any = typer.Option(
    False,
    "--trust-model",
    help="Load model zips that hold pickled entries (can run code: only files you trust; "
    "docs/trust.md).",
)


def trust_kwargs(agent: str, trust_model: bool) -> dict[str, Any]:
    """Agent keyword arguments for `--trust-model` (only a model file takes one).

    >>> trust_kwargs("random", True)
    {}
    """
    path = Path(agent).expanduser()
    if trust_model and (path.is_file() or path.is_dir()):  # a model zip or a run directory
        return {"trust": True}
    return {}


#: `--trust-game-folder`: run the `game.py` of a game folder that only a run directory or model
#: names (docs/trust.md).
TRUST_GAME_FOLDER_OPTION: Any = typer.Option(
    False,
    "--trust-game-folder",
    help="Run the game.py of a game folder that only the run directory or model names (it is "
    "code: only runs you trust; or name the folder with --integration; docs/trust.md).",
)


def check_run_game_code(
    source: str | Path | None, trust: bool, flags: dict[str, Any], config: Path | None = None
) -> None:
    """The one check of a run directory or model zip `source` that a command reads (docs/trust.md,
    "A shared run directory"): refuse (one line, exit code 2) one that names a game folder whose
    `game.py` the command line neither names (`--integration`, `--env-kwarg`, `--set`) nor
    trusts (`--trust-game-folder`), or that sets options a shared run may not set
    (`training.runtrust`: programs, URLs, paths outside the run, numbers past their caps) and
    the user did not give (`--env-kwarg`, `--set wrappers=`, the `--config` file's `wrappers`);
    other agents (random, think:M.gguf) pass.

    >>> check_run_game_code("random", False, {})
    """
    path = Path(str(source)).expanduser() if source is not None else None
    if path is None or not (path.is_dir() or (path.is_file() and path.suffix == ".zip")):
        return
    env_kwargs = flags.get("env_kwargs")
    named = [env_kwargs.get("integration")] if isinstance(env_kwargs, dict) else []
    guarded(lambda: check_game_code(path, trust=trust, named=named))
    wrappers = "wrappers" in flags or (config is not None and _config_sets_wrappers(config))
    given = env_kwargs if isinstance(env_kwargs, dict) else None
    guarded(lambda: check_run_options(path, given_env_kwargs=given, given_wrappers=wrappers))


def _config_sets_wrappers(config: Path) -> bool:
    """Whether the user's `--config` file sets `wrappers` (flat or in a section); an unreadable
    file is the command's own error later."""
    try:
        data = load_config_file(config)
    except ConfigFileError:
        return False
    if not isinstance(data, dict):
        return False
    return "wrappers" in data or any(
        isinstance(section, dict) and "wrappers" in section for section in data.values()
    )


def _print_result(result: Any, as_json: bool) -> None:
    data = result.to_dict()
    if as_json:
        console.print_json(json.dumps(data, default=str))
        return
    table = Table(title="result", show_header=False)
    for key in ("run_dir", "model_path", "num_timesteps", "episodes", "win_rate", "mean_return"):
        if data.get(key) is not None:
            value = data[key]
            table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    for key, value in (data.get("extra") or {}).items():
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)
    if data.get("run_dir"):
        console.print(f"TensorBoard: tensorboard --logdir {Path(data['run_dir']) / 'tensorboard'}")


def _finish(result: Any, as_json: bool) -> None:
    _print_result(result, as_json)
    if getattr(result, "interrupted", False):
        err_console.print("interrupted: checkpoint and model.zip saved; continue with --resume")
        raise typer.Exit(stop_exit_code())


SET_HELP = "Any config key, repeatable: --set gamma=0.98 --set net_arch='[64,64]'."


@train_app.command("ppo")
def ppo_command(
    env_id: str = typer.Argument(..., help=ENV_HELP),
    run_dir: Path = typer.Option(
        ..., "--run-dir", help="Run directory (TensorBoard, checkpoints, model.zip)."
    ),
    total_steps: int | None = typer.Option(
        None, "--total-steps", help="Env steps in total (all envs)."
    ),
    n_envs: int | None = typer.Option(
        None, "--n-envs", help="Envs stepped in parallel (one process each)."
    ),
    config: Path | None = typer.Option(
        None, "--config", help="YAML/TOML config (flat keys or per-env sections)."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the run in --run-dir (same curves and step count)."
    ),
    init_from: Path | None = typer.Option(
        None, "--init-from", help="Start from this model's policy (e.g. BC's model.zip)."
    ),
    reward: str | None = typer.Option(
        None,
        help="Reward preset (default, explore, sparse, room1, ...) or a .json/.yaml/.toml file.",
    ),
    state: str | None = typer.Option(None, help="Start state (named start or .state file)."),
    seed: int | None = typer.Option(None, help="Random seed."),
    checkpoint_every: int | None = typer.Option(
        None, "--checkpoint-every", help="Steps between checkpoints."
    ),
    video_every: int | None = typer.Option(
        None, "--video-every", help="Steps between episode videos (0: none)."
    ),
    base_port: int | None = typer.Option(
        None,
        "--base-port",
        help="Megabonk: env i talks to the game on port BASE_PORT + i (default 5560).",
    ),
    integration: Path | None = INTEGRATION_OPTION,
    rom: Path | None = ROM_OPTION,
    env_kwarg: list[str] | None = ENV_KWARG_OPTION,
    set_options: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    progress: bool = typer.Option(
        True,
        "--progress/--no-progress",
        help="Show progress: a bar on a terminal, else a line on stderr every --progress-every s.",
    ),
    progress_every: float = typer.Option(
        30.0,
        "--progress-every",
        min=0.1,
        help="Seconds between progress lines when stdout is not a terminal (logs, nohup, CI).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    trust_model: bool = TRUST_MODEL_OPTION,
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
    engine: str = ENGINE_OPTION,
    address: str | None = ADDRESS_OPTION,
    num_env_runners: int | None = NUM_ENV_RUNNERS_OPTION,
    envs_per_runner: int | None = ENVS_PER_RUNNER_OPTION,
    num_learners: int | None = NUM_LEARNERS_OPTION,
    game: list[str] | None = GAME_OPTION,
    watch: str | None = WATCH_OPTION,
) -> None:
    """PPO (stable-baselines3) on subprocess envs with Atari-style preprocessing.

    Writes DIR/tensorboard/, DIR/checkpoints/, DIR/videos/ and DIR/model.zip.
    `--engine rllib`: RLlib env runners on a Ray cluster, same configs and run directory
    (docs/distributed.md).

    MetaBonk/Megabonk-v0 trains against running games, env i on port BASE_PORT + i: start them
    first, e.g. `metabonk bonklink-sim --lockstep --instances 4 --port 5560 --jpeg-hz 0`.
    """
    from metabonk_gym.training.ppo import train_ppo

    flags = overrides_from(
        set_options,
        env_options(integration, rom, env_kwarg),
        total_steps=total_steps,
        n_envs=n_envs,
        reward=reward,
        state=state,
        seed=seed,
        checkpoint_every=checkpoint_every,
        video_every=video_every,
        base_port=base_port,
    )
    if resume:
        check_run_game_code(run_dir, trust_game_folder, flags)
    ray_flags = (address, num_env_runners, envs_per_runner, num_learners, game)
    guarded(lambda: check_engine(engine, init_from, *ray_flags))
    live_watch(watch, run_dir, f"train ppo {env_id} {run_dir}")
    if engine == "rllib":
        opts = guarded(
            lambda: ray_options(address, num_env_runners, envs_per_runner, num_learners, game)
        )
        _finish(
            guarded(
                lambda: train_with_rllib(
                    "ppo", env_id, run_dir, config, flags, resume, opts, progress
                )
            ),
            as_json,
        )
        return
    result = guarded(
        lambda: train_ppo(
            env_id,
            run_dir,
            config_file=config,
            overrides=flags,
            resume=resume,
            init_from=init_from,
            progress=progress,
            trust_model=trust_model,
            progress_every_s=progress_every,
        )
    )
    _finish(result, as_json)


@train_app.command("bc")
def bc_command(
    env_id: str = typer.Argument(..., help="Env id the dataset was recorded on."),
    dataset: str = typer.Option(
        ..., "--dataset", help="Minari dataset id (from `metabonk record`)."
    ),
    run_dir: Path = typer.Option(..., "--run-dir", help="Run directory (TensorBoard, model.zip)."),
    config: Path | None = typer.Option(
        None, "--config", help="YAML/TOML config (the same as for `train ppo`)."
    ),
    epochs: int | None = typer.Option(None, help="Passes over the dataset."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Minibatch size."),
    lr: float | None = typer.Option(None, "--lr", help="Adam learning rate."),
    integration: Path | None = INTEGRATION_OPTION,
    rom: Path | None = ROM_OPTION,
    env_kwarg: list[str] | None = ENV_KWARG_OPTION,
    set_options: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Behavioural cloning into the PPO policy class; fine-tune with `train ppo --init-from DIR/model.zip`."""
    from metabonk_gym.training.bc import train_bc

    flags = overrides_from(
        set_options,
        env_options(integration, rom, env_kwarg),
        bc_epochs=epochs,
        bc_batch_size=batch_size,
        bc_learning_rate=lr,
    )
    result = guarded(
        lambda: train_bc(
            env_id, dataset, run_dir, config_file=config, overrides=flags, progress=progress
        )
    )
    _finish(result, as_json)


@train_app.command("config")
def config_command(
    env_id: str = typer.Argument(..., help=ENV_HELP),
    config: Path | None = typer.Option(None, "--config", help="A config file to merge in."),
    integration: Path | None = INTEGRATION_OPTION,
    rom: Path | None = ROM_OPTION,
    env_kwarg: list[str] | None = ENV_KWARG_OPTION,
    set_options: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
) -> None:
    """Print the effective training config (game defaults < file < flags) as YAML."""

    flags = overrides_from(set_options, env_options(integration, rom, env_kwarg))
    cfg = guarded(lambda: resolve_config(env_id, config, flags))
    typer.echo(config_to_yaml(cfg), nl=False)


def curriculum_command(
    env_id: str = typer.Argument(..., help=ENV_HELP),
    run_dir: Path = typer.Option(..., "--run-dir", help="Run directory."),
    plan: Path | None = typer.Option(
        None, "--plan", help="Plan file (stages with promotion rules)."
    ),
    swarm: bool = typer.Option(
        False, "--swarm", help="Swarm mode: milestone states become every env's start."
    ),
    milestone: str | None = typer.Option(
        None, help="Swarm milestone variable (default: the first of the game's milestones.yaml)."
    ),
    total_steps: int | None = typer.Option(
        None, "--total-steps", help="Swarm mode: env steps in total."
    ),
    n_envs: int | None = typer.Option(None, "--n-envs", help="Envs stepped in parallel."),
    config: Path | None = typer.Option(None, "--config", help="YAML/TOML training config."),
    resume: bool = typer.Option(False, "--resume", help="Continue the curriculum in --run-dir."),
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
    integration: Path | None = INTEGRATION_OPTION,
    rom: Path | None = ROM_OPTION,
    env_kwarg: list[str] | None = ENV_KWARG_OPTION,
    set_options: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    watch: str | None = WATCH_OPTION,
) -> None:
    """PPO through a plan of savestates / seeded variants with promotion rules (or --swarm)."""
    from metabonk_gym.training.curriculum import run_curriculum

    if plan is None and not swarm:
        fail("pass --plan PLAN.yaml, or --swarm")
    flags = overrides_from(
        set_options,
        env_options(integration, rom, env_kwarg),
        n_envs=n_envs,
        total_steps=total_steps,
    )
    if resume:
        check_run_game_code(run_dir, trust_game_folder, flags)
    live_watch(watch, run_dir, f"curriculum {env_id} {run_dir}")

    def go() -> Any:
        if plan is not None and not plan.exists():
            raise ConfigError(f"plan file not found: {plan}")
        return run_curriculum(
            env_id,
            plan if plan is not None else {"swarm": {}},
            run_dir,
            config_file=config,
            overrides=flags,
            swarm=swarm,
            milestone=milestone,
            resume=resume,
            progress=progress,
        )

    result = guarded(go)
    if not as_json and result.stages:
        table = Table(title="stages")
        for column in ("stage", "promoted", "steps", "episodes", "win rate", "mean return"):
            table.add_column(column)
        for s in result.stages:
            table.add_row(
                s["name"],
                str(s["promoted"]),
                str(s["steps"]),
                str(s["episodes"]),
                "-" if s["win_rate"] is None else f"{s['win_rate']:.2f}",
                "-" if s["mean_return"] is None else f"{s['mean_return']:.2f}",
            )
        console.print(table)
    _finish(result, as_json)


def eval_command(
    env_id: str = typer.Argument(..., help=ENV_HELP),
    model: str = typer.Argument(
        ...,
        help="A model PATH.zip, a run directory of any trainer (train ppo/bc/appo/dreamer, "
        "curriculum, tune pbt), or an agent: scripted, random, think, think:MODEL.",
    ),
    episodes: int = typer.Option(10, help="Episodes (episode i is reset with seed SEED+i)."),
    seed: int = SEED_OPTION,
    out: Path | None = typer.Option(None, "--out", help="Write the report JSON here."),
    video: Path | None = typer.Option(
        None, "--video", help="Write best.mp4 and worst.mp4 into this folder."
    ),
    ladder: Path | None = typer.Option(
        None, "--ladder", help="Add the result to this ranking file (.json)."
    ),
    state: str | None = typer.Option(None, help="Start state (default: the model's)."),
    reward: str | None = typer.Option(None, help="Reward (default: the model's)."),
    max_steps: int | None = MAX_STEPS_OPTION,
    base_port: int | None = typer.Option(
        None, "--base-port", help="Megabonk: the game's port (default: the model's, else 5560)."
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Config file (for non-model agents)."
    ),
    integration: Path | None = INTEGRATION_OPTION,
    rom: Path | None = ROM_OPTION,
    env_kwarg: list[str] | None = ENV_KWARG_OPTION,
    agent_opt: list[str] | None = AGENT_OPT_OPTION,
    deterministic: bool = DETERMINISTIC_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON."),
    server: str | None = SERVER_OPTION,
    n_envs: int = typer.Option(
        1,
        "--n-envs",
        help="Episodes at once: a deterministic model or the random agent on one shared-memory "
        "vector env, other agents one process each.",
    ),
    trust_model: bool = TRUST_MODEL_OPTION,
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
    goal: str = goal_option("config"),
    watch: str | None = WATCH_OPTION,
) -> None:
    """Evaluate a model or agent on fixed seeds: mean/std return, win rate, final game variables."""

    flags = overrides_from(
        None,
        env_options(integration, rom, env_kwarg),
        state=state,
        reward=reward,
        max_episode_steps=max_steps,
        base_port=base_port,
    )
    check_run_game_code(model, trust_game_folder, flags, config)
    live_watch(watch, video, f"eval {model} on {env_id}")
    agent_kwargs = parse_agent_options(agent_opt) | trust_kwargs(model, trust_model)
    if server is not None:
        agent_kwargs["base_url"] = server
    report = guarded(
        lambda: evaluate(
            env_id,
            model,
            episodes=episodes,
            seed=seed,
            config_file=config,
            overrides=flags,
            out=out,
            video_dir=video,
            ladder=ladder,
            agent_kwargs=agent_kwargs,
            deterministic=deterministic,
            goal=goal,
            n_envs=n_envs,
        )
    )
    if as_json:
        console.print_json(json.dumps(report, default=str))
        return
    print_report(report, f"eval {model} on {env_id}", goal, out, ladder)


def parse_agent_options(items: list[str] | None) -> dict[str, Any]:
    """`--agent-opt KEY=VALUE` (YAML values) as keyword arguments for the agent's factory."""

    return guarded(lambda: parse_key_values(items, "--agent-opt"))


def bench_learning(
    parts: list[str] = typer.Argument(
        None,
        help="ppo-room1, bc-room1, quest-full, arena, arena-ppo, arena-bc, megabonk, "
        "explore-quest, explore-arena (default: the first two).",
    ),
    out: Path = typer.Option(Path("runs/proof"), help="Folder of the runs (they resume)."),
    steps: int | None = typer.Option(None, help="Env steps (default: each part's target)."),
    seeds: int = typer.Option(
        3, min=1, help="bc-room1, quest-full, arena, explore-*: training seeds."
    ),
    small: bool = typer.Option(
        False, "--small", help="quest-full, arena: a tiny run of the same code (tests)."
    ),
    minutes: float = typer.Option(
        learning.EXPLORE_MINUTES,
        min=0.05,
        help="explore-*: wall-clock budget a seed, exploring and robustifying together.",
    ),
    figures_file: Path | None = typer.Option(
        None,
        "--figures",
        help="Put each part's figures into this record (docs/figures/learning.json).",
    ),
) -> None:
    """Proof that it learns: PPO on room1, BC vs the expert, PPO vs random on BonkArena,
    Megabonk, and Go-Explore with no teacher on the whole BonkQuest and BonkArena.

    The megabonk part starts its own lockstep bonklink-sim games. With --figures, each part's
    record is written as soon as the part is done.
    """

    chosen = parts or ["ppo-room1", "bc-room1"]
    known = [*PARTS, *learning.EXPLORE_PARTS]
    unknown = [p for p in chosen if p not in known]
    if unknown:
        fail(f"unknown part(s) {unknown}; choose from {', '.join(known)}")
    results: dict[str, Any] = {}
    for part in chosen:
        if part in learning.EXPLORE_PARTS:
            results[part] = _explore_part(part, out, seeds, minutes, figures_file)
            continue
        kwargs: dict[str, Any] = {}
        if steps is not None and part not in ("quest-full", "arena"):
            kwargs["finetune_steps" if part == "bc-room1" else "total_steps"] = steps
        if part in SEEDED_PARTS:
            kwargs["seeds"] = seeds
        if part in ("quest-full", "arena"):
            kwargs["size"] = "small" if small else "full"
        results[part] = guarded(partial(PARTS[part], out, **kwargs))
        if figures_file is not None:
            command = learning.part_command(part, out=out, steps=steps, seeds=seeds, small=small)
            records = learning.part_records(part, results[part], small=small)
            seeded = learning.part_seeds(part, seeds)
            put_figures(figures_file, records, command=command, title=learning.TITLE, seeds=seeded)
    console.print_json(json.dumps(results, default=str))


def _explore_part(
    part: str, out: Path, seeds: int, minutes: float, figures_file: Path | None
) -> dict[str, Any]:
    """One Go-Explore part of `bench learning`: `bench teacherless --method explore` on the
    part's env, its record put into `figures_file`."""
    from metabonk_gym.bench.teacherless import figure_records, teacherless

    env_id = learning.EXPLORE_PARTS[part]
    figures = guarded(
        lambda: teacherless(env_id, out, seeds=seeds, minutes=minutes, method="explore")
    )
    if figures_file is not None:
        command = learning.explore_command(part, out=out, seeds=seeds, minutes=minutes)
        put_figures(
            figures_file,
            figure_records(figures),
            command=command,
            title=learning.TITLE,
            seeds=list(range(seeds)),
        )
    return figures


def bench_teacherless(
    env_id: str = typer.Argument(..., help="A bundled game's id with a learning.yaml."),
    out: Path = typer.Option(Path("runs/teacherless"), help="Folder of the runs (they resume)."),
    seeds: int = typer.Option(3, min=1, help="Training seeds."),
    minutes: float = typer.Option(60.0, min=0.05, help="Wall-clock budget of training per seed."),
    method: str = typer.Option(
        "ppo",
        help="ppo: PPO from pixels; explore: Go-Explore, then the backward curriculum on the "
        "archive's best path (learning.yaml's explore: and robustify: keys).",
    ),
    train: bool = typer.Option(True, help="--no-train: score the runs in OUT as they stand."),
    figures_file: Path | None = typer.Option(
        None, "--figures", help="Put the figure into this record (docs/figures/public-games.json)."
    ),
) -> None:
    """Learning without a teacher: PPO (or Go-Explore then a robust policy) from pixels on
    SEEDS seeds against random and the obvious rules, scored as the game folder's learning.yaml
    says (median and worst; figures.json in OUT/GAME)."""
    from metabonk_gym.bench.teacherless import figure_records, teacherless

    figures = guarded(
        lambda: teacherless(env_id, out, seeds=seeds, minutes=minutes, train=train, method=method)
    )
    console.print_json(json.dumps(figures))
    if figures_file is not None:
        guarded(
            lambda: put_figures(
                figures_file,
                figure_records(figures),
                command=figures["command"],
                title="Public games learned without a teacher",
            )
        )


def _mount_predictor() -> None:
    """`metabonk train predictor` lives in cli/observe.py (another command group) when present."""
    name = "metabonk_gym.cli.observe"
    if importlib.util.find_spec(name) is None:
        return
    command = getattr(importlib.import_module(name), "predictor_command", None)
    if command is not None:
        train_app.command("predictor")(command)


def register(app: typer.Typer) -> None:

    _mount_predictor()
    app.add_typer(train_app, name="train")
    app.command("curriculum")(curriculum_command)
    app.command("eval")(eval_command)
