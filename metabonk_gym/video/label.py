"""`label`: a video dataset with the IDM's actions becomes a Minari dataset `train bc` can clone.

Each video is one episode: its frames (converted to the training config's observation, or to
`obs_type`/`downscale`), the IDM's most likely action per step, and per step the IDM's
confidence (the probability of that action; for Box actions, the decoded sticks and buttons
with the probability of the least sure button) in `infos["idm_confidence"]`, with
`infos["low_confidence"]` set where it is under `threshold`: flagged, never dropped. With a
reward model (`metabonk_gym.video.reward`), rewards are its progress differences; else 0. The
last step of a video is marked truncated (a video's end says nothing about the game's end).

>>> confidence_flags(np.array([[0.9, 0.1], [0.4, 0.6]]), 0.5)
(array([0, 1]), array([0.9, 0.6]), array([False, False]))
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.registration import env_traits, short_id
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.datasets import (
    DatasetWriter,
    check_dataset_id,
    dataset_env_kwargs,
    load_dataset,
)
from metabonk_gym.training.envs import convert_frames
from metabonk_gym.training.errors import DatasetError
from metabonk_gym.training.rollout import Trajectory
from metabonk_gym.training.safeload import SpacesEnv
from metabonk_gym.utils import Log
from metabonk_gym.video.dataset import VideoDataset
from metabonk_gym.video.idm import Idm


def confidence_flags(
    probabilities: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(actions, confidences, low-confidence flags) of per-step action probabilities."""
    actions = probabilities.argmax(axis=1)
    confidence = probabilities[np.arange(len(actions)), actions]
    return actions, confidence, confidence < threshold


@dataclass
class LabelResult:
    """What `label` wrote: the dataset, its size, how many steps were flagged, the speed."""

    dataset_id: str
    dataset_path: Path | None
    episodes: int
    steps: int
    low_confidence_steps: int
    mean_confidence: float
    frames_per_s: float

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "dataset_path": str(self.dataset_path)}


def target_obs(env_id: str, obs_type: str | None, downscale: int | None) -> tuple[str, int]:
    """The observation a labelled dataset stores: given, else the training config's (grayscale
    for a config that trains on state vectors)."""
    cfg = resolve_config(env_id)
    kind = obs_type or (cfg.obs_type if cfg.obs_type != "state" else "grayscale")
    return kind, int(downscale or cfg.downscale)


def spec_env(env_id: str, obs_space: gym.Space, action_space: gym.Space, **kwargs: Any) -> gym.Env:
    """An env with only spaces and a spec naming `env_id` with `kwargs` (what Minari stores),
    so a labelled dataset is checked by `train bc` like a recorded one; no game starts."""
    env = SpacesEnv(obs_space, action_space)
    spec = gym.spec(short_id(env_id))
    env.spec = dataclasses.replace(spec, kwargs={**(spec.kwargs or {}), **kwargs})
    return env


