"""`WorldModel`: an action-conditioned model of the next frames, with a per-pixel variance.

What: an RSSM-lite on a spatial latent. A conv encoder reads the last two frames into a latent
map at 1/4 resolution (and skip features at 1/1 and 1/2); each planned action, embedded, scales
and shifts the latent (FiLM) and a residual conv cell steps it forward one env step; the decoder
turns each latent step, with the present frame's skip features, into the change from the present
frame (mean) and its log-variance (the model's uncertainty, from a head on detached features). Output layers start at zero, so an
untrained model is the `copy` predictor with unit variance, and training only moves it towards
the real motion; predicting t+k from the latent (not from fed-back frames) keeps errors from
compounding in pixel space.

>>> import torch
>>> model = WorldModel(channels=3, n_actions=4, width=8)
>>> with torch.no_grad():
...     mean, logvar = model(torch.zeros(1, 2, 3, 16, 24), torch.tensor([[1, 2, 3]]))
>>> tuple(mean.shape), tuple(logvar.shape), float(mean.abs().max())
((1, 3, 3, 16, 24), (1, 3, 3, 16, 24), 0.0)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from metabonk_gym.worldmodel import CONTEXT

#: Log-variance bounds (in [0, 1] pixel units): keeps the likelihood finite.
LOGVAR_RANGE = (-12.0, 2.0)


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a `WorldModel` (stored in its metadata, so a file rebuilds its model).

    Args:
        channels: frame channels (1 grayscale, 3 RGB).
        n_actions: discrete actions of the env (a Box's size when `action_box`).
        width: channels of the first encoder stage (then 2x and 4x).
        action_dim: size of the action embedding.
        horizon: steps ahead the model is trained for.
        action_box: 1: actions are flat Box vectors (Megabonk's sticks and buttons), read by a
            linear layer; 0: Discrete action indices, read by an embedding.
    """

    channels: int
    n_actions: int
    width: int = 16
    action_dim: int = 16
    horizon: int = 3
    action_box: int = 0

    def to_dict(self) -> dict[str, int]:
        return {k: int(v) for k, v in asdict(self).items()}


class _Cell(nn.Module):
    """One latent step: FiLM by the action, then a residual block of dilated convs."""

    def __init__(self, channels: int, action_dim: int) -> None:
        super().__init__()
        self.film = nn.Linear(action_dim, 2 * channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=2, dilation=2)
        self.conv3 = nn.Conv2d(channels, channels, 3, padding=1)
        self.act = nn.SiLU()

    def forward(self, z: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.film(action)[:, :, None, None].chunk(2, dim=1)
        h = z * (1 + gamma) + beta
        h = self.act(self.conv1(h))
        h = self.act(self.conv2(h))
        return z + self.conv3(h)


class WorldModel(nn.Module):
    """(N, CONTEXT, C, H, W) frames in [0, 1] and (N, K) actions -> mean change and log-variance
    of frames t+1..t+K, each (N, K, C, H, W). H and W need not be multiples of 4.

    Args:
        channels, n_actions, width, action_dim, horizon, action_box: see `ModelConfig`.
    """

    def __init__(
        self,
        channels: int,
        n_actions: int,
        width: int = 16,
        action_dim: int = 16,
        horizon: int = 3,
        action_box: int = 0,
    ) -> None:
        super().__init__()
        self.config = ModelConfig(
            channels, n_actions, width, action_dim, horizon, int(bool(action_box))
        )
        c, w = int(channels), int(width)
        self.enc0 = nn.Conv2d(CONTEXT * c + c, w, 3, padding=1)
        self.enc1 = nn.Conv2d(w, 2 * w, 3, stride=2, padding=1)
        self.enc2 = nn.Conv2d(2 * w, 4 * w, 3, stride=2, padding=1)
        self.enc3 = nn.Conv2d(4 * w, 4 * w, 3, padding=2, dilation=2)
        self.embed: nn.Module = (
            nn.Linear(int(n_actions), int(action_dim))
            if action_box
            else nn.Embedding(int(n_actions), int(action_dim))
        )
        self.cell = _Cell(4 * w, int(action_dim))
        self.dec1 = nn.Conv2d(4 * w + 2 * w, 2 * w, 3, padding=1)
        self.dec0 = nn.Conv2d(2 * w + w, w, 3, padding=1)
        self.head = nn.Conv2d(w, c, 3, padding=1)
        self.var_head = nn.Conv2d(w, c, 3, padding=1)
        for head in (self.head, self.var_head):
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)  # type: ignore[arg-type]
        self.act = nn.SiLU()

    def encode(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Latent map and skip features of the context frames (N, CONTEXT, C, H, W)."""
        present = frames[:, -1]
        x = torch.cat([frames.flatten(1, 2), present - frames[:, -2]], dim=1)
        e0 = self.act(self.enc0(x))
        e1 = self.act(self.enc1(e0))
        z = self.act(self.enc2(e1))
        return z + self.enc3(z), e0, e1

    def decode(
        self, z: torch.Tensor, e0: torch.Tensor, e1: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        up1 = nn.functional.interpolate(z, size=e1.shape[-2:], mode="nearest")
        d1 = self.act(self.dec1(torch.cat([up1, e1], dim=1)))
        up0 = nn.functional.interpolate(d1, size=e0.shape[-2:], mode="nearest")
        d0 = self.act(self.dec0(torch.cat([up0, e0], dim=1)))
        # the variance head reads detached features: its likelihood loss never pulls the
        # features away from predicting the mean (what PSNR measures)
        logvar = self.var_head(d0.detach())
        return self.head(d0), logvar.clamp(*LOGVAR_RANGE)

    def forward(
        self, frames: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        z, e0, e1 = self.encode(frames)
        means, logvars = [], []
        for k in range(actions.shape[1]):
            z = self.cell(z, self.embed(actions[:, k]))
            mean, logvar = self.decode(z, e0, e1)
            means.append(mean)
            logvars.append(logvar)
        return torch.stack(means, dim=1), torch.stack(logvars, dim=1)


def to_tensor(frames: object, device: str | torch.device = "cpu") -> torch.Tensor:
    """(..., H, W, C) uint8 -> (..., C, H, W) float in [0, 1]."""
    return torch.as_tensor(frames, device=device).float().div(255.0).movedim(-1, -3)


@torch.no_grad()
def imagine(
    model: WorldModel,
    context: object,
    actions: object,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames after `context` (CONTEXT, H, W, C) uint8 under `actions` (K,) ints (or (K, D)
    Box actions): predicted frames (K, H, W, C) uint8 and their per-pixel standard deviation
    (K, H, W) in [0, 255]."""
    model.eval()
    x = to_tensor(context, device)[None]
    if model.config.action_box:
        n = model.config.n_actions
        box = np.asarray(actions, np.float32)
        a = torch.as_tensor(box, device=device).reshape(1, -1, n)
    else:
        a = torch.as_tensor(actions, device=device, dtype=torch.long).reshape(1, -1)
    mean, logvar = model(x, a)
    frames = (x[0, -1][None] + mean[0]).clamp(0.0, 1.0)
    std = logvar[0].mul(0.5).exp().mean(dim=1).mul(255.0)
    return frames.movedim(-3, -1).mul(255.0).round().to(torch.uint8), std
