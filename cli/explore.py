"""`metabonk explore ENV`, `metabonk robustify RUN` and `metabonk bench explore`: Go-Explore on
the suite's envs, with no teacher and no game code (a thin typer layer over
`metabonk_gym.training.explore`, `metabonk_gym.training.backward` and
`metabonk_gym.bench.explore_speed`).

`explore` writes OUT/archive.npz (data only, checksummed), OUT/explore.json and TensorBoard
scalars in OUT/tensorboard; Ctrl-C or SIGTERM ends the round, saves the archive and exits
130 / 143; `--resume` continues it. `robustify` trains a pixel PPO policy from the archive's best
path with the backward curriculum (after cloning it, with `--bc-epochs`) into a new run
directory, or continues one (`--resume`).

>>> import typer
>>> app = typer.Typer()
>>> register(app)
>>> sorted(c.name for c in app.registered_commands)
['explore', 'robustify']
>>> from metabonk_gym.cli.bench import BENCHES
>>> BENCHES["explore"]
'explore:bench_explore'
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from metabonk_gym.cli.bench import _print, console
from metabonk_gym.cli.errors import err_console
from metabonk_gym.cli.train import exit_if_stopped, guarded

from metabonk_gym.bench.explore_speed import figure_records, run
from metabonk_gym.bench.figures import put_figures
from metabonk_gym.training.config import parse_key_values, parse_set_options
from metabonk_gym.training.explore import ExploreSettings, run_explore


def progress_line(line: str) -> None:
    """A progress line on stderr, never wrapped (logs stay one line per report)."""
    err_console.print(line, soft_wrap=True)


def explore(
    env_id: str = typer.Argument(..., help="Env id, e.g. MetaBonk/BonkQuest-v0."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder of the archive (new, or --resume)."),
    frames: int | None = typer.Option(None, min=1, help="Stop after this many emulator frames."),
    seconds: float | None = typer.Option(None, min=0.001, help="Stop after this long."),
    stop_when_won: bool = typer.Option(False, "--stop-when-won", help="Stop once a cell wins."),
    after_win_frames: int | None = typer.Option(
        None, min=0, help="Explore on this many frames past the first win, then stop."
    ),
    until_prefer: float | None = typer.Option(
        None,
        help="Stop once a won cell's preferred variable (the cells file's `prefer`, e.g. hp) "
        "is at least this.",
    ),
    envs: int = typer.Option(2, min=1, help="Envs on the vector engine (one emulator each)."),
    cells: Path | None = typer.Option(
        None, help="Cells file (default: the game folder's cells.yaml, else the screen)."
    ),
    state: str | None = typer.Option(None, help="The start (default: the env's)."),
    game_seed: int = typer.Option(0, help="The game's seed at the start."),
    seed: int = typer.Option(0, help="Random seed of the selection and the bursts."),
    burst: int = typer.Option(100, min=1, help="Random steps after each return."),
    repeat_prob: float | None = typer.Option(
        None,
        min=0.0,
        max=0.999,
        help="Chance a step repeats the last action (default: the "
        "cells file's repeat_prob, else 0.95).",
    ),
    save_every: float = typer.Option(60.0, min=1.0, help="Seconds between archive saves."),
    env_kwarg: list[str] | None = typer.Option(
        None, "--env-kwarg", help="KEY=VALUE for gym.make (e.g. integration=FOLDER)."
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue the archive in --out."),
) -> None:
    """Go-Explore: remember cells, return to promising ones by loading their states, explore
    from there with repeated random actions; writes OUT/archive.npz."""
    ends = (frames, seconds, after_win_frames, until_prefer)
    if all(end is None for end in ends) and not stop_when_won:
        raise typer.BadParameter(
            "give an end: --frames, --seconds, --stop-when-won, --after-win-frames or "
            "--until-prefer"
        )
    settings = ExploreSettings(
        n_envs=envs,
        max_frames=frames,
        max_seconds=seconds,
        burst_steps=burst,
        repeat_prob=repeat_prob,
        state=state,
        game_seed=game_seed,
        seed=seed,
        save_every_s=save_every,
        stop_when_won=stop_when_won,
        after_win_frames=after_win_frames,
        until_prefer=until_prefer,
        cells_file=str(cells) if cells is not None else None,
        env_kwargs=parse_key_values(env_kwarg, "--env-kwarg"),
    )
    result = run_explore(env_id, out, settings, resume=resume, progress=progress_line)
    console.print_json(json.dumps(result.to_dict()))
    exit_if_stopped(f"archive saved: {out / 'archive.npz'}")


def robustify(
    explore_dir: Path = typer.Argument(..., help="An explorer's --out folder (its archive)."),
    run_dir: Path = typer.Option(..., "--run-dir", help="New run directory of the policy."),
    total_steps: int = typer.Option(200_000, min=1, help="PPO env steps in all."),
    every: int = typer.Option(10, min=1, help="Demonstration steps between start points."),
    threshold: float = typer.Option(
        0.5, min=0.01, max=1.0, help="Success rate that moves the start back."
    ),
    window: int = typer.Option(20, min=1, help="Episodes that decide a move."),
    sticky: float = typer.Option(0.25, min=0.0, max=0.99, help="Sticky-action probability."),
    set_: list[str] | None = typer.Option(
        None, "--set", help="Training config KEY=VALUE (n_envs, learning_rate, ...)."
    ),
    env_kwarg: list[str] | None = typer.Option(
        None, "--env-kwarg", help="KEY=VALUE for gym.make; yours replace the archive's."
    ),
    max_stride: int = typer.Option(
        1, min=1, help="Most points one move skips back (a quick move doubles the next)."
    ),
    jump_rate: float = typer.Option(
        0.9, min=0.01, max=1.0, help="A move at this success rate or more doubles the next."
    ),
    bc_epochs: int = typer.Option(
        0, min=0, help="Epochs of cloning the demonstration before PPO (0: none)."
    ),
    bc_passes: int = typer.Option(
        4, min=1, help="Replays to clone: one clean, the rest with sticky actions."
    ),
    uniform_share: float = typer.Option(
        0.0,
        min=0.0,
        max=1.0,
        help="Share of episodes started from a point drawn from the whole path (1: no "
        "curriculum, every part of the path at once).",
    ),
    waypoint_reward: float = typer.Option(
        0.0,
        min=0.0,
        help="Bonus per cell of the path passed, in episodes started on a path (RAM cells).",
    ),
    segment_steps: int = typer.Option(
        0,
        min=0,
        help="Most steps of an episode the uniform share draws (a stretch of the path, not the "
        "rest of it; 0: the rest).",
    ),
    also: list[Path] | None = typer.Option(
        None,
        "--also",
        help="Another explorer's folder (the same env, e.g. another --game-seed): the uniform "
        "share starts on its best path too (repeatable).",
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the run in --run-dir (its settings; a new --total-steps)."
    ),
) -> None:
    """The backward algorithm (Salimans and Chen 2018): PPO from pixels, starting near the end of
    the archive's best path and moving the start back as it succeeds."""
    from metabonk_gym.training.backward import BackwardSettings, run_robustify

    if resume and set_:
        raise typer.BadParameter("--resume trains with the run's own config; drop --set")
    settings = BackwardSettings(
        every=every,
        threshold=threshold,
        window=window,
        total_steps=total_steps,
        sticky_action_prob=sticky,
        overrides=parse_set_options(set_),
        max_stride=max_stride,
        jump_rate=jump_rate,
        bc_epochs=bc_epochs,
        bc_passes=bc_passes,
        uniform_share=uniform_share,
        waypoint_reward=waypoint_reward,
        segment_steps=segment_steps,
    )
    result = guarded(  # Ctrl-C / SIGTERM: PPO's checkpoint and the model are saved, exit 130/143
        lambda: run_robustify(
            explore_dir,
            run_dir,
            settings,
            env_kwargs=parse_key_values(env_kwarg, "--env-kwarg") or None,
            progress=progress_line,
            resume=resume,
            also=also or (),
        )
    )
    console.print_json(json.dumps(result.to_dict()))
    exit_if_stopped(f"model saved: {result.model_path}")


