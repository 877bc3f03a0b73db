"""The Ray options of `metabonk train ppo|appo --engine rllib` and `metabonk tune pbt` (shared by
cli/train.py and cli/tune.py), and the RLlib training call behind them.

>>> ray_options("127.0.0.1:6379", 2, 3, 0, ["127.0.0.1:5560"]).envs_per_runner
3
>>> ENGINES
('sb3', 'rllib')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.rllib import RayOptions, parse_games

ENGINES: tuple[str, ...] = ("sb3", "rllib")

ENGINE_OPTION: Any = typer.Option(
    "sb3",
    "--engine",
    help="sb3: stable-baselines3 on this machine; rllib: RLlib env runners on a Ray cluster "
    "(docs/distributed.md).",
)
ADDRESS_OPTION: Any = typer.Option(
    None,
    "--address",
    help="rllib: HOST:PORT of a running Ray head (`ray start --head`); default: start Ray here.",
)
NUM_ENV_RUNNERS_OPTION: Any = typer.Option(
    None, "--num-env-runners", help="rllib: Ray actors stepping envs (default 1; 0: the driver)."
)
ENVS_PER_RUNNER_OPTION: Any = typer.Option(
    None,
    "--envs-per-runner",
    help="rllib: envs per runner, one process per emulator (default: n_envs over the runners).",
)
NUM_LEARNERS_OPTION: Any = typer.Option(
    None, "--num-learners", help="rllib: learner actors (default 0: the driver learns)."
)
GAME_OPTION: Any = typer.Option(
    None,
    "--game",
    help="rllib, Megabonk: HOST:PORT of env i's game, repeatable (or comma-separated), one per env.",
)


def ray_options(
    address: str | None,
    num_env_runners: int | None,
    envs_per_runner: int | None,
    num_learners: int | None,
    games: list[str] | None,
) -> RayOptions:
    """`RayOptions` from the flags (None: the default)."""
    return RayOptions(
        address=address,
        num_env_runners=1 if num_env_runners is None else num_env_runners,
        envs_per_runner=envs_per_runner,
        num_learners=0 if num_learners is None else num_learners,
        games=parse_games(games),
    )


def check_engine(engine: str, init_from: Path | None = None, *ray_flags: Any) -> None:
    """`--engine` names one of `ENGINES`; `--init-from` is SB3's, the Ray flags RLlib's.

    >>> check_engine("sb3", None, None, 2)
    Traceback (most recent call last):
    ...
    metabonk_gym.training.errors.ConfigError: --address, --num-env-runners, --envs-per-runner, --num-learners and --game need --engine rllib
    """
    if engine not in ENGINES:
        raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "rllib" and init_from is not None:
        raise ConfigError("--init-from works with --engine sb3 only")
    if engine == "sb3" and any(flag is not None for flag in ray_flags):
        raise ConfigError(
            "--address, --num-env-runners, --envs-per-runner, --num-learners and --game need "
            "--engine rllib"
        )


def train_with_rllib(
    algo: str,
    env_id: str,
    run_dir: Path,
    config: Path | None,
    flags: dict[str, Any],
    resume: bool,
    opts: RayOptions,
    progress: bool,
) -> Any:
    """`train_rllib` with the command's arguments (errors are the caller's `guarded`'s)."""
    from metabonk_gym.training.rllib import train_rllib

    return train_rllib(
        env_id,
        run_dir,
        algo=algo,
        config_file=config,
        overrides=flags,
        resume=resume,
        ray=opts,
        progress=progress,
    )
