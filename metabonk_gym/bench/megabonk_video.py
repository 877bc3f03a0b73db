"""`metabonk bench video --game MetaBonk/Megabonk-v0`: Megabonk learns offline, against the stand-in.

The game cannot run here, so `bonklink-sim` plays it: a realtime sim whose keyboard a scripted
person plays (`bonklink-sim --human scripted --input-snapshot --look detailed`: frames that show
the input as a game does, see `bonklink.render`), recorded with
`record --agent human` (the env sends nothing; the actions are the game's input snapshots,
4 ticks merged per step) with frames and mp4 videos. Per seed:

* the first `labelled_fraction` of the episodes train a Box IDM (`train_idm`, `pool`
  "max+mean", `motion` (the screen's sub-pixel scroll: the camera follows the player), a
  cosine learning-rate decay and `balance_buttons` by default: see `IdmNet`, `train_idm`;
  unbalanced, it never labels the rare area ability pressed); the others are
  the "videos": their mp4s go through `video to-dataset` and the IDM, and its actions are scored
  against the hidden true ones: **move direction within 22.5 degrees on moving steps** (true
  stick length >= 0.5; target >= 0.9) and **button accuracy** (fire, ability, interact, click;
  target >= 0.9), with the aim figures beside them;
* BC on the videos' episodes from the IDM's labels vs from the true actions (the same
  episodes' state vectors, `label --state-only`; a Megabonk policy reads the state, which a
  video lacks): `bc_seeds` clones of each (training seeds apart: one clone of the same data
  survives very differently from run to run), each over `eval_episodes` episodes (24 by
  default: at 5 the ratio swung widely between seeds; both in docs/benchmarks.md#design) on a
  fresh lockstep sim of the same
  seed, so each meets the same games as far as its play allows (the protocol has no seed
  command); the **mean survival time** over all their episodes, and the ratio (target >= 0.8),
  beside a random policy's on the same games and the scripted person's own (`survival_times`):
  the eval cap must be long enough that random dies before the teacher, or the ratio says
  nothing;
* a world model trained on the labelled episodes vs `flow` vs `copy` on the videos' episodes:
  **PSNR at t+1..t+3** (the world model told the last action, held).

Learning figures are reported per seed and as median and worst over the seeds.

>>> summary([{"a": 1.0}, {"a": 3.0}, {"a": 2.0}], "a")
{'median': 2.0, 'worst': 1.0, 'values': [1.0, 3.0, 2.0]}
>>> move = {"median": 0.929, "worst": 0.921, "values": [0.929, 0.93, 0.921]}
>>> [(r["id"], r["met"]) for r in figure_records({"move_within_22_5": move})]
[('idm-move', True)]
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.agents.record import record
from metabonk_gym.bench.figures import Target
from metabonk_gym.bench.worldmodel_speed import score_predictors
from metabonk_gym.bonklink.player import survival_times
from metabonk_gym.bonklink.sim import SimProcess
from metabonk_gym.training.bc import train_bc
from metabonk_gym.training.datasets import DatasetWriter, dataset_env_kwargs, load_dataset
from metabonk_gym.training.rollout import Trajectory
from metabonk_gym.utils import Log, env_var
from metabonk_gym.video.dataset import to_dataset
from metabonk_gym.video.idm import Idm, train_idm
from metabonk_gym.video.label import relabel_dataset, spec_env
from metabonk_gym.worldmodel.data import dataset_episodes
from metabonk_gym.worldmodel.predictor import WorldModelPredictor
from metabonk_gym.worldmodel.train import train_world_model
from metabonk_gym.wrappers.predictors import CopyPredictor, FlowPredictor

ENV_ID = "MetaBonk/Megabonk-v0"
FRAMES: dict[str, Any] = {
    "obs_type": "rgb",
    "downscale": 2,
    "policy": "MultiInputPolicy",
    "frameskip": 4,
}


def summary(rows: list[dict[str, Any]], key: str, lower_is_worse: bool = True) -> dict[str, Any]:
    """Median and worst of `key` over seeds."""
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    if not values:
        return {"median": None, "worst": None, "values": []}
    worst = min(values) if lower_is_worse else max(values)
    return {"median": float(np.median(values)), "worst": worst, "values": values}


def _minari_home(folder: Path) -> contextlib.AbstractContextManager[None]:
    return env_var("MINARI_DATASETS_PATH", str(folder / "minari"))


def _record(
    work: Path, seed: int, episodes: int, steps: int, speed: float, downscale: int = 2
) -> str:

    dataset = f"bench/mb-demos-s{seed}-v0"
    with SimProcess(
        port=0,
        human="scripted",
        input_snapshot=True,
        seed=seed,
        speed=speed,
        jpeg_hz=15,
        look="detailed",
        # the stand-in waits for a starved client (a niced bench on a loaded machine) instead
        # of dropping it after the plugin's 2 s: the figure is about learning, not the CPU
        send_timeout=30.0,
    ) as sim:
        record(
            ENV_ID,
            "human",
            dataset,
            episodes=episodes,
            overrides={
                **FRAMES,
                "downscale": downscale,
                "base_port": sim.port,
                "max_episode_steps": steps,
            },
            video_dir=work / f"videos-s{seed}",
        )
    return dataset


def _split(dataset: str, labelled: int, work: Path, seed: int) -> tuple[str, str]:
    """The first `labelled` episodes, and the rest, as two datasets (true actions kept)."""

    source = load_dataset(dataset)
    kwargs = dict(dataset_env_kwargs(source))
    kwargs.pop("env_id", None)
    kwargs.pop("render_mode", None)
    names = (f"bench/mb-idm-s{seed}-v0", f"bench/mb-video-s{seed}-v0")
    writers = [
        DatasetWriter(
            name,
            spec_env(ENV_ID, source.spec.observation_space, source.spec.action_space, **kwargs),
            algorithm_name="metabonk:human",
        )
        for name in names
    ]
    for i, episode in enumerate(source.iterate_episodes()):
        obs = episode.observations
        n = len(episode.actions)
        observations: list[Any] = [
            {k: np.asarray(v[t]) for k, v in obs.items()} for t in range(n + 1)
        ]
        traj = Trajectory(
            observations=observations,
            actions=[np.asarray(a, np.float32) for a in episode.actions],
            rewards=[float(r) for r in episode.rewards],
            terminations=[bool(t) for t in episode.terminations],
            truncations=[bool(t) for t in episode.truncations],
            infos=[{} for _ in range(n + 1)],
        )
        writers[0 if i < labelled else 1].add(traj, seed=None)
    for writer in writers:
        writer.close()
    return names


def _idm_on_videos(idm_dir: Path, videos: list[Path], video_ds: str, work: Path) -> dict[str, Any]:
    """The IDM's labels of the videos' frames against the hidden true actions."""

    idm = Idm(idm_dir)
    assert idm.layout is not None
    frames_ds = to_dataset(videos, ENV_ID, work, check=False)
    true = [np.asarray(e.actions, np.float32) for e in load_dataset(video_ds).iterate_episodes()]
    predicted, confidence = [], []
    started = time.monotonic()
    for i in range(len(frames_ds)):
        actions, conf = idm.predict(frames_ds.frames(i))
        n = min(len(actions), len(true[i]))
        predicted.append(actions[:n])
        true[i] = true[i][:n]
        confidence.append(conf[:n])
    seconds = max(time.monotonic() - started, 1e-9)
    p, t = np.concatenate(predicted), np.concatenate(true)
    metrics = idm.layout.metrics(p, t)
    metrics["steps"] = len(t)
    metrics["label_frames_per_s"] = len(t) / seconds
    metrics["mean_confidence"] = float(np.concatenate(confidence).mean())
    return metrics


def run_seed(
    seed: int,
    work: Path,
    *,
    episodes: int,
    steps: int,
    labelled_fraction: float,
    epochs: int,
    bc_epochs: int,
    eval_episodes: int,
    eval_steps: int,
    wm_steps: int,
    speed: float,
    bc: bool,
    world_model: bool,
    log: Log,
    downscale: int = 2,
    window: int = 1,
    pool: str = "max+mean",
    lr_schedule: str = "cosine",
    balance_buttons: bool = True,
    motion: bool = True,
    bc_seeds: int = 3,
) -> dict[str, Any]:
    """The figures of one seed (see the module's docstring)."""

    row: dict[str, Any] = {"seed": seed}
    log(f"seed {seed}: recording {episodes} episodes of the scripted person")
    started = time.monotonic()
    demos = _record(work, seed, episodes, steps, speed, downscale)
    row["record_seconds"] = round(time.monotonic() - started, 1)
    labelled = max(1, int(round(episodes * labelled_fraction)))
    idm_ds, video_ds = _split(demos, labelled, work, seed)
    videos = sorted((work / f"videos-s{seed}").glob("*.mp4"))[labelled:]
    log(f"seed {seed}: IDM on {labelled} episodes, scored on {len(videos)} videos")
    idm_dir = work / f"idm-s{seed}"
    trained = train_idm(
        [idm_ds],
        idm_dir,
        epochs=epochs,
        seed=seed,
        val_fraction=0.0,
        downscale=downscale,
        window=window,
        pool=pool,
        lr_schedule=lr_schedule,
        balance_buttons=balance_buttons,
        motion=motion,
    )
    row["idm_train_steps"] = trained.train_steps
    figures = _idm_on_videos(idm_dir, videos, video_ds, work / f"video-ds-s{seed}")
    row["idm"] = figures
    row["move_within_22_5"] = figures["direction_within_22_5"]
    row["button_accuracy"] = figures["button_accuracy"]
    row["aim_within_22_5"] = figures["aim"]["within_22_5"]
    row["fire_accuracy"] = figures["fire"]["accuracy"]
    row["ability_accuracy"] = figures["ability"]["accuracy"]
    if bc:
        row |= _bc_figures(
            seed, work, video_ds, idm_dir, (bc_epochs, bc_seeds), (eval_episodes, eval_steps), log
        )
    if world_model:
        row.update(_world_model(idm_ds, video_ds, work / f"wm-s{seed}", wm_steps, seed, log))
    return row


def _bc_figures(
    seed: int,
    work: Path,
    video_ds: str,
    idm_dir: Path,
    bc_runs: tuple[int, int],
    evals: tuple[int, int],
    log: Log,
) -> dict[str, Any]:
    """BC from the IDM's labels vs BC from the true actions vs random, in survival time
    (`bc_runs`: BC epochs and clones per label source; `evals`: episodes and steps a policy)."""
    bc_epochs, bc_seeds = bc_runs
    eval_episodes, eval_steps = evals
    relabel_dataset(video_ds, idm_dir, f"bench/mb-idm-labels-s{seed}-v0", state_only=True)
    relabel_dataset(video_ds, None, f"bench/mb-true-labels-s{seed}-v0", state_only=True)
    survival: dict[str, float] = {}
    per_episode: dict[str, list[float]] = {}
    per_clone: dict[str, list[float]] = {}
    for name in ("idm", "true", "random"):
        times: list[float] = []
        for clone in range(bc_seeds if name != "random" else 1):
            # each policy meets the same games: a fresh lockstep sim of the same seed (the
            # protocol has no seed command, so the games are those of one seeded sim)
            with SimProcess(port=0, mode="lockstep", seed=1000 + seed, jpeg_hz=0) as game:
                agent = "random"
                if name != "random":
                    agent = str(work / (f"bc-{name}-s{seed}" + (f"-c{clone}" if clone else "")))
                    log(f"seed {seed}: BC from {name} labels (clone {clone + 1}/{bc_seeds})")
                    base = {
                        "base_port": game.port,
                        "n_envs": 1,
                        "seed": seed + 1000 * clone,
                        "bc_epochs": bc_epochs,
                    }
                    labels = f"bench/mb-{name}-labels-s{seed}-v0"
                    train_bc(ENV_ID, labels, agent, overrides=base)
                report = evaluate(
                    ENV_ID,
                    agent,
                    episodes=eval_episodes,
                    seed=seed,
                    overrides={
                        "base_port": game.port,
                        "n_envs": 1,
                        "max_episode_steps": eval_steps,
                    },
                )
            clone_times = [round(float(t), 2) for t in report.get("survival_times", [])]
            per_clone.setdefault(name, []).append(round(float(np.mean(clone_times)), 2))
            times += clone_times
        survival[name] = float(np.mean(times)) if times else 0.0
        per_episode[name] = times
    row: dict[str, Any] = {
        "bc_clone_survival": per_clone,
        "bc_survival_idm_labels": survival["idm"],
        "bc_survival_true_actions": survival["true"],
        "random_survival": survival["random"],
        "survival_per_episode": per_episode,
    }
    seconds = eval_steps * int(FRAMES["frameskip"]) / 60.0
    row["teacher_survival"] = float(np.mean(survival_times(1000 + seed, eval_episodes, seconds)))
    row["bc_survival_ratio"] = survival["idm"] / max(survival["true"], 1e-9)
    return row


def _world_model(
    train_ds: str, test_ds: str, out: Path, steps: int, seed: int, log: Log
) -> dict[str, Any]:

    log(f"seed {seed}: world model, {steps} steps")
    episodes, facts = dataset_episodes([train_ds])
    held, _ = dataset_episodes([test_ds])
    train_world_model(episodes, facts, out, steps=steps, seed=seed, batch_size=8, crop=0)
    scores = score_predictors(
        held,
        {
            "world-model": lambda: WorldModelPredictor(path=out),
            "flow": FlowPredictor,
            "copy": CopyPredictor,
        },
        plan="last",
    )
    row: dict[str, Any] = {}
    for name, score in scores.items():
        for k, value in enumerate(score["psnr"]):
            row[f"{name.replace('-', '_')}_psnr_t{k + 1}"] = value
    return row


def _seed_in_child(seed: int, folder: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`run_seed` in a child process (its log lines go to stderr)."""
    import sys

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    return run_seed(seed, Path(folder), log=say, **kwargs)


def _run_in_children(
    seeds: int, jobs: int, folder: Path, kwargs: dict[str, Any], log: Log
) -> list[dict[str, Any]]:
    """The seeds, up to `jobs` at once, each in a fresh (spawned) process: the seeds share
    nothing but the work folder, and each has its own sims, datasets and models."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from minari.namespace import create_namespace, list_local_namespaces

    log(f"{seeds} seeds, {jobs} at once in child processes")
    if "bench" not in list_local_namespaces():  # not created by two seeds at once
        create_namespace("bench")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(_seed_in_child, seed, str(folder), kwargs) for seed in range(seeds)]
        return [future.result() for future in futures]


def run(
    *,
    seeds: int = 3,
    episodes: int = 20,
    steps: int = 150,
    labelled_fraction: float = 0.5,
    epochs: int = 10,
    bc_epochs: int = 30,
    eval_episodes: int = 24,
    eval_steps: int = 1800,
    wm_steps: int = 300,
    speed: float = 8.0,
    bc: bool = True,
    world_model: bool = True,
    work: Path | None = None,
    log: Log | None = None,
    downscale: int = 2,
    window: int = 1,
    pool: str = "max+mean",
    lr_schedule: str = "cosine",
    jobs: int = 1,
    balance_buttons: bool = True,
    motion: bool = True,
    bc_seeds: int = 3,
) -> dict[str, Any]:
    """The figures over `seeds` seeds: per seed, and median/worst of the learning figures.
    `downscale`: of the recorded frames (of 90x160) and the IDM's (2: 45x80; 1: full size)."""
    say: Log = log or (lambda _msg: None)
    # absolute: MINARI_DATASETS_PATH points into it, and a relative one broke Minari's writes
    folder = (
        Path(work).resolve() if work is not None else Path(tempfile.mkdtemp(prefix="mb-video-"))
    )
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        with _minari_home(folder):
            kwargs: dict[str, Any] = dict(
                episodes=episodes,
                steps=steps,
                labelled_fraction=labelled_fraction,
                epochs=epochs,
                bc_epochs=bc_epochs,
                eval_episodes=eval_episodes,
                eval_steps=eval_steps,
                wm_steps=wm_steps,
                speed=speed,
                bc=bc,
                world_model=world_model,
                downscale=downscale,
                window=window,
                pool=pool,
                lr_schedule=lr_schedule,
                balance_buttons=balance_buttons,
                motion=motion,
                bc_seeds=bc_seeds,
            )
            if jobs <= 1 or seeds == 1:
                rows = [run_seed(seed, folder, log=say, **kwargs) for seed in range(seeds)]
            else:
                rows = _run_in_children(seeds, jobs, folder, kwargs, say)
    finally:
        if work is None:
            shutil.rmtree(folder, ignore_errors=True)
    result: dict[str, Any] = {
        "game": ENV_ID,
        "stand_in": "bonklink-sim --human scripted (not Megabonk)",
        "seeds": seeds,
        "episodes_per_seed": episodes,
        "steps_per_episode": steps,
        "labelled_fraction": labelled_fraction,
        "downscale": downscale,
        "window": window,
        "pool": pool,
        "lr_schedule": lr_schedule,
        "jobs": jobs,
        "balance_buttons": balance_buttons,
        "motion": motion,
        "bc_seeds": bc_seeds,
        "eval_episodes": eval_episodes,
        "seconds": round(time.monotonic() - started, 1),
        "per_seed": rows,
    }
    return result | _summaries(rows)


#: The per-seed figures `run` summarises over the seeds (median and worst).
SUMMARISED = (
    "move_within_22_5",
    "button_accuracy",
    "fire_accuracy",
    "ability_accuracy",
    "aim_within_22_5",
    "bc_survival_ratio",
    "bc_survival_idm_labels",
    "bc_survival_true_actions",
    "random_survival",
    "teacher_survival",
)


def _summaries(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """`summary` of each of `SUMMARISED` and of each predictor's PSNR that the seeds measured."""
    out = {key: summary(rows, key) for key in SUMMARISED}
    for name in ("world_model", "flow", "copy"):
        for k in (1, 2, 3):
            key = f"{name}_psnr_t{k}"
            if any(key in r for r in rows):
                out[key] = summary(rows, key)
    return out


#: Targets: the IDM's move direction and button accuracy, BC from its labels vs true actions.
IDM_TARGET = Target(">=", 0.9)
BC_RATIO_TARGET = Target(">=", 0.8, "x")


def _spread(stat: dict[str, Any], digits: int = 3) -> str:
    values = " / ".join(f"{v:.{digits}f}" for v in stat["values"])
    return f"median {stat['median']:.{digits}f}, worst {stat['worst']:.{digits}f} ({values})"


def figure_records(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s summary as records for `docs/figures/megabonk-video.json` (ids as there)."""
    rows: list[dict[str, Any]] = []
    for key, slug, name in (
        (
            "move_within_22_5",
            "idm-move",
            "Megabonk IDM on held-out videos of the stand-in, move within 22.5 deg (worst seed)",
        ),
        ("button_accuracy", "idm-buttons", "Megabonk IDM button accuracy (worst seed)"),
    ):
        if key in figures:
            stat = figures[key]
            rows.append({"id": slug, "name": name, "value": round(stat["worst"], 3), "unit": ""})
            rows[-1] |= {"text": _spread(stat)} | IDM_TARGET.record(stat["worst"])
    if "move_within_22_5" in figures:
        move = figures["move_within_22_5"]
        rows[0] |= {"headline": "Megabonk IDM from video: move within 22.5 deg"}
        rows[0]["short"] = f"{move['median']:.3f} median, {move['worst']:.3f} worst"
    if "bc_survival_ratio" in figures:
        ratio = figures["bc_survival_ratio"]
        name = "Megabonk BC survival from the videos' episodes, IDM labels / true actions"
        rows.append({"id": "bc-survival", "name": name, "value": round(ratio["worst"], 2)})
        rows[-1] |= {"unit": "x", "text": _spread(ratio, 2)} | BC_RATIO_TARGET.record(
            ratio["worst"]
        )
    kinds = ("world_model", "flow", "copy")
    if all(f"{k}_psnr_t{t}" in figures for k in kinds for t in (1, 3)):
        medians = {k: [figures[f"{k}_psnr_t{t}"]["median"] for t in (1, 3)] for k in kinds}
        text = "; ".join(
            f"{k.replace('_', ' ')} {a:.1f} / {b:.1f} dB" for k, (a, b) in medians.items()
        )
        name = "Megabonk world model vs flow vs copy, PSNR t+1 / t+3 (median over seeds)"
        value = round(medians["world_model"][0], 1)
        rows.append({"id": "world-model-psnr", "name": name, "value": value, "unit": "dB"})
        rows[-1] |= {"text": text, "target": None, "met": None}
    return rows
