"""`metabonk video to-dataset`, `metabonk train idm|reward`, `metabonk label`, `metabonk bench video`.

A thin typer layer over `metabonk_gym.video`: gameplay videos become a video dataset, an inverse
dynamics model learns actions from Minari datasets that have them, `label` writes a Minari
dataset of a video dataset with the IDM's actions (docs/video.md). `idm` and `reward` mount on
the `train` group and `video` on the `bench` group, so this module is the only one to edit.

>>> sorted(c.name for c in video_app.registered_commands)
['to-dataset']
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from metabonk_gym.cli.errors import fail, plain_console
from metabonk_gym.cli.train import train_app

from metabonk_gym.bench.figures import invoked_command, put_figures
from metabonk_gym.contract import DOWNSCALES
from metabonk_gym.training.errors import VideoError
from metabonk_gym.utils import atomic_write_text, check_number
from metabonk_gym.video.dataset import to_dataset
from metabonk_gym.video.idm import train_idm
from metabonk_gym.video.label import label, relabel_dataset
from metabonk_gym.video.reward import train_reward_model

console = plain_console()
err_console = plain_console(stderr=True)

video_app = typer.Typer(
    help="Gameplay videos: turn them into datasets at the env's step rate and screen.",
    no_args_is_help=True,
)


def _check_frames(obs_type: str | None, downscale: int | None) -> None:
    """Refuse frame options no env takes, before any dataset is read or folder made."""
    if obs_type is not None and obs_type not in ("rgb", "grayscale"):
        raise VideoError(f"--obs-type must be rgb or grayscale, not {obs_type!r}")
    if downscale is not None and downscale not in DOWNSCALES:
        shown = ", ".join(map(str, DOWNSCALES[:-1]))
        raise VideoError(f"--downscale must be {shown} or {DOWNSCALES[-1]}, not {downscale}")


def _print(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(data, default=str))
        return
    for key, value in data.items():
        if key == "confusion":
            continue
        shown = f"{value:.3f}" if isinstance(value, float) else value
        console.print(f"{key}: {shown}")


@video_app.command("to-dataset")
def to_dataset_command(
    videos: list[Path] = typer.Argument(..., help="Video files (mp4, webm, ...) or frame folders."),
    env_id: str = typer.Option(..., "--env", help="The env whose game the videos show."),
    out: Path = typer.Option(..., "--out", help="New folder for the video dataset."),
    crop: str | None = typer.Option(
        None, "--crop", help="x,y,w,h of the game's window in the video (pixels)."
    ),
    fps: float | None = typer.Option(
        None,
        "--fps",
        help="Frame rate of the videos (default: the file's; frame folders: the env's step rate).",
    ),
    check: bool = typer.Option(
        True, "--check/--no-check", help="Compare the videos' colours with the real env's."
    ),
    max_steps: int = typer.Option(20_000, "--max-steps", help="Most steps kept of one video."),
    as_json: bool = typer.Option(False, "--json", help="Print the index as JSON."),
) -> None:
    """Videos of ENV's game -> frames at the env's step rate and screen size, with index.json."""
    dataset = to_dataset(
        videos,
        env_id,
        out,
        crop=crop,
        fps=fps,
        check=check,
        max_steps=max_steps,
        log=err_console.print,
    )
    if as_json:
        console.print_json(json.dumps(dataset.index))
    else:
        console.print(
            f"video dataset {dataset.path}: {len(dataset)} videos, {dataset.steps} steps of {dataset.game}"
        )


def idm_command(
    datasets: list[str] = typer.Argument(..., help="Minari dataset ids with actions."),
    out: Path = typer.Option(..., "--out", help="New folder for idm.pt, idm.json, tensorboard/."),
    window: int = typer.Option(1, "--window", help="k: each step sees frames t-k .. t+k+1."),
    epochs: int = typer.Option(15, "--epochs", help="Passes over the training episodes."),
    batch_size: int = typer.Option(64, "--batch-size", help="Minibatch size."),
    lr: float = typer.Option(2e-3, "--lr", help="Adam learning rate."),
    obs_type: str | None = typer.Option(None, "--obs-type", help="rgb or grayscale frames."),
    downscale: int | None = typer.Option(None, "--downscale", help="Frame downscale factor."),
    val_fraction: float = typer.Option(0.2, "--val-fraction", help="Episodes held out."),
    augment: bool = typer.Option(True, "--augment/--no-augment", help="Augment frames."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    pool: str = typer.Option(
        "max", "--pool", help="max, or max+mean: also whole-screen motion (a scrolling camera)."
    ),
    lr_schedule: str = typer.Option(
        "constant", "--lr-schedule", help="constant, or cosine: decay the rate to 0 by the end."
    ),
    balance_buttons: bool = typer.Option(
        False, "--balance-buttons", help="Box actions: weigh a rare button's presses up."
    ),
    motion: bool = typer.Option(
        False,
        "--motion",
        help="Also read the screen's sub-pixel scroll between frames (a camera that follows "
        "the player: Megabonk's movement).",
    ),
) -> None:
    """An inverse dynamics model: the action between two frames, from datasets with actions."""
    check_number("--window", window, 0, 16, integer=True)
    check_number("--epochs", epochs, 1, 100_000, integer=True)
    check_number("--batch-size", batch_size, 1, 4096, integer=True)
    check_number("--lr", lr, 0, 10, low_open=True)
    check_number("--val-fraction", val_fraction, 0, 0.9)
    _check_frames(obs_type, downscale)
    result = train_idm(
        datasets,
        out,
        window=window,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=lr,
        obs_type=obs_type,
        downscale=downscale,
        val_fraction=val_fraction,
        augment=augment,
        seed=seed,
        log=err_console.print,
        pool=pool,
        lr_schedule=lr_schedule,
        balance_buttons=balance_buttons,
        motion=motion,
    )
    _print(result.to_dict(), as_json)
    console.print(f"TensorBoard: tensorboard --logdir {Path(out) / 'tensorboard'}")


def reward_command(
    sources: list[str] = typer.Argument(
        ..., help="Video dataset folders and/or Minari dataset ids (successful episodes)."
    ),
    out: Path = typer.Option(..., "--out", help="New folder for reward_model.pt and .json."),
    epochs: int = typer.Option(10, "--epochs", help="Epochs of ranked pairs."),
    pairs: int = typer.Option(2048, "--pairs", help="Frame pairs per epoch."),
    obs_type: str = typer.Option("grayscale", "--obs-type", help="rgb or grayscale frames."),
    downscale: int = typer.Option(4, "--downscale", help="Frame downscale factor."),
    all_episodes: bool = typer.Option(
        False, "--all-episodes", help="Rank every Minari episode, not only successful ones."
    ),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """A progress score of frames by temporal ranking: a `learned` reward term, label rewards."""
    check_number("--epochs", epochs, 1, 100_000, integer=True)
    check_number("--pairs", pairs, 1, 10_000_000, integer=True)
    _check_frames(obs_type, downscale)
    result = train_reward_model(
        sources,
        out,
        obs_type=obs_type,
        downscale=downscale,
        pairs_per_epoch=pairs,
        epochs=epochs,
        successful_only=not all_episodes,
        seed=seed,
        log=err_console.print,
    )
    _print(result.to_dict(), as_json)


def label_command(
    video_dataset: Path = typer.Argument(
        ...,
        help="A video dataset folder (`video to-dataset`), or a Minari dataset id whose actions "
        "are hidden and relabelled (Megabonk: its frames come with a state vector).",
    ),
    idm: Path = typer.Option(..., "--idm", help="The IDM folder (`train idm`)."),
    out: str = typer.Option(..., "--out", help="New Minari dataset id, e.g. me/quest-video-v0."),
    threshold: float = typer.Option(
        0.6, "--threshold", help="Steps whose confidence is under this are flagged (kept)."
    ),
    reward_model: Path | None = typer.Option(
        None, "--reward-model", help="Rewards from a reward model (`train reward`)."
    ),
    obs_type: str | None = typer.Option(
        None, "--obs-type", help="Stored frames: rgb or grayscale."
    ),
    downscale: int | None = typer.Option(None, "--downscale", help="Stored frames' downscale."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    state_only: bool = typer.Option(
        False,
        "--state-only",
        help="Relabelling a Minari dataset of Dict(pixels, state): keep only the state vectors "
        "(for a policy on the state, Megabonk's default).",
    ),
) -> None:
    """Label a video dataset with an IDM's actions into a Minari dataset for `train bc`."""
    check_number("--threshold", threshold, 0, 1)
    _check_frames(obs_type, downscale)
    if not video_dataset.exists():  # not a folder: a Minari dataset id
        relabelled = relabel_dataset(
            str(video_dataset),
            idm,
            out,
            threshold=threshold,
            state_only=state_only,
            log=err_console.print,
        )
        _print(relabelled.to_dict(), as_json)
        return
    result = label(
        video_dataset,
        idm,
        out,
        threshold=threshold,
        obs_type=obs_type,
        downscale=downscale,
        reward_model=reward_model,
        log=err_console.print,
    )
    _print(result.to_dict(), as_json)


