"""`metabonk tune pbt`, `metabonk train appo` and `metabonk bench distributed`: the Ray commands
(RLlib env runners, Ray Tune's population-based training), thin over `metabonk_gym.training`.

>>> import typer
>>> sorted(c.name for c in tune_app.registered_commands)
['pbt']
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from metabonk_gym.cli.bench import _print
from metabonk_gym.cli.errors import plain_console
from metabonk_gym.cli.rayopts import (
    ADDRESS_OPTION,
    ENVS_PER_RUNNER_OPTION,
    GAME_OPTION,
    NUM_ENV_RUNNERS_OPTION,
    NUM_LEARNERS_OPTION,
    ray_options,
    train_with_rllib,
)
from metabonk_gym.cli.train import (
    ENV_HELP,
    SET_HELP,
    TRUST_GAME_FOLDER_OPTION,
    _finish,
    check_run_game_code,
    env_options,
    exit_if_stopped,
    guarded,
    overrides_from,
    train_app,
)
from metabonk_gym.cli.watch import WATCH_OPTION, live_watch
from rich.table import Table

from metabonk_gym.bench.distributed_speed import figure_records as distributed_records
from metabonk_gym.bench.distributed_speed import run as run_distributed
from metabonk_gym.bench.figures import put_figures

tune_app = typer.Typer(
    help="Hyperparameter search on a Ray cluster: population-based training (Ray Tune).",
    no_args_is_help=True,
)
console = plain_console()


@tune_app.command("pbt")
def pbt_command(
    env_id: str = typer.Argument(..., help=ENV_HELP),
    run_dir: Path = typer.Option(..., "--run-dir", help="Run directory (members/, best/, tune/)."),
    pbt: Path | None = typer.Option(
        None,
        "--pbt",
        help="PBT file: population_size, perturbation_interval, total_steps, mutations, train, ray.",
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Training config file (as for train; a wrappers: list included)."
    ),
    engine: str | None = typer.Option(
        None,
        "--engine",
        help="Members: rllib (RLlib PPO, the default) or sb3 (the train ppo path); overrides the "
        "PBT file's engine.",
    ),
    address: str | None = ADDRESS_OPTION,
    num_env_runners: int | None = typer.Option(
        None, "--num-env-runners", help="Env runners per member (default 0: the member steps them)."
    ),
    envs_per_runner: int | None = ENVS_PER_RUNNER_OPTION,
    game: list[str] | None = GAME_OPTION,
    set_options: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    watch: str | None = WATCH_OPTION,
) -> None:
    """Population-based training of PPO (RLlib or SB3 members); the best member's policy and
    config end in DIR/best/ (`metabonk eval ENV DIR/best`, its wrapper stack rebuilt)."""
    live_watch(watch, run_dir, f"tune pbt {env_id} {run_dir}")
    from metabonk_gym.training.tune import PBTSpec, tune_pbt

    spec = guarded(lambda: PBTSpec.load(pbt))
    if engine is not None:
        spec = guarded(lambda: PBTSpec.from_dict({**spec.to_dict(), "engine": engine}, "--engine"))
    flags = overrides_from(set_options, env_options(None, None, None))
    given: dict[str, object] = {
        k: v
        for k, v in {
            "address": address,
            "num_env_runners": num_env_runners,
            "envs_per_runner": envs_per_runner,
        }.items()
        if v is not None
    }
    if game:
        given["games"] = game

    def go() -> object:
        from metabonk_gym.training.rllib import RayOptions, parse_games

        data = {"num_env_runners": 0, **spec.ray, **given}
        if data.get("games"):
            data["games"] = parse_games(list(data["games"]))
        return tune_pbt(
            env_id,
            run_dir,
            spec=spec,
            config_file=config,
            overrides=flags,
            ray=RayOptions.from_dict(data),
        )

    result = guarded(go)
    data = result.to_dict()  # type: ignore[attr-defined]
    if as_json:
        console.print_json(json.dumps(data, default=str))
        exit_if_stopped("best/ kept what was saved")
        return
    table = Table(title=f"PBT {env_id}")
    for column in ("member", "score", "steps", "hyperparameters"):
        table.add_column(column)
    for row in data["members"]:
        table.add_row(
            row["member"][-60:],
            str(row["score"]),
            str(row["steps"]),
            json.dumps(row["hyperparameters"]),
        )
    console.print(table)
    console.print(
        f"exploit steps: {data['exploits']}; best: {data['best_member']} ({data['best_score']})"
    )
    console.print(f"best policy: {data['best_model']}")
    exit_if_stopped("best/ kept what was saved")


def appo_command(
    env_id: str = typer.Argument(..., help=ENV_HELP),
    run_dir: Path = typer.Option(
        ..., "--run-dir", help="Run directory (TensorBoard, checkpoints, model.zip)."
    ),
    total_steps: int | None = typer.Option(None, "--total-steps", help="Env steps in total."),
    n_envs: int | None = typer.Option(
        None, "--n-envs", help="Envs in total (spread over the runners)."
    ),
    config: Path | None = typer.Option(None, "--config", help="YAML/TOML config."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --run-dir."),
    address: str | None = ADDRESS_OPTION,
    num_env_runners: int | None = NUM_ENV_RUNNERS_OPTION,
    envs_per_runner: int | None = ENVS_PER_RUNNER_OPTION,
    num_learners: int | None = NUM_LEARNERS_OPTION,
    game: list[str] | None = GAME_OPTION,
    set_options: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    watch: str | None = WATCH_OPTION,
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
) -> None:
    """APPO (RLlib, asynchronous PPO) on a Ray cluster; same configs and run directory as `train ppo`."""
    live_watch(watch, run_dir, f"train appo {env_id} {run_dir}")
    flags = overrides_from(set_options, None, total_steps=total_steps, n_envs=n_envs)
    if resume:
        check_run_game_code(run_dir, trust_game_folder, flags)
    opts = guarded(
        lambda: ray_options(address, num_env_runners, envs_per_runner, num_learners, game)
    )
    result = guarded(
        lambda: train_with_rllib("appo", env_id, run_dir, config, flags, resume, opts, progress)
    )
    _finish(result, as_json)


def bench_distributed(
    env_id: str = typer.Argument("MetaBonk/BonkQuest-v0", help="Env id to measure."),
    envs: int = typer.Option(2, help="Envs in total (the same for RLlib and SB3)."),
    steps: int = typer.Option(2048, help="Env steps per measurement."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/distributed.json)."
    ),
) -> None:
    """Env steps/s of RLlib PPO vs the SB3 path at the same env count, 1 vs 2 env runners, and
    a projection for 1, 4 and 16 nodes (stated with its formula)."""
    command = f"metabonk bench distributed {env_id}"
    result = guarded(lambda: run_distributed(env_id, envs=envs, steps=steps))
    _print(command, result, out)
    if figures is not None:
        command += f" --envs {envs} --steps {steps}"
        put_figures(figures, distributed_records(result), command=command)


def register(app: typer.Typer) -> None:
    app.add_typer(tune_app, name="tune")
    train_app.command("appo")(appo_command)