def label(
    video_dataset: str | Path | VideoDataset,
    idm: str | Path | Idm,
    out: str,
    *,
    threshold: float = 0.6,
    obs_type: str | None = None,
    downscale: int | None = None,
    reward_model: str | Path | None = None,
    log: Log | None = None,
) -> LabelResult:
    """Label `video_dataset` with `idm` into the new Minari dataset id `out`."""
    check_dataset_id(out)
    videos = (
        video_dataset if isinstance(video_dataset, VideoDataset) else VideoDataset(video_dataset)
    )
    model = idm if isinstance(idm, Idm) else Idm(idm)
    model.check_game(videos.game, videos.env_id, f"video dataset {videos.path}")
    scorer = None
    if reward_model is not None:
        from metabonk_gym.learned.scorer import RewardModel

        scorer = RewardModel(reward_model)
        scorer.check_game(videos.game, f"video dataset {videos.path}")
    kind, k = target_obs(videos.env_id, obs_type, downscale)
    h, w = (int(v) for v in videos.index["screen"])
    channels = 1 if kind == "grayscale" else 3
    obs_space = gym.spaces.Box(0, 255, (h // k, w // k, channels), np.uint8)
    env = spec_env(
        videos.env_id,
        obs_space,
        model.action_space(),
        frameskip=int(videos.index.get("frameskip", 4)),
        obs_type=kind,
        downscale=k,
    )
    writer = DatasetWriter(out, env, algorithm_name="metabonk:idm-label")
    low = steps = 0
    confidences: list[float] = []
    started = time.monotonic()
    try:
        for i in range(len(videos)):
            frames = videos.frames(i)
            actions, confidence = model.predict(frames)
            flags = confidence < threshold
            rewards = np.zeros(len(actions))
            if scorer is not None:
                rewards = np.diff(scorer.scores(frames))
            traj = Trajectory(
                observations=list(convert_frames(frames, ("rgb", 1), (kind, k))),
                actions=[int(a) for a in actions]
                if model.layout is None
                else [np.asarray(a, np.float32) for a in actions],
                rewards=[float(r) for r in rewards],
                terminations=[False] * len(actions),
                truncations=[False] * (len(actions) - 1) + [True],
                infos=[{"idm_confidence": 1.0, "low_confidence": False, "frame": 0}]
                + [
                    {"idm_confidence": float(c), "low_confidence": bool(f), "frame": t + 1}
                    for t, (c, f) in enumerate(zip(confidence, flags))
                ],
            )
            writer.add(traj, seed=None)
            steps += len(actions)
            low += int(flags.sum())
            confidences.extend(confidence.tolist())
            if log is not None:
                log(
                    f"video {i + 1}/{len(videos)}: {len(actions)} steps, "
                    f"{int(flags.sum())} under confidence {threshold}"
                )
    except BaseException:
        shutil.rmtree(writer.staging, ignore_errors=True)  # nothing half-labelled is published
        raise
    path = writer.close()
    seconds = max(time.monotonic() - started, 1e-9)
    return LabelResult(
        dataset_id=out,
        dataset_path=path,
        episodes=writer.episodes,
        steps=steps,
        low_confidence_steps=low,
        mean_confidence=float(np.mean(confidences)) if confidences else float("nan"),
        frames_per_s=(steps + len(videos)) / seconds,
    )


def relabel_dataset(
    dataset_id: str,
    idm: str | Path | Idm | None,
    out: str,
    *,
    threshold: float = 0.6,
    state_only: bool = False,
    log: Log | None = None,
) -> LabelResult:
    """The Minari dataset `dataset_id` with its actions hidden and replaced by `idm`'s labels of
    its frames, into the new dataset `out` (its observations kept; `state_only`: only the
    `state` part of Dict(pixels, state) observations, for a policy on the state vector).

    A video has no game state, so a game whose pixel observations come with a state vector
    (Megabonk's Dict(pixels, state)) cannot be cloned from labelled videos alone; this labels
    recordings of it instead, the actions never seen, which is what BC from IDM labels needs.
    `idm=None` keeps the true actions (the same copy, the baseline BC is compared with).
    """
    check_dataset_id(out)
    model = idm if isinstance(idm, Idm) or idm is None else Idm(idm)
    dataset = load_dataset(dataset_id)
    kwargs = dict(dataset_env_kwargs(dataset))
    env_id = str(kwargs.pop("env_id", ""))
    game = env_traits(env_id).game or short_id(env_id) if env_id else "unknown"
    if model is not None:
        model.check_game(game, env_id, f"dataset {dataset_id}")
    source = (str(kwargs.get("obs_type", "rgb")), int(kwargs.get("downscale", 1)))
    obs_space = dataset.spec.observation_space
    if state_only:
        if not isinstance(obs_space, gym.spaces.Dict) or "state" not in obs_space.spaces:
            raise DatasetError(f"dataset {dataset_id} has no Dict(pixels, state) observations")
        obs_space = obs_space["state"]
        kwargs["obs_type"] = "state"
    kwargs.pop("render_mode", None)
    action_space = dataset.spec.action_space if model is None else model.action_space()
    env = spec_env(env_id, obs_space, action_space, **kwargs)
    writer = DatasetWriter(out, env, algorithm_name="metabonk:idm-relabel")
    low = steps = 0
    confidences: list[float] = []
    started = time.monotonic()
    try:
        for i, episode in enumerate(dataset.iterate_episodes()):
            if len(episode.actions) == 0:
                continue
            observations = episode.observations
            frames = observations["pixels"] if isinstance(observations, dict) else observations
            if model is None:
                actions = np.asarray(episode.actions)
                confidence = np.ones(len(actions))
            else:
                actions, confidence = model.predict(np.asarray(frames), source)
            flags = confidence < threshold
            if state_only:
                kept = list(np.asarray(observations["state"]))
            elif isinstance(observations, dict):
                kept = [
                    {k: np.asarray(v[t]) for k, v in observations.items()}
                    for t in range(len(actions) + 1)
                ]
            else:
                kept = list(np.asarray(observations))
            traj = Trajectory(
                observations=kept,
                actions=[int(a) for a in actions]
                if actions.ndim == 1
                else [np.asarray(a, np.float32) for a in actions],
                rewards=[float(r) for r in episode.rewards],
                terminations=[bool(t) for t in episode.terminations],
                truncations=[bool(t) for t in episode.truncations],
                infos=[{"idm_confidence": 1.0, "low_confidence": False}]
                + [
                    {"idm_confidence": float(c), "low_confidence": bool(f)}
                    for c, f in zip(confidence, flags)
                ]
                if model is not None
                else [{} for _ in range(len(actions) + 1)],
            )
            writer.add(traj, seed=None)
            steps += len(actions)
            low += int(flags.sum())
            confidences.extend(confidence.tolist())
            if log is not None:
                log(f"episode {i + 1}: {len(actions)} steps, {int(flags.sum())} low confidence")
    except BaseException:
        shutil.rmtree(writer.staging, ignore_errors=True)
        raise
    path = writer.close()
    seconds = max(time.monotonic() - started, 1e-9)
    return LabelResult(
        dataset_id=out,
        dataset_path=path,
        episodes=writer.episodes,
        steps=steps,
        low_confidence_steps=low,
        mean_confidence=float(np.mean(confidences)) if confidences else float("nan"),
        frames_per_s=steps / seconds,
    )