def bench_explore(
    env_id: str = typer.Argument("MetaBonk/BonkQuest-v0", help="Env id to explore."),
    steps: int = typer.Option(2000, min=100, help="Env steps per env and round."),
    rounds: int = typer.Option(3, min=1, help="Alternating raw/explorer rounds (medians)."),
    envs: int = typer.Option(2, min=1, help="Envs of the second explorer (the first has 1)."),
    warmup: int = typer.Option(5, min=0, help="Explorer rounds before measuring."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None,
        help="Put the figure into this record (docs/figures/explore.json), then `bench report`.",
    ),
) -> None:
    """Explorer env steps/s vs the raw mGBA core's, same run (1 env, and ENVS envs summed)."""
    result = run(env_id, steps=steps, rounds=rounds, n_envs=envs, warmup=warmup)
    command = f"metabonk bench explore {env_id} --steps {steps} --rounds {rounds} --envs {envs}"
    _print(command, result, out)
    if figures is not None:
        records = figure_records(result, rounds=rounds)
        put_figures(figures, records, command=command, title="Learning without a teacher")


def register(app: typer.Typer) -> None:
    """`explore` and `robustify` join `app` (`bench explore` is in `metabonk_gym.cli.bench.BENCHES`)."""
    app.command("explore")(explore)
    app.command("robustify")(robustify)
