"""A reward from video: a progress score of single frames learned by temporal ranking.

Within an episode of successful play, a later frame shows more progress than an earlier one;
`train_reward_model` fits a score s(frame) so that s(later) > s(earlier) for random pairs of the
same episode (a logistic loss on the score difference, as in T-REX's ranking). Episodes come
from video datasets (taken to show successful play) and Minari datasets (only episodes that
ended in success, `won` or `success` in the last info, unless `successful_only=False`). The
score's change is a reward term (`{"type": "learned", "model": PATH}`, bound to an env's screen
by `metabonk_gym.learned.bind.bind_learned_terms`) and a `metabonk label --reward-model` reward;
`metabonk_gym.learned.scorer.RewardModel` loads it.

>>> spearman(np.array([1.0, 2.0, 3.0]), np.array([10.0, 30.0, 20.0]))
0.5
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.errors import ModelFileError
from metabonk_gym.registration import env_traits, short_id
from metabonk_gym.training.datasets import dataset_env_kwargs, load_dataset
from metabonk_gym.training.envs import convert_frames
from metabonk_gym.training.errors import DatasetError
from metabonk_gym.utils import Log
from metabonk_gym.video.dataset import INDEX, VideoDataset


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (ties get their mean rank)."""
    from scipy.stats import spearmanr

    return round(float(spearmanr(a, b).statistic), 6)


def _success(infos: dict[str, Any]) -> bool:
    for key in ("success", "won"):
        values = infos.get(key)
        if values is not None and len(values) and bool(np.asarray(values)[-1]):
            return True
    return False


def ranking_episodes(
    sources: Sequence[str | Path], obs: tuple[str, int], successful_only: bool = True
) -> tuple[str, list[np.ndarray]]:
    """(env id, frames per episode converted to `obs`) of video dataset folders and Minari ids."""
    env_id = ""
    episodes: list[np.ndarray] = []
    for source in sources:
        if (Path(source).expanduser() / INDEX).is_file():
            videos = VideoDataset(source)
            this = videos.env_id
            episodes.extend(convert_frames(f, ("rgb", 1), obs) for f in videos.iter_frames())
        else:
            dataset = load_dataset(str(source))
            kwargs = dataset_env_kwargs(dataset)
            this = short_id(str(kwargs.get("env_id", "")))
            src = (str(kwargs.get("obs_type", "rgb")), int(kwargs.get("downscale", 1)))
            for episode in dataset.iterate_episodes():
                if successful_only and not _success(episode.infos or {}):
                    continue
                episodes.append(convert_frames(np.asarray(episode.observations), src, obs))
        if env_id and this != env_id:
            raise DatasetError(f"{source} is of {this}, the first source of {env_id}; one env")
        env_id = env_id or this
    episodes = [e for e in episodes if len(e) >= 2]
    if not episodes:
        raise DatasetError(
            "no episode to rank: give video datasets, or Minari datasets with successful "
            "episodes (or successful_only=False)"
        )
    return env_id, episodes


@dataclass
class RewardResult:
    """Where the reward model went, and its held-out rank correlation with time."""

    model_path: Path
    metrics: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"model_path": str(self.model_path), **self.metrics}


def train_reward_model(
    sources: Sequence[str | Path],
    out: str | Path,
    *,
    obs_type: str = "grayscale",
    downscale: int = 4,
    pairs_per_epoch: int = 2048,
    epochs: int = 10,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    val_fraction: float = 0.2,
    successful_only: bool = True,
    seed: int = 0,
    threads: int = 1,
    log: Log | None = None,
) -> RewardResult:
    """Fit the ranking score on `sources` into folder `out` (reward_model.pt + .json)."""
    import torch

    from metabonk_gym.learned.model import IdmNet, frames_tensor, save_model_files
    from metabonk_gym.learned.scorer import REWARD_NAME, score_frames

    out = Path(out).expanduser()
    if (out / f"{REWARD_NAME}.pt").exists():
        raise ModelFileError(f"{out} already holds a reward model; pick a new --out folder")
    env_id, episodes = ranking_episodes(sources, (obs_type, downscale), successful_only)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    order = rng.permutation(len(episodes))
    n_val = max(1, int(round(len(order) * val_fraction))) if len(order) >= 2 else 0
    val = [episodes[i] for i in order[:n_val]]
    train = [episodes[i] for i in order[n_val:]]
    shape = train[0].shape[1:]
    net = IdmNet(1, int(shape[-1]), 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=learning_rate)
    started = time.monotonic()
    for epoch in range(epochs):
        net.train()
        total = 0.0
        for _ in range(max(1, pairs_per_epoch // batch_size)):
            picks = rng.integers(len(train), size=batch_size)
            early, late = [], []
            for e in picks:
                i, j = np.sort(rng.choice(len(train[e]), 2, replace=False))
                early.append(train[e][i])
                late.append(train[e][j])
            scores = net(frames_tensor(np.stack(early + late))).squeeze(1)
            loss = torch.nn.functional.softplus(scores[:batch_size] - scores[batch_size:]).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        if log is not None:
            log(
                f"epoch {epoch + 1}/{epochs}: ranking loss {total / max(1, pairs_per_epoch // batch_size):.3f}"
            )
    net.eval()
    correlations = [
        spearman(score_frames(net, e), np.arange(len(e), dtype=float)) for e in val if len(e) > 2
    ]
    metrics = {
        "val_spearman_time": float(np.mean(correlations)) if correlations else None,
        "train_seconds": round(time.monotonic() - started, 2),
        "episodes": len(episodes),
    }
    meta = {
        "kind": "reward",
        "game": env_traits(env_id).game or env_id,
        "env_id": env_id,
        "obs": {"obs_type": obs_type, "downscale": downscale, "shape": [int(v) for v in shape]},
        "sources": [str(s) for s in sources],
        "metrics": metrics,
    }
    return RewardResult(save_model_files(out / REWARD_NAME, net, meta), metrics)
