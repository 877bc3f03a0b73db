"""The learned frame predictor: a tiny fully convolutional net (~40k parameters) that predicts how
the next frame differs from the present one, from the last three frames.

Why this shape: the output layer starts at zero, so an untrained net is exactly the `copy`
predictor and training can only move it towards the real motion; a stride-2 stage with dilated
convolutions sees about 30 pixels around each pixel, enough for a sprite's move in one env step
at frameskip 4; everything runs on the CPU in tens of milliseconds per frame. Several steps
ahead, predictions are fed back in (`rollout`).

Files hold only tensors and plain numbers (`torch.load(weights_only=True)` reads them; no
pickled code).

>>> import numpy as np
>>> model = TinyPredictor()
>>> frames = np.zeros((CONTEXT, 16, 24, 3), np.uint8)
>>> rollout(model, frames, steps=2).shape
(2, 16, 24, 3)
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from metabonk_gym.errors import WeightsFileError
from metabonk_gym.utils import atomic_write_bytes

#: Frames the net looks at (t-2, t-1, t).
CONTEXT = 3


class TinyPredictor(nn.Module):
    """(N, 3 * CONTEXT, H, W) frames in [0, 1] -> (N, 3, H, W) change of the last frame.

    Args:
        width: channels of the hidden layers.
        context: frames in the input.
    """

    def __init__(self, width: int = 16, context: int = CONTEXT) -> None:
        super().__init__()
        self.width, self.context = int(width), int(context)
        w = self.width
        self.enc = nn.Conv2d(3 * context, w, 3, padding=1)
        self.down = nn.Conv2d(w, 2 * w, 3, stride=2, padding=1)
        self.mid1 = nn.Conv2d(2 * w, 2 * w, 3, padding=2, dilation=2)
        self.mid2 = nn.Conv2d(2 * w, 2 * w, 3, padding=4, dilation=4)
        self.dec = nn.Conv2d(3 * w, w, 3, padding=1)
        self.out = nn.Conv2d(w, 3, 3, padding=1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)  # type: ignore[arg-type]
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        e = self.act(self.enc(x))
        m = self.act(self.down(e))
        m = self.act(self.mid1(m))
        m = self.act(self.mid2(m))
        up = nn.functional.interpolate(m, size=(h, w), mode="nearest")
        d = self.act(self.dec(torch.cat([e, up], dim=1)))
        return self.out(d)

    def config(self) -> dict[str, int]:
        return {"width": self.width, "context": self.context}


def to_input(frames: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(..., CONTEXT, H, W, 3) uint8 -> (..., 3 * CONTEXT, H, W) float in [0, 1]."""
    t = torch.as_tensor(frames).float() / 255.0
    t = t.movedim(-1, -3)  # (..., CONTEXT, 3, H, W)
    return t.flatten(-4, -3)


@torch.no_grad()
def rollout(
    model: TinyPredictor, frames: np.ndarray, steps: int, device: str = "cpu"
) -> np.ndarray:
    """Predict `steps` frames after `frames` (CONTEXT, H, W, 3) uint8, feeding predictions back."""
    model.eval()
    window = (
        torch.as_tensor(np.asarray(frames)).float().div(255.0).movedim(-1, -3).to(device)
    )  # (C, 3, H, W)
    out = []
    for _ in range(steps):
        x = window.flatten(0, 1)[None]
        nxt = (window[-1] + model(x)[0]).clamp(0.0, 1.0)
        out.append(nxt)
        window = torch.cat([window[1:], nxt[None]], dim=0)
    pred = torch.stack(out).movedim(-3, -1).mul(255.0).round().to(torch.uint8)
    return pred.cpu().numpy()


def save_model(
    model: TinyPredictor, path: str | Path, metrics: dict[str, Any] | None = None
) -> Path:
    """Write the weights and config (atomically)."""
    buffer = io.BytesIO()
    torch.save(
        {
            "config": model.config(),
            "state_dict": model.state_dict(),
            "metrics": dict(metrics or {}),
        },
        buffer,
    )
    atomic_write_bytes(Path(path), buffer.getvalue())
    return Path(path)


def load_model(path: str | Path, device: str = "cpu") -> TinyPredictor:
    """Load a model written by `save_model` (weights only, no code is unpickled)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"predictor model not found: {path}; train one with `metabonk train predictor --out {path}`"
        )
    try:
        payload = torch.load(path, map_location=device, weights_only=True)
        model = TinyPredictor(**payload["config"])
        model.load_state_dict(payload["state_dict"])
    except Exception as exc:  # torch's refusal of pickled code included: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise WeightsFileError(
            f"{path} is not a predictor written by metabonk train predictor ({first})"
        ) from None
    return model.to(device).eval()
