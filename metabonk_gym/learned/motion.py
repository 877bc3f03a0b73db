"""`CameraShift`: the whole screen's motion between neighbouring frames, in pixels, sub-pixel.

A game whose camera follows the player shows the player's movement as the scroll of the whole
screen, often less than a pixel a step at the IDM's resolution. The IDM's convolutions read that
poorly on the Megabonk stand-in, while one global Lucas-Kanade translation gets nearly every
moving step's direction right (docs/benchmarks.md#design). This module is that estimate, written in
torch so it trains with the net: a learned per-pixel weight map (the HUD and the player's
sprite, which do not scroll, learn to weigh nothing), a soft robust weight that ignores pixels
that do not fit the shift (enemies), and a few warp-and-solve iterations. No library ships a
differentiable global translation estimator, hence by hand (classic Lucas-Kanade, 1981).

>>> import torch
>>> _ = torch.manual_seed(0)
>>> ground = torch.nn.functional.avg_pool2d(torch.rand(1, 1, 24, 44), 3, 1)  # a smooth texture
>>> before, after = ground[..., 1:21, 5:35], ground[..., 1:21, 4:34]  # it moved a pixel right
>>> shift = CameraShift((20, 30))(torch.cat([before, after], dim=1))  # (batch, pairs, 2)
>>> [round(v, 1) + 0.0 for v in shift[0, 0].tolist()]  # (dy, dx) in pixels
[0.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CameraShift"]

#: Pixels along each edge left out of the fit.
RIM = 2


class CameraShift(nn.Module):
    """Frames (B, T, H, W) in 0..1 -> (B, T-1, 2): each neighbouring pair's shift (dy, dx).

    Args:
        frame_size: (height, width) of the frames (the weight map's size).
        iterations: warp-and-solve rounds (3 reach a tenth of a pixel on the stand-in).
        robust_scale: brightness difference (0..1) past which a pixel stops counting: pixels
            that move on their own (enemies, shots) do not fit the screen's shift.
    """

    blur: torch.Tensor
    grid: torch.Tensor
    inside: torch.Tensor

    def __init__(
        self, frame_size: Sequence[int], iterations: int = 3, robust_scale: float = 0.05
    ) -> None:
        super().__init__()
        height, width = (int(v) for v in frame_size)
        if min(height, width) <= 2 * RIM + 2:
            raise ValueError(f"frame_size must be at least 7x7, not {tuple(frame_size)}")
        self.iterations = int(iterations)
        self.robust_scale = float(robust_scale)
        self.weight_logits = nn.Parameter(torch.zeros(height, width))
        blur = torch.tensor([0.25, 0.5, 0.25])
        self.register_buffer("blur", (blur[:, None] * blur[None])[None, None], persistent=False)
        ys, xs = torch.meshgrid(
            torch.linspace(-1.0, 1.0, height), torch.linspace(-1.0, 1.0, width), indexing="ij"
        )
        self.register_buffer("grid", torch.stack([xs, ys], dim=-1)[None], persistent=False)
        # the rim's pixels leave the view when it scrolls (a warp there reads a made-up border)
        inside = torch.zeros(height, width)
        inside[RIM : height - RIM, RIM : width - RIM] = 1.0
        self.register_buffer("inside", inside, persistent=False)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        b, t, h, w = frames.shape
        # replicate, not zeros: a dark rim would be an edge that never scrolls
        padded = F.pad(frames.reshape(b * t, 1, h, w), (1, 1, 1, 1), mode="replicate")
        smooth = F.conv2d(padded, self.blur)
        smooth = smooth.reshape(b, t, h, w)
        first = smooth[:, :-1].reshape(-1, 1, h, w)
        second = smooth[:, 1:].reshape(-1, 1, h, w)
        gx = torch.zeros_like(first)
        gy = torch.zeros_like(first)
        gx[..., 1:-1] = (first[..., 2:] - first[..., :-2]) / 2
        gy[..., 1:-1, :] = (first[..., 2:, :] - first[..., :-2, :]) / 2
        weight = (torch.sigmoid(self.weight_logits) * self.inside)[None, None]
        shift = first.new_zeros(first.shape[0], 2)
        to_grid = first.new_tensor([2.0 / max(w - 1, 1), 2.0 / max(h - 1, 1)])
        for _ in range(self.iterations):
            offset = (shift.flip(-1) * to_grid)[:, None, None]  # (dx, dy) in grid units
            warped = F.grid_sample(
                second, self.grid + offset, mode="bilinear", padding_mode="border",
                align_corners=True,
            )  # fmt: skip
            diff = warped - first
            fit = weight * torch.exp(-((diff / self.robust_scale) ** 2))
            sxx = (fit * gx * gx).sum((1, 2, 3))
            syy = (fit * gy * gy).sum((1, 2, 3))
            sxy = (fit * gx * gy).sum((1, 2, 3))
            vx = -(fit * gx * diff).sum((1, 2, 3))
            vy = -(fit * gy * diff).sum((1, 2, 3))
            det = sxx * syy - sxy * sxy + 1e-6
            step = torch.stack([(sxx * vy - sxy * vx) / det, (syy * vx - sxy * vy) / det], -1)
            shift = shift + step
        return shift.reshape(b, t - 1, 2)
