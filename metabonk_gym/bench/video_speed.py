"""`metabonk bench video`: learning from the scripted experts' videos, with the actions hidden.

Per game (BonkQuest room 1, BonkArena): the scripted expert plays `episodes` episodes (a fraction
`noise` of its steps replaced by random actions, DART-style, so every action occurs). The first
`labelled_fraction` of the episodes are recorded as a Minari dataset with actions (full-size
frames); the IDM trains on them. The rest are written as H.264 mp4 files only (their true actions
kept aside), converted with `to_dataset` and labelled with `label`. Figures:

* `idm_accuracy`: per-step accuracy of the labels against the hidden true actions, and apart on
  steps whose true action is not the no-op (`idm_accuracy_not_noop`) and on no-op steps, so a
  model that always says no-op cannot pass (target >= 0.9 on each game), and apart on steps
  where the player moved or turned (`idm_accuracy_player_moved`, from the game's variables) and
  where it did not (an action without a visible effect cannot be told from the video);
* `label_frames_per_s`: `label`'s throughput on this CPU;
* `reward_spearman`: a temporal-ranking reward model trained on half the video episodes, its
  score's Spearman correlation with the game's progress (BonkQuest: quest stage, rooms, keys;
  BonkArena: survival seconds) on the other half;
* BonkQuest only, with `bc`: BC from the IDM's labels vs BC from the true actions of the same
  video episodes, mean return of each clone over `eval_episodes` (target: ratio >= 0.8), greedy
  and sampled; the figure uses the mode in which the true-label clone does best. A video shows
  the actions taken, random ones included, so both clones learn the noisy policy.

Defaults (`EPISODES`) take ~15 minutes on 2 cores; `--episodes` and `--epochs` scale it.

>>> progress({"quest_stage": 1, "rooms_visited": 2, "keys": 1}, "BonkQuest")
121.0
>>> demo = {"noise": 0.0, "BonkQuest": {"idm_accuracy": 0.9996, "bc_ratio": 0.98,
...         "bc_return_idm_labels": 4.365, "bc_return_true_labels": 4.468,
...         "bc_win_rate_idm_labels": 0.9, "bc_win_rate_true_labels": 1.0}}
>>> [(r["id"], r["met"]) for r in figure_records(demo)]
[('idm-accuracy', True), ('bc-from-idm', True)]
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import metabonk_gym  # noqa: F401  (registers the envs)
from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.agents.registry import make_agent
from metabonk_gym.bench.figures import Target
from metabonk_gym.experts.base import close_agent
from metabonk_gym.learned.scorer import RewardModel
from metabonk_gym.registration import env_traits
from metabonk_gym.training.bc import train_bc
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.datasets import DatasetWriter, load_dataset
from metabonk_gym.training.envs import convert_frames, make_env
from metabonk_gym.training.rollout import Trajectory, run_episode
from metabonk_gym.training.video import Mp4Stream
from metabonk_gym.utils import Log
from metabonk_gym.video.dataset import to_dataset
from metabonk_gym.video.idm import evaluate_predictions, train_idm
from metabonk_gym.video.label import label, spec_env
from metabonk_gym.video.reward import spearman, train_reward_model

QUEST = "MetaBonk/BonkQuest-v0"
ARENA = "MetaBonk/BonkArena-v0"
#: Per game: the env overrides of the benchmark's episodes.
GAMES: dict[str, dict[str, Any]] = {
    QUEST: {"state": "room1", "max_episode_steps": 200},
    ARENA: {"max_episode_steps": 200},
}
#: Per game: expert episodes by default (room 1 takes ~30 steps, an arena episode 200), so that
#: 10% of them give the IDM about 1,000 steps with actions.
EPISODES: dict[str, int] = {QUEST: 300, ARENA: 50}
FULL = {"obs_type": "rgb", "downscale": 1}
#: Targets: the IDM's per-step accuracy on every game, BC from its labels vs the true actions.
IDM_TARGET = Target(">=", 0.9, suffix=" on each game")
BC_TARGET = Target(">=", 0.8, "x")


def progress(info: dict[str, Any], game: str) -> float:
    """The game's progress variable at a step."""
    if game == "BonkQuest":
        return float(
            100 * info.get("quest_stage", 0)
            + 10 * info.get("rooms_visited", 0)
            + info.get("keys", 0)
        )
    return float(info.get("time_s", 0.0))


#: Game variables that an action visibly changes (the player's place and facing).
PLAYER_VARIABLES = ("player_x", "player_y", "facing")


def effective(infos: list[dict[str, Any]]) -> np.ndarray:
    """Per step: whether the player's variables changed (the action had a visible effect).

    >>> effective([{"player_x": 1}, {"player_x": 2}, {"player_x": 2}]).tolist()
    [True, False]
    """
    keys = [k for k in PLAYER_VARIABLES if k in infos[0]]
    rows = np.asarray([[float(i.get(k, 0)) for k in keys] for i in infos])
    return np.any(rows[1:] != rows[:-1], axis=1)


