"""Frame predictors for `TemporalStrip`: guess the next frames from the recent ones.

Why: an agent that thinks slowly (a VLM at a few hundred ms per call) acts on a world that has
moved on; showing it where things will be makes up for part of the delay. Game sprites move
rigidly over mostly still backgrounds, which block motion captures well.

- `copy`: the present frame, repeated (the baseline every other predictor is measured against);
- `linear`: per-pixel extrapolation `f_t + k (f_t - f_{t-1})`, clipped;
- `flow`: block motion on 8x8 cells, then the moving foreground is pasted k motion steps ahead
  over a running estimate of the static background;
- `learned`: a tiny conv net (`LearnedPredictor`, trained by `metabonk train predictor`);
- `world-model`: an action-conditioned world model (`metabonk_gym.worldmodel.predictor`, trained
  by `metabonk train world-model`), imported only when asked for.

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

PREDICTORS = ("copy", "linear", "flow", "learned", "world-model")

#: Predictors living in higher layers, by name: a "module:attribute" entry point imported when
#: first asked for (as gymnasium's `entry_point`), so this module imports neither torch nor the
#: training layer. `register_predictor` adds more.
PREDICTOR_ENTRY_POINTS: dict[str, str] = {
    "world-model": "metabonk_gym.worldmodel.predictor:WorldModelPredictor",
}


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
    """Block motion on 8x8 cells (exhaustive search of +-`search` pixels) over a static background.

    Each update: a pixel that kept its colour for `stable` frames becomes background; the
    foreground is what differs from it. A cell that changed since the last frame moves by the
    displacement d under which most of its foreground pixels were foreground, of the same
    colour, at p - d in the previous frame (needing both frames' foreground rules out mistaking
    the background uncovered behind a sprite for the sprite); it needs at least `min_match` of
    the cell's foreground. A prediction `k` steps ahead erases the moving pixels (the background
    shows through) and pastes them `k` displacements further.

    Args:
        block: cell size in pixels.
        search, stable, min_match: see above.
    """

    name = "flow"
    context = 2

    def __init__(
        self, block: int = 8, search: int = 10, stable: int = 4, min_match: float = 0.7
    ) -> None:
        super().__init__()
        self.block, self.search, self.stable, self.min_match = (
            int(block),
            int(search),
            int(stable),
            float(min_match),
        )
        self.background: np.ndarray | None = None
        self._packed_bg: np.ndarray | None = None
        self._count: np.ndarray | None = None
        self._prev_fg: np.ndarray | None = None
        offsets = np.arange(-self.search, self.search + 1)
        dy, dx = np.meshgrid(offsets, offsets, indexing="ij")
        order = np.argsort(
            np.abs(dy).ravel() + np.abs(dx).ravel(), kind="stable"
        )  # ties: smallest move
        self._dy, self._dx = dy.ravel()[order], dx.ravel()[order]
        self._motion: list[tuple[int, int, int, int, np.ndarray]] = []  # (y0, x0, dy, dx, pixels)

    def reset(self) -> None:
        super().reset()
        self.background = self._packed_bg = self._count = self._prev_fg = None
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
        now = self._pack(frame)
        if (
            previous is None
            or self.background is None
            or self._count is None
            or self._packed_bg is None
        ):
            self.background = frame.copy()
            self._packed_bg = now.copy()
            self._count = np.zeros(now.shape, np.int32)
            self._prev_fg = np.zeros(now.shape, bool)
            self._motion = []
            return
        before = self._pack(previous)
        same = now == before
        fg = now != self._packed_bg  # against the background as it was up to the previous frame
        assert self._prev_fg is not None
        self._motion = self._estimate(now, before, ~same, fg, self._prev_fg)
        self._count = np.where(same, self._count + 1, 0)
        settled = self._count >= self.stable - 1
        self.background[settled] = frame[settled]
        self._packed_bg[settled] = now[settled]
        self._prev_fg = now != self._packed_bg

    def _estimate(
        self,
        now: np.ndarray,
        before: np.ndarray,
        changed: np.ndarray,
        fg: np.ndarray,
        prev_fg: np.ndarray,
    ) -> list[tuple[int, int, int, int, np.ndarray]]:
        b, s = self.block, self.search
        h, w = now.shape
        rows, cols = h // b, w // b
        cell_changed = changed[: rows * b, : cols * b].reshape(rows, b, cols, b).any(axis=(1, 3))
        cells = np.argwhere(cell_changed)
        if not len(cells):
            return []
        prev = np.pad(before, s, constant_values=-1)
        prev_fg = np.pad(prev_fg, s, constant_values=False)
        ys = cells[:, 0, None, None] * b + np.arange(b)[None, :, None]  # (n, b, 1)
        xs = cells[:, 1, None, None] * b + np.arange(b)[None, None, :]  # (n, 1, b)
        blocks = now[ys, xs]  # (n, b, b)
        masks = fg[ys, xs]
        weight = masks.sum(axis=(1, 2))
        # candidate d: the pixel at p came from p - d in the previous frame
        cy = ys[:, None] - self._dy[None, :, None, None] + s  # (n, D, b, 1)
        cx = xs[:, None] - self._dx[None, :, None, None] + s
        hits = (prev[cy, cx] == blocks[:, None]) & prev_fg[cy, cx] & masks[:, None]  # (n, D, b, b)
        score = hits.sum(axis=(2, 3))
        score[:, 0] = -1  # d = (0, 0) comes first in the order: a cell that changed did not stay
        best = score.argmax(axis=1).tolist()
        # aperture problem: a cell of flat colour matches several moves equally well; among its
        # equally good moves take the one most of its changed neighbours chose
        index = {(int(r), int(c)): n for n, (r, c) in enumerate(cells.tolist())}
        chosen = []
        for n, (r, c) in enumerate(cells.tolist()):
            votes: dict[int, int] = {}
            for dr in (-1, 0, 1):
                for dc in (-1, 0, 1):
                    m = index.get((r + dr, c + dc))
                    if m is not None:
                        votes[best[m]] = votes.get(best[m], 0) + 1
            top = score[n, best[n]]
            tied = [k for k in votes if score[n, k] == top]
            chosen.append(max(tied, key=lambda k: (votes[k], k == best[n])) if tied else best[n])
        out = []
        for n, (k, wt) in enumerate(zip(chosen, weight.tolist())):
            got = int(score[n, k])
            if wt and got > 0 and got >= self.min_match * wt:
                r, c = cells[n]
                out.append((int(r) * b, int(c) * b, int(self._dy[k]), int(self._dx[k]), hits[n, k]))
        return out

    def predict(self, steps: int) -> np.ndarray:
        present = self._present()
        out = np.broadcast_to(present, (steps, *present.shape)).copy()
        if not self._motion or self.background is None:
            return out
        b = self.block
        h, w = present.shape[:2]
        for k in range(steps):
            pred = out[k]
            for y0, x0, _, _, mask in self._motion:
                pred[y0 : y0 + b, x0 : x0 + b][mask] = self.background[y0 : y0 + b, x0 : x0 + b][
                    mask
                ]
            for y0, x0, dy, dx, mask in self._motion:
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
    `metabonk train predictor` (`metabonk_gym.training.predictor.train_predictor`).

    Args:
        path: a saved model (or `model`: a `TinyPredictor` in memory).
        model: the model itself.
        device: torch device.
        threads: torch threads (None: leave as is).
    """

    name = "learned"

    def __init__(
        self,
        path: str | Path | None = None,
        model: Any = None,
        device: str = "cpu",
        threads: int | None = None,
    ) -> None:
        from metabonk_gym.wrappers.predictor_net import CONTEXT, load_model

        if threads is not None:  # process-wide: meant for subprocess envs (make_vec), e.g. 1
            import torch

            torch.set_num_threads(int(threads))
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
        return rollout(self.model, np.stack(frames), steps, device=self.device).reshape(
            steps, *present.shape
        )


