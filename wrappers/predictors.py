"""Frame predictors for `TemporalStrip`: guess the next frames from the recent ones.

Why: an agent that thinks slowly (a VLM at a few hundred ms per call) acts on a world that has
moved on; showing it where things will be makes up for part of the delay. Game sprites move
rigidly over mostly still backgrounds, which block motion captures well.

- `copy`: the present frame, repeated (the baseline every other predictor is measured against);
- `linear`: per-pixel extrapolation `f_t + k (f_t - f_{t-1})`, clipped;
- `flow`: block motion on 8x8 cells, then the moving foreground is pasted k motion steps ahead
  over a running estimate of the static background;
- `learned`: a tiny conv net (`LearnedPredictor`, trained by `metabonk train predictor`).

All share one interface: `reset()`, `update(frame)` with each real frame, `predict(steps)` ->
(steps, H, W, C) uint8.

>>> import numpy as np
>>> p = make_predictor("linear")
>>> for v in (10, 20): p.update(np.full((8, 8, 3), v, np.uint8))
>>> p.predict(2)[:, 0, 0, 0].tolist()
[30, 40]
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

PREDICTORS = ("copy", "linear", "flow", "learned")


class Predictor:
    """Base class: keeps the last `context` frames."""

    name = "base"
    context = 2

    def __init__(self) -> None:
        self.frames: deque[np.ndarray] = deque(maxlen=self.context)

    def reset(self) -> None:
        self.frames.clear()

    def update(self, frame: np.ndarray) -> None:
        """Add the newest real frame (H, W, C) uint8."""
        self.frames.append(np.asarray(frame))

    def predict(self, steps: int) -> np.ndarray:
        raise NotImplementedError

    def _present(self) -> np.ndarray:
        if not self.frames:
            raise RuntimeError("predict() before any update(frame)")
        return self.frames[-1]


class CopyPredictor(Predictor):
    """The present frame, `steps` times."""

    name = "copy"
    context = 1

    def predict(self, steps: int) -> np.ndarray:
        present = self._present()
        return np.broadcast_to(present, (steps, *present.shape)).copy()


class LinearPredictor(Predictor):
    """Per-pixel linear extrapolation from the last two frames."""

    name = "linear"
    context = 2

    def predict(self, steps: int) -> np.ndarray:
        present = self._present().astype(np.int16)
        previous = self.frames[-2].astype(np.int16) if len(self.frames) > 1 else present
        k = np.arange(1, steps + 1, dtype=np.int16).reshape(-1, *([1] * present.ndim))
        return np.clip(present + k * (present - previous), 0, 255).astype(np.uint8)


class FlowPredictor(Predictor):
    """Block motion (8x8 cells, exhaustive search of +-`search` pixels) and a static background.

    Each update: a pixel that kept its colour for `stable` frames becomes background. The
    foreground is what differs from the background. For every cell that changed since the last
    frame, the displacement that best explains its foreground pixels (fewest mismatching pixels
    against the previous frame) is its motion, kept when it explains at least `min_match` of them.
    A prediction `k` steps ahead erases the moving foreground (background shows through) and
    pastes it `k` displacements further.
    """

    name = "flow"
    context = 2

    def __init__(self, block: int = 8, search: int = 10, stable: int = 2, min_match: float = 0.6) -> None:
        super().__init__()
        self.block, self.search, self.stable, self.min_match = int(block), int(search), int(stable), float(min_match)
        self.background: np.ndarray | None = None
        self._count: np.ndarray | None = None
        offsets = np.arange(-self.search, self.search + 1)
        dy, dx = np.meshgrid(offsets, offsets, indexing="ij")
        order = np.argsort(np.abs(dy).ravel() + np.abs(dx).ravel(), kind="stable")  # ties: smallest move
        self._dy, self._dx = dy.ravel()[order], dx.ravel()[order]
        self._motion: list[tuple[int, int, int, int]] = []  # (row, col, dy, dx) of moving cells

    def reset(self) -> None:
        super().reset()
        self.background = self._count = None
        self._motion = []

    @staticmethod
    def _pack(frame: np.ndarray) -> np.ndarray:
        f = frame.astype(np.int32)
        if f.ndim == 2:
            return f
        packed = f[..., 0]
        for c in range(1, f.shape[2]):
            packed = packed << 8 | f[..., c]
        return packed

    def update(self, frame: np.ndarray) -> None:
        frame = np.asarray(frame)
        previous = self.frames[-1] if self.frames else None
        super().update(frame)
        if previous is None or self.background is None or self._count is None:
            self.background = frame.copy()
            self._count = np.zeros(frame.shape[:2], np.int32)
            self._motion = []
            return
        now, before = self._pack(frame), self._pack(previous)
        same = now == before
        self._count = np.where(same, self._count + 1, 0)
        settled = self._count >= self.stable - 1
        self.background[settled] = frame[settled]
        self._motion = self._estimate(now, before, ~same)

    def _estimate(self, now: np.ndarray, before: np.ndarray, changed: np.ndarray) -> list[tuple[int, int, int, int]]:
        b, s = self.block, self.search
        h, w = now.shape
        rows, cols = h // b, w // b
        cell_changed = changed[: rows * b, : cols * b].reshape(rows, b, cols, b).any(axis=(1, 3))
        assert self.background is not None
        fg = self._pack(self.background) != now
        cells = np.argwhere(cell_changed)
        if not len(cells):
            return []
        padded = np.pad(before, s, constant_values=-1)
        ys = cells[:, 0, None, None] * b + np.arange(b)[None, :, None]  # (n, b, 1)
        xs = cells[:, 1, None, None] * b + np.arange(b)[None, None, :]  # (n, 1, b)
        blocks = now[ys, xs]  # (n, b, b)
        masks = fg[ys, xs]
        weight = masks.sum(axis=(1, 2))
        # candidates: the block's pixels came from p - d in the previous frame
        cy = ys[:, None] - self._dy[None, :, None, None] + s  # (n, D, b, 1)
        cx = xs[:, None] - self._dx[None, :, None, None] + s
        mismatch = ((padded[cy, cx] != blocks[:, None]) & masks[:, None]).sum(axis=(2, 3))  # (n, D)
        best = mismatch.argmin(axis=1)
        good = mismatch[np.arange(len(cells)), best] <= (1 - self.min_match) * weight
        out = []
        for (r, c), k, ok, wt in zip(cells.tolist(), best.tolist(), good.tolist(), weight.tolist()):
            if ok and wt and (self._dy[k] or self._dx[k]):
                out.append((r, c, int(self._dy[k]), int(self._dx[k])))
        return out

    def predict(self, steps: int) -> np.ndarray:
        present = self._present()
        out = np.broadcast_to(present, (steps, *present.shape)).copy()
        if not self._motion or self.background is None:
            return out
        b = self.block
        h, w = present.shape[:2]
        fg = (self.background != present).reshape(h, w, -1).any(axis=2)
        for k in range(steps):
            pred = out[k]
            pieces = []
            for r, c, dy, dx in self._motion:
                y0, x0 = r * b, c * b
                mask = fg[y0 : y0 + b, x0 : x0 + b]
                if not mask.any():
                    continue
                pred[y0 : y0 + b, x0 : x0 + b][mask] = self.background[y0 : y0 + b, x0 : x0 + b][mask]
                pieces.append((y0, x0, dy, dx, mask))
            for y0, x0, dy, dx, mask in pieces:
                ty, tx = y0 + (k + 1) * dy, x0 + (k + 1) * dx
                sy0, sx0 = max(0, -ty), max(0, -tx)
                sy1, sx1 = min(b, h - ty), min(b, w - tx)
                if sy1 <= sy0 or sx1 <= sx0:
                    continue
                m = mask[sy0:sy1, sx0:sx1]
                src = present[y0 + sy0 : y0 + sy1, x0 + sx0 : x0 + sx1]
                pred[ty + sy0 : ty + sy1, tx + sx0 : tx + sx1][m] = src[m]
        return out


class LearnedPredictor(Predictor):
    """A tiny conv net (see `predictor_net.py`) predicting the next frame's change from the last
    three; several steps ahead by feeding its own predictions back. Load a model trained by
    `metabonk train predictor` (`metabonk_gym.training.predictor.train_predictor`)."""

    name = "learned"

    def __init__(self, path: str | Path | None = None, model: Any = None, device: str = "cpu") -> None:
        from metabonk_gym.wrappers.predictor_net import CONTEXT, load_model

        self.context = CONTEXT
        super().__init__()
        if model is None:
            if path is None:
                raise ValueError(
                    "the learned predictor needs a model: LearnedPredictor(path='predictor.pt'); "
                    "train one with `metabonk train predictor --out predictor.pt`"
                )
            model = load_model(path, device=device)
        self.model = model
        self.device = device

    def predict(self, steps: int) -> np.ndarray:
        from metabonk_gym.wrappers.predictor_net import rollout

        present = self._present()
        frames = list(self.frames)
        while len(frames) < self.context:
            frames.insert(0, frames[0])
        return rollout(self.model, np.stack(frames), steps, device=self.device).reshape(steps, *present.shape)


def make_predictor(predictor: str | Predictor, **kwargs: Any) -> Predictor:
    """A predictor by name (`copy`, `linear`, `flow`, `learned`) or the instance given."""
    if isinstance(predictor, Predictor):
        return predictor
    classes: dict[str, type[Predictor]] = {
        "copy": CopyPredictor,
        "linear": LinearPredictor,
        "flow": FlowPredictor,
        "learned": LearnedPredictor,
    }
    if predictor not in classes:
        raise ValueError(f"unknown predictor {predictor!r}; choose one of {', '.join(PREDICTORS)} or pass a Predictor")
    return classes[predictor](**kwargs)