def _episodes(
    env_id: str, n: int, noise: float, labelled: int, folder: Path, dataset_id: str, log: Log
) -> list[dict[str, Any]]:
    """Play `n` expert episodes: the first `labelled` into the dataset, the rest into mp4s."""
    cfg = resolve_config(env_id, overrides={**GAMES[env_id], **FULL})
    env = make_env(env_id, cfg)
    agent = make_agent("scripted", env, seed=0)
    writer = DatasetWriter(dataset_id, env, algorithm_name="metabonk:scripted")
    rate = float(env.metadata.get("render_fps", 60)) / cfg.frameskip
    game = env_traits(env_id).game or env_id
    hidden = []
    try:
        for i in range(n):
            traj = Trajectory()
            if i < labelled:
                run_episode(env, agent, index=i, seed=i, trajectory=traj, noise=noise)
                writer.add(traj, seed=i)
                continue
            stream = Mp4Stream(folder / f"episode_{i:04d}.mp4", rate)
            try:
                result = run_episode(
                    env, agent, index=i, seed=i, trajectory=traj, on_frame=stream.add, noise=noise
                )
            finally:
                stream.close()
            hidden.append(
                {
                    "video": stream.path,
                    "actions": np.asarray(traj.actions, np.int64),
                    "progress": np.asarray([progress(x, game) for x in traj.infos]),
                    "effective": effective(traj.infos),
                    "return": result.ret,
                }
            )
    finally:
        writer.close()
        close_agent(agent)
        env.close()
    log(f"{env_id}: {labelled} labelled episodes, {len(hidden)} videos")
    return hidden


