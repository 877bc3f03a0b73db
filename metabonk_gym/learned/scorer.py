"""Loading a reward model of `metabonk train reward` and scoring frames with it (weights only).

Split from `metabonk_gym.video.reward` (training) so that scoring needs torch, the preprocessing
and the model files, and nothing of the training machinery.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     RewardModel(tmp)
Traceback (most recent call last):
...
metabonk_gym.errors.ModelFileError: reward model not found: need .../reward_model.pt and .../reward_model.json
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from metabonk_gym.errors import ModelFileError
from metabonk_gym.learned.model import IdmNet, frames_tensor, load_state, read_metadata
from metabonk_gym.preprocess import screen

REWARD_NAME = "reward_model"


def score_frames(net: Any, frames: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """The net's score of each frame (already in the model's obs format)."""
    out = []
    with torch.no_grad():
        for start in range(0, len(frames), batch_size):
            out.append(net(frames_tensor(frames[start : start + batch_size])).squeeze(1).numpy())
    return np.concatenate(out).astype(np.float64) if out else np.zeros(0)


class RewardModel:
    """A trained progress score loaded from its files (weights only).

    Args:
        path: the model folder (`train_reward_model`'s `out`), or its .pt/.json path.
    """

    def __init__(self, path: str | Path) -> None:
        self.meta = read_metadata(path, REWARD_NAME, "reward")
        try:
            self.obs = (str(self.meta["obs"]["obs_type"]), int(self.meta["obs"]["downscale"]))
            channels = int(self.meta["obs"]["shape"][-1])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ModelFileError(f"reward model metadata of {path} is incomplete: {exc}") from None
        self.net = IdmNet(1, channels, 1)
        load_state(path, REWARD_NAME, self.net)
        self.net.eval()

    @property
    def game(self) -> str:
        return str(self.meta["game"])

    def check_game(self, game: str, what: str) -> None:
        if game != self.game:
            raise ModelFileError(
                f"the reward model was trained on {self.game}, {what} is of {game}; train one "
                f"on {game} videos"
            )

    def scores(self, frames: np.ndarray) -> np.ndarray:
        """Scores (T,) of full-size RGB frames (T, H, W, 3)."""
        return score_frames(self.net, screen(np.asarray(frames), self.obs[0], self.obs[1]))

    def score(self, frame: np.ndarray) -> float:
        return float(self.scores(np.asarray(frame)[None])[0])
