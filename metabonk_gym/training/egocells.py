"""`EgoCellCNN`: cell codes read relative to the agent, found on the screen by a learned locator.

A teacher that walks to the nearest key, chest or door decides from where things are *relative to
the player*. A CNN over the whole screen has to discover the player's sprite and then relate every
other cell to it, which a few thousand samples teach slowly (`CellCNN` sat at the majority action
for many epochs, docs/training.md). This extractor finds the player with a 1x1-convolution
locator over the newest frame's cell codes (trained from the player's cell, which the env reports
while the teacher's samples are recorded; `locator_loss`), then gives the convolutions each cell's
offset from that cell and reads the features at the player's cell beside global max and mean
pools. At play time it sees only the codes: the locator's argmax is the position. How it
compares with `CellCNN`: the `design` record in docs/figures (docs/benchmarks.md#design).

>>> import gymnasium as gym, numpy as np, torch
>>> space = gym.spaces.Box(0, 255, (4, 20, 30), np.uint8)
>>> net = EgoCellCNN(space, features_dim=32, frame_stack=2)
>>> net(torch.zeros(3, 4, 20, 30)).shape
torch.Size([3, 32])
>>> net.locate(torch.zeros(3, 4, 20, 30)).shape
torch.Size([3, 600])
"""

from __future__ import annotations

import gymnasium as gym
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


def embed_codes(
    embedding: nn.Embedding, offsets: torch.Tensor, observations: torch.Tensor
) -> torch.Tensor:
    """Cell code bytes (B, C, H, W) to embedding planes (B, C * E, H, W): each channel looks its
    byte up in its own 256-row block of `embedding` (`offsets`: C x 256, shaped (1, C, 1, 1))."""
    vectors = embedding(observations.long().clamp(0, 255) + offsets)  # (B, C, H, W, E)
    b, c, h, w, e = vectors.shape
    return vectors.permute(0, 1, 4, 2, 3).reshape(b, c * e, h, w)


class EgoCellCNN(BaseFeaturesExtractor):
    """Per-byte code embeddings, a player locator, offset channels, full-resolution convolutions.

    Args:
        observation_space: channel-first (code bytes x frames, rows, cols) uint8 cell codes
            (`PixelCells`, stacked oldest frame first).
        features_dim: size of the features the policy and value heads read.
        frame_stack: frames in the stack (the locator reads the newest one's code bytes).
        embed: numbers per code byte.
        channels: width of the convolutions.
        layers: 3x3 convolutions at full grid resolution (receptive field 2 * layers + 1 cells).
    """

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        features_dim: int = 128,
        frame_stack: int = 1,
        embed: int = 8,
        channels: int = 32,
        layers: int = 3,
    ) -> None:
        super().__init__(observation_space, features_dim)
        planes, self.rows, self.cols = (int(n) for n in observation_space.shape)
        if frame_stack < 1 or planes % frame_stack:
            raise ValueError(f"{planes} code planes do not split into {frame_stack} frames")
        self.embed_dim = embed
        self.newest = (planes // frame_stack) * embed  # embedding channels of the newest frame
        self.embedding = nn.Embedding(256 * planes, embed)
        self.register_buffer("offsets", torch.arange(planes).view(1, planes, 1, 1) * 256)
        self.locator = nn.Conv2d(self.newest, 1, kernel_size=1)
        body: list[nn.Module] = [nn.Conv2d(planes * embed + 3, channels, 3, padding=1), nn.ReLU()]
        for _ in range(layers - 1):
            body += [nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU()]
        self.body = nn.Sequential(*body)
        self.linear = nn.Sequential(nn.Linear(3 * channels, features_dim), nn.ReLU())
        self.register_buffer("row_index", torch.arange(self.rows).view(1, self.rows, 1).float())
        self.register_buffer("col_index", torch.arange(self.cols).view(1, 1, self.cols).float())

    def _embed(self, observations: torch.Tensor) -> torch.Tensor:
        return embed_codes(self.embedding, self.offsets, observations)  # type: ignore[arg-type]

    def _locate(self, embedded: torch.Tensor) -> torch.Tensor:
        return self.locator(embedded[:, -self.newest :]).flatten(1)  # type: ignore[no-any-return]

    def locate(self, observations: torch.Tensor) -> torch.Tensor:
        """The locator's logits over the grid's cells (row-major): train with `locator_loss`."""
        return self._locate(self._embed(observations))

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        embedded = self._embed(observations)
        batch = embedded.shape[0]
        cell = self._locate(embedded).argmax(dim=1)
        row = (cell // self.cols).float().view(batch, 1, 1)
        col = (cell % self.cols).float().view(batch, 1, 1)
        rows: torch.Tensor = self.row_index  # type: ignore[assignment]
        cols: torch.Tensor = self.col_index  # type: ignore[assignment]
        shape = (batch, 1, self.rows, self.cols)
        d_row = ((rows - row) / self.rows).unsqueeze(1).expand(shape)
        d_col = ((cols - col) / self.cols).unsqueeze(1).expand(shape)
        me = torch.zeros(batch, self.rows * self.cols, device=embedded.device)
        me[torch.arange(batch), cell] = 1.0
        grid = self.body(
            torch.cat([embedded, d_row, d_col, me.view(batch, 1, self.rows, self.cols)], dim=1)
        )
        at_player = grid.flatten(2)[torch.arange(batch), :, cell]
        return self.linear(torch.cat([at_player, grid.amax((2, 3)), grid.mean((2, 3))], dim=1))  # type: ignore[no-any-return]


def locator_loss(
    extractor: nn.Module, observations: torch.Tensor, cells: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy of `extractor`'s locator to the agent's true cells (row * cols + col);
    a zero for extractors without a locator, so callers can always add it."""
    if not isinstance(extractor, EgoCellCNN):
        return torch.zeros((), device=observations.device)
    return nn.functional.cross_entropy(extractor.locate(observations), cells)