def bench_video(
    episodes: int | None = typer.Option(
        None, "--episodes", help="Expert episodes per game (default: 300 BonkQuest, 50 BonkArena)."
    ),
    labelled_fraction: float | None = typer.Option(
        None,
        "--labelled-fraction",
        help="Episodes whose actions the IDM trains on (default 0.1; Megabonk 0.5).",
    ),
    epochs: int = typer.Option(15, "--epochs", help="IDM epochs."),
    window: int = typer.Option(1, "--window", min=0, help="IDM window k: frames t-k .. t+k+1."),
    bc: bool = typer.Option(True, "--bc/--no-bc", help="Also BC from IDM labels vs true labels."),
    out: Path | None = typer.Option(None, "--out", help="Write the figures as JSON here."),
    figures_file: Path | None = typer.Option(
        None,
        "--figures",
        help="Put the figures into this record file (docs/figures/video.json; Megabonk: "
        "docs/figures/megabonk-video.json).",
    ),
    work: Path | None = typer.Option(None, "--work", help="Keep videos and models here."),
    noise: float = typer.Option(0.25, "--noise", help="Fraction of the expert's steps random."),
    game: list[str] | None = typer.Option(
        None,
        "--game",
        help="Env ids (default: BonkQuest and BonkArena), repeatable; MetaBonk/Megabonk-v0 "
        "alone: against bonklink-sim played by a scripted person.",
    ),
    seeds: int = typer.Option(3, "--seeds", min=1, help="Megabonk: seeds (median and worst)."),
    episode_steps: int = typer.Option(150, "--episode-steps", min=8, help="Megabonk: steps."),
    bc_epochs: int = typer.Option(30, "--bc-epochs", min=1, help="Megabonk: BC epochs."),
    bc_seeds: int = typer.Option(
        3, "--bc-seeds", min=1, help="Megabonk: BC clones per label source (training seeds)."
    ),
    eval_episodes: int = typer.Option(
        24,
        "--eval-episodes",
        min=1,
        help="Megabonk: BC eval episodes per policy (a fresh sim of one seed each).",
    ),
    pool: str = typer.Option("max+mean", "--pool", help="Megabonk: the IDM's pooling."),
    jobs: int = typer.Option(1, "--jobs", min=1, help="Megabonk: seeds run at once (processes)."),
    balance_buttons: bool = typer.Option(
        True,
        "--balance-buttons/--no-balance-buttons",
        help="Megabonk: the IDM weighs a rare button's presses up (else it never labels the "
        "area ability pressed).",
    ),
    motion: bool = typer.Option(
        True,
        "--motion/--no-motion",
        help="Megabonk: the IDM also reads the screen's sub-pixel scroll (the player's move).",
    ),
    eval_steps: int = typer.Option(
        1800,
        "--eval-steps",
        min=1,
        help="Megabonk: eval cap (1800 steps: 120 game seconds, past where random play dies).",
    ),
    wm_steps: int = typer.Option(300, "--wm-steps", min=0, help="Megabonk: world-model steps."),
    speed: float = typer.Option(8.0, "--speed", help="Megabonk: the sim's speed-up."),
    frame_downscale: int = typer.Option(
        2, "--frame-downscale", help="Megabonk: recorded and IDM frames are 90x160 over this."
    ),
) -> None:
    """IDM accuracy from expert videos, BC from IDM labels vs true labels, learned reward, speed."""
    from metabonk_gym.bench.video_speed import GAMES, figure_records, run

    if labelled_fraction is not None:
        check_number("--labelled-fraction", labelled_fraction, 0.01, 0.99)
    if game and game[0] == "MetaBonk/Megabonk-v0":
        from metabonk_gym.bench import megabonk_video

        if len(game) > 1:
            fail("--game MetaBonk/Megabonk-v0 runs on its own")
        check_number("--speed", speed, 0.1, 1000)
        if frame_downscale not in (1, 2, 4):
            fail(f"--frame-downscale {frame_downscale}: choose 1, 2 or 4")
        figures = megabonk_video.run(
            seeds=seeds,
            episodes=episodes or 20,
            steps=episode_steps,
            labelled_fraction=labelled_fraction or 0.5,
            epochs=epochs,
            bc_epochs=bc_epochs,
            eval_episodes=eval_episodes,
            eval_steps=eval_steps,
            wm_steps=wm_steps,
            speed=speed,
            bc=bc,
            world_model=wm_steps > 0,
            work=work,
            log=err_console.print,
            downscale=frame_downscale,
            window=window,
            pool=pool,
            jobs=jobs,
            balance_buttons=balance_buttons,
            motion=motion,
            bc_seeds=bc_seeds,
        )
        records = megabonk_video.figure_records
        _report(figures, out, figures_file, records, seeds=list(range(seeds)))
        return
    unknown = [g for g in game or [] if g not in GAMES]
    if unknown:
        fail(f"--game {unknown[0]}: choose from {', '.join(GAMES)}")
    result = run(
        games=tuple(game or GAMES),
        noise=noise,
        episodes=episodes,
        labelled_fraction=labelled_fraction if labelled_fraction is not None else 0.1,
        epochs=epochs,
        window=window,
        bc=bc,
        work=work,
        log=err_console.print,
    )
    _report(result, out, figures_file, figure_records)


def _report(
    figures: dict[str, Any],
    out: Path | None,
    figures_file: Path | None,
    records: Callable[[dict[str, Any]], list[dict[str, Any]]],
    seeds: list[int] | None = None,
) -> None:
    """Print a bench's figures as JSON, write them to `out` and their `records` into
    `figures_file` (each when given)."""
    console.print_json(json.dumps(figures, default=str))
    if out is not None:
        atomic_write_text(out, json.dumps(figures, indent=2, default=str))
    if figures_file is not None:
        put_figures(figures_file, records(figures), command=invoked_command(), seeds=seeds)


def register(app: typer.Typer) -> None:
    app.add_typer(video_app, name="video")
    app.command("label")(label_command)
    train_app.command("idm")(idm_command)
    train_app.command("reward")(reward_command)
