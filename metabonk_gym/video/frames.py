"""Frame windows around each step: the input of the inverse dynamics model.

Step t of an episode (the action between frames t and t+1) sees frames t-k .. t+k+1, clipped at
the episode's ends (the edge frame repeats): VPT's non-causal window. Episodes are kept as one
array of frames and an index array per window, so a batch is one fancy-indexing copy.

>>> window_indices(np.arange(4), k=1).tolist()
[[0, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 3]]
"""

from __future__ import annotations

import numpy as np


def window_indices(frame_ids: np.ndarray, k: int) -> np.ndarray:
    """For an episode's frame ids (T+1 of them), the (T, 2k+2) ids of each step's window."""
    n = len(frame_ids)
    steps = np.arange(n - 1)[:, None]
    offsets = np.arange(-k, k + 2)[None, :]
    return np.asarray(frame_ids)[np.clip(steps + offsets, 0, n - 1)]


class Windows:
    """Episodes of frames (each (T+1, H, W, C) uint8) and every step's window of frame ids.

    Args:
        k: frames each side of a step (the window holds 2k+2 frames).
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self._frames: list[np.ndarray] = []
        self._ids: list[np.ndarray] = []
        self._episode: list[np.ndarray] = []
        self._count = 0
        self.frames = np.zeros((0, 0, 0, 0), np.uint8)
        self.ids = np.zeros((0, 2 * k + 2), np.int64)
        self.episode = np.zeros(0, np.int64)

    def add(self, frames: np.ndarray) -> None:
        """Append one episode's frames (at least 2)."""
        ids = np.arange(self._count, self._count + len(frames))
        self._frames.append(np.asarray(frames, np.uint8))
        self._ids.append(window_indices(ids, self.k))
        self._episode.append(np.full(len(frames) - 1, len(self._ids) - 1))
        self._count += len(frames)

    def build(self) -> Windows:
        self.frames = np.concatenate(self._frames)
        self.ids = np.concatenate(self._ids)
        self.episode = np.concatenate(self._episode)
        self._frames = []
        return self

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, rows: np.ndarray) -> np.ndarray:
        """(B, 2k+2, H, W, C) uint8 windows of the given steps."""
        return self.frames[self.ids[rows]]

    def moving(self) -> np.ndarray:
        """Per step: whether frame t+1 differs from frame t (the action could be seen)."""
        a = self.frames[self.ids[:, self.k]]
        b = self.frames[self.ids[:, self.k + 1]]
        return np.abs(a.astype(np.int16) - b).reshape(len(a), -1).max(axis=1) > 8