def _bc_compare(
    work: Path,
    videos: Any,
    hidden: list[dict[str, Any]],
    labelled_id: str,
    eval_episodes: int,
    bc_epochs: int,
    log: Log,
) -> dict[str, Any]:
    """BC on the IDM's labels vs on the true actions of the same frames; mean eval return."""
    cfg = resolve_config(QUEST, overrides=GAMES[QUEST])
    kind, k = cfg.obs_type, cfg.downscale
    h, w = (int(v) for v in videos.index["screen"])
    env = spec_env(
        QUEST,
        gym.spaces.Box(0, 255, (h // k, w // k, 1 if kind == "grayscale" else 3), np.uint8),
        gym.spaces.Discrete(6),
        frameskip=cfg.frameskip,
        obs_type=kind,
        downscale=k,
    )
    true_id = labelled_id.replace("-labelled-", "-true-")
    writer = DatasetWriter(true_id, env, algorithm_name="metabonk:true-actions")
    for i, episode in enumerate(hidden):
        frames = convert_frames(videos.frames(i), ("rgb", 1), (kind, k))
        n = len(episode["actions"])
        writer.add(
            Trajectory(
                observations=list(frames),
                actions=[int(a) for a in episode["actions"]],
                rewards=[0.0] * n,
                terminations=[False] * n,
                truncations=[False] * (n - 1) + [True],
                infos=[{}] * (n + 1),
            )
        )
    writer.close()
    returns: dict[str, dict[str, float]] = {}
    for name, dataset_id in (("idm_labels", labelled_id), ("true_labels", true_id)):
        run = work / f"bc_{name}"
        result = train_bc(
            QUEST, dataset_id, run, overrides={**GAMES[QUEST], "bc_epochs": bc_epochs}
        )
        for mode, deterministic in (("greedy", True), ("sampled", False)):
            report = evaluate(
                QUEST,
                str(result.model_path),
                episodes=eval_episodes,
                seed=10_000,
                overrides=GAMES[QUEST],
                deterministic=deterministic,
            )
            returns[f"{name}_{mode}"] = {
                "return": float(report["mean_return"]),
                "win_rate": float(report.get("win_rate", math.nan)),
            }
            log(f"BC from {name}, {mode}: mean return {report['mean_return']:.3f}")
    out: dict[str, Any] = {}
    for mode in ("greedy", "sampled"):
        idm, true = returns[f"idm_labels_{mode}"], returns[f"true_labels_{mode}"]
        out[f"bc_{mode}"] = {
            "return_idm_labels": idm["return"],
            "return_true_labels": true["return"],
            "win_rate_idm_labels": idm["win_rate"],
            "win_rate_true_labels": true["win_rate"],
            "ratio": idm["return"] / true["return"] if true["return"] > 0 else math.nan,
        }
    # the figure's mode is the one where the reference (true-label) clone does best, chosen
    # without looking at the IDM-label clone
    mode = max(("greedy", "sampled"), key=lambda m: out[f"bc_{m}"]["return_true_labels"])
    figure = out[f"bc_{mode}"]
    return {
        **out,
        "bc_mode": mode,
        "bc_return_idm_labels": figure["return_idm_labels"],
        "bc_return_true_labels": figure["return_true_labels"],
        "bc_win_rate_idm_labels": figure["win_rate_idm_labels"],
        "bc_win_rate_true_labels": figure["win_rate_true_labels"],
        "bc_ratio": figure["ratio"],
        "passed_bc": BC_TARGET.met(figure["ratio"]),
    }


def run_game(
    env_id: str,
    work: Path,
    *,
    episodes: int | None = None,
    labelled_fraction: float = 0.1,
    epochs: int = 15,
    window: int = 1,
    noise: float = 0.25,
    bc: bool = True,
    bc_epochs: int = 100,
    eval_episodes: int = 20,
    log: Log = print,
) -> dict[str, Any]:
    """The figures of one game (see the module's docstring)."""
    game = env_traits(env_id).game or env_id
    tag = game.lower()
    episodes = episodes or EPISODES.get(env_id, 20)
    labelled = max(1, int(round(episodes * labelled_fraction)))
    if episodes - labelled < 2:
        raise ValueError(
            f"--episodes {episodes} leaves fewer than 2 videos besides the labelled ones"
        )
    started = time.monotonic()
    hidden = _episodes(
        env_id, episodes, noise, labelled, work / f"{tag}_videos", f"bench/{tag}-actions-v0", log
    )
    idm_dir = work / f"{tag}_idm"
    idm = train_idm(
        [f"bench/{tag}-actions-v0"],
        idm_dir,
        window=window,
        epochs=epochs,
        learning_rate=2e-3,
        val_fraction=0.0,
        log=log,
    )
    videos = to_dataset([h["video"] for h in hidden], env_id, work / f"{tag}_video_dataset")
    labelled_id = f"bench/{tag}-labelled-v0"
    result = label(videos, idm_dir, labelled_id)
    out: dict[str, Any] = {"episodes": episodes, "labelled_episodes": labelled}
    out |= _idm_figures(idm, idm_dir, videos, hidden, labelled_id, result)
    out |= _reward_figures(work / tag, env_id, videos, hidden, epochs, log)
    if bc and game == "BonkQuest":
        out.update(_bc_compare(work, videos, hidden, labelled_id, eval_episodes, bc_epochs, log))
    out["seconds"] = round(time.monotonic() - started, 1)
    return out


def _idm_figures(
    idm: Any,
    idm_dir: Path,
    videos: Any,
    hidden: list[dict[str, Any]],
    labelled_id: str,
    result: Any,
) -> dict[str, Any]:
    """The IDM's figures: its labels of the hidden videos (`labelled_id`, made by `label`:
    `result`) against the true actions, overall, per action and button, moved and still."""
    predicted = np.concatenate(
        [np.asarray(e.actions) for e in load_dataset(labelled_id).iterate_episodes()]
    )
    true = np.concatenate([h["actions"] for h in hidden])
    moving = np.concatenate(
        [
            np.abs(np.diff(videos.frames(i).astype(np.int16), axis=0))
            .reshape(len(h["actions"]), -1)
            .max(1)
            > 8
            for i, h in enumerate(hidden)
        ]
    )
    meta = idm.metrics
    names = tuple(json_names(idm_dir))
    figures = evaluate_predictions(
        predicted, true, moving, names, names.index("noop") if "noop" in names else None
    )
    moved = np.concatenate([h["effective"] for h in hidden])
    figures_effective = evaluate_predictions(
        predicted[moved], true[moved], moving[moved], names, None
    )
    figures_still = evaluate_predictions(
        predicted[~moved], true[~moved], moving[~moved], names, None
    )
    return {
        "idm_train_steps": idm.train_steps,
        "idm_obs": json.loads((idm_dir / "idm.json").read_text())["obs"],
        "video_steps": int(len(true)),
        "idm_accuracy": figures["accuracy"],
        "idm_accuracy_not_noop": figures.get("accuracy_not_noop"),
        "idm_accuracy_noop": figures.get("accuracy_noop"),
        "noop_fraction": figures.get("noop_fraction"),
        "idm_accuracy_player_moved": figures_effective["accuracy"],
        "idm_accuracy_player_still": figures_still["accuracy"],
        "player_moved_fraction": float(np.mean(moved)),
        "idm_per_action": figures["per_action"],
        "idm_per_button": figures["per_button"],
        "idm_confusion": figures["confusion"],
        "idm_heldout_accuracy_in_training": meta.get("accuracy"),
        "passed_idm": IDM_TARGET.met(figures["accuracy"] or 0),
        "label_frames_per_s": result.frames_per_s,
        "label_low_confidence_fraction": result.low_confidence_steps / max(result.steps, 1),
    }


def _reward_figures(
    prefix: Path, env_id: str, videos: Any, hidden: list[dict[str, Any]], epochs: int, log: Log
) -> dict[str, Any]:
    """A reward model trained on the first half of the hidden videos (files under `prefix`_*),
    scored by its Spearman correlation with the progress of the other half."""
    half = max(1, len(hidden) // 2)
    rm_dir = Path(f"{prefix}_reward")
    train_sub = Path(f"{prefix}_reward_videos")
    to_dataset([h["video"] for h in hidden[:half]], env_id, train_sub, check=False)
    train_reward_model([train_sub], rm_dir, epochs=max(1, epochs // 3), log=log)
    model = RewardModel(rm_dir)
    correlations = [
        spearman(model.scores(videos.frames(i)), h["progress"])
        for i, h in enumerate(hidden)
        if i >= half and np.ptp(h["progress"]) > 0
    ]
    return {
        "reward_spearman": float(np.mean(correlations)) if correlations else None,
        "reward_eval_episodes": len(correlations),
    }


def json_names(idm_dir: Path) -> list[str]:
    return list(json.loads((idm_dir / "idm.json").read_text())["action_names"])


def run(
    *,
    episodes: int | None = None,
    labelled_fraction: float = 0.1,
    epochs: int = 15,
    window: int = 1,
    noise: float = 0.25,
    bc: bool = True,
    games: tuple[str, ...] = (QUEST, ARENA),
    work: Path | None = None,
    log: Log = print,
) -> dict[str, Any]:
    """Every game's figures; datasets go to a private Minari folder under `work` (a temporary
    folder unless given)."""
    import os

    tmp = None
    if work is None:
        tmp = tempfile.mkdtemp(prefix="metabonk-bench-video-")
        work = Path(tmp)
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(work / "minari")
    try:
        results: dict[str, Any] = {
            "noise": noise,
            "labelled_fraction": labelled_fraction,
            "idm_window": window,
        }
        for env_id in games:
            results[env_traits(env_id).game or env_id] = run_game(
                env_id,
                work,
                episodes=episodes,
                labelled_fraction=labelled_fraction,
                epochs=epochs,
                window=window,
                noise=noise,
                bc=bc,
                log=log,
            )
        return results
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s figures as records for `docs/figures/video.json` (ids as there; BC from videos
    with random steps is `bc-from-idm-noisy`, from clean ones `bc-from-idm`)."""
    games = {k: v for k, v in result.items() if isinstance(v, dict) and "idm_accuracy" in v}
    if not games:
        return []
    accuracy = {g: float(v["idm_accuracy"] or 0.0) for g, v in games.items()}
    name = "IDM per-step accuracy on expert videos, " + " / ".join(games)
    text = " / ".join(f"{a:.3f}" for a in accuracy.values())
    worst = min(accuracy.values())
    rows = [
        {"id": "idm-accuracy", "name": name, "value": round(worst, 3), "unit": "", "text": text}
    ]
    rows[0] |= IDM_TARGET.record(worst)
    for game, figures in games.items():
        if "bc_ratio" not in figures:
            continue
        ratio, clean = figures["bc_ratio"], result.get("noise", 0.25) == 0
        slug = "bc-from-idm" if clean else "bc-from-idm-noisy"
        videos = (
            "clean expert videos" if clean else f"videos with {result['noise']:.0%} random steps"
        )
        name = f"BC from IDM labels vs from the true actions, {game}, {videos}"
        text = f"{ratio:.2f}x (return {figures['bc_return_idm_labels']:.3f} vs "
        text += f"{figures['bc_return_true_labels']:.3f}; win rate "
        text += (
            f"{figures['bc_win_rate_idm_labels']:.2f} vs {figures['bc_win_rate_true_labels']:.2f})"
        )
        rows.append({"id": slug, "name": name, "value": round(ratio, 3), "unit": "x", "text": text})
        rows[-1] |= BC_TARGET.record(ratio)
    spearman = {g: v.get("reward_spearman") for g, v in games.items()}
    if all(s is not None for s in spearman.values()):
        speed = " / ".join(f"{v['label_frames_per_s']:.0f}" for v in games.values())
        text = " / ".join(f"{s:.2f}" for s in spearman.values()) + f"; {speed} frames/s"
        name = "learned reward vs progress (Spearman), " + " / ".join(games) + "; `label` frames/s"
        value = round(min(float(s) for s in spearman.values() if s is not None), 3)
        rows.append(
            {"id": "learned-reward", "name": name, "value": value, "unit": "", "text": text}
        )
        rows[-1] |= {"target": None, "met": None}
    return rows