def register_predictor(name: str, entry_point: str) -> None:
    """Make `make_predictor(name)` build `entry_point` ("module:Class", a `Predictor`)."""
    PREDICTOR_ENTRY_POINTS[name] = entry_point


def make_predictor(predictor: str | Predictor, **kwargs: Any) -> Predictor:
    """A predictor by name (`copy`, `linear`, `flow`, `learned`, `world-model`, or one registered
    with `register_predictor`) or the instance given."""
    if isinstance(predictor, Predictor):
        return predictor
    if isinstance(predictor, str) and predictor in PREDICTOR_ENTRY_POINTS:
        import importlib

        module, _, attribute = PREDICTOR_ENTRY_POINTS[predictor].partition(":")
        factory = getattr(importlib.import_module(module), attribute)
        made = factory(**kwargs)
        if not isinstance(made, Predictor):
            raise TypeError(
                f"predictor {predictor!r} ({PREDICTOR_ENTRY_POINTS[predictor]}) is not a Predictor"
            )
        return made
    classes: dict[str, type[Predictor]] = {
        "copy": CopyPredictor,
        "linear": LinearPredictor,
        "flow": FlowPredictor,
        "learned": LearnedPredictor,
    }
    if predictor not in classes:
        raise ValueError(
            f"unknown predictor {predictor!r}; choose one of {', '.join(PREDICTORS)} or pass a Predictor"
        )
    return classes[predictor](**kwargs)
