"""Policy construction: SB3 policy kwargs from a config, and a small CNN for CPU training.

SB3's NatureCNN costs about 12 M multiply-adds per 80x120 frame stack; on a 2-core machine that
makes PPO's updates, not the emulator, the bottleneck (measured: ~500 samples/s forward+backward
on one thread). `SmallCNN` (three narrow convolutions) costs ~1.7 M on 40x60 inputs (~1.4k
samples/s) and ~0.3 M on BonkQuest's 20x30 tile-level frames (~10k samples/s), so the built-in
configs use it; `features: nature` switches back.

>>> import gymnasium as gym, numpy as np, torch
>>> space = gym.spaces.Box(0, 255, (4, 40, 60), np.uint8)
>>> SmallCNN(space, features_dim=64)(torch.zeros(2, 4, 40, 60)).shape
torch.Size([2, 64])
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, NatureCNN
from torch import nn

from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.egocells import EgoCellCNN
from metabonk_gym.training.wrapstack import uses_dict_extractor


class SmallCNN(BaseFeaturesExtractor):
    """Conv(16, 4x4, /2) - Conv(32, 3x3, /2) - Conv(32, 3x3) - Linear(features_dim), ReLUs.

    Args:
        observation_space: channel-first image observations (at least 16 pixels a side).
        features_dim: size of the features the policy and value heads read.
    """

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 256) -> None:
        super().__init__(observation_space, features_dim)
        channels = observation_space.shape[0]
        self.cnn = nn.Sequential(
            nn.Conv2d(channels, 16, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, stride=2),
            nn.ReLU(),
            nn.Conv2d(32, 32, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            sample = torch.as_tensor(observation_space.sample()[None]).float()
            n_flatten = self.cnn(sample).shape[1]
        self.linear = nn.Sequential(nn.Linear(n_flatten, features_dim), nn.ReLU())

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.linear(self.cnn(observations))


class CellCNN(BaseFeaturesExtractor):
    """Embedding of each cell code byte (`PixelCells`), then convolutions that keep the cell grid.

    Every channel (a code byte of one stacked frame) has its own 256-row table of `embed` numbers;
    the tables' outputs are concatenated per cell, then Conv(32, 3x3) at full grid resolution (a
    teacher's choice depends on the exact cell next to the player, which `SmallCNN`'s first
    stride-2 layer blurs), Conv(64, 3x3, /2), Conv(64, 3x3, /2), Linear(features_dim), ReLUs.
    The policy must not scale the codes (`normalize_images=False`, set by `policy_kwargs`).

    Args:
        observation_space: channel-first (codes x frames, rows, cols) uint8 codes.
        features_dim: size of the features the policy and value heads read.
        embed: numbers per code byte.

    >>> import gymnasium as gym, numpy as np, torch
    >>> space = gym.spaces.Box(0, 255, (4, 20, 30), np.uint8)
    >>> CellCNN(space, features_dim=32)(torch.full((2, 4, 20, 30), 255.0)).shape
    torch.Size([2, 32])
    """

    def __init__(
        self, observation_space: gym.spaces.Box, features_dim: int = 256, embed: int = 8
    ) -> None:
        super().__init__(observation_space, features_dim)
        channels = observation_space.shape[0]
        self.embedding = nn.Embedding(256 * channels, embed)
        self.register_buffer("offsets", torch.arange(channels).view(1, channels, 1, 1) * 256)
        self.cnn = nn.Sequential(
            nn.Conv2d(channels * embed, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n_flatten = self.cnn(self.embed(torch.zeros(1, *observation_space.shape))).shape[1]
        self.linear = nn.Sequential(nn.Linear(n_flatten, features_dim), nn.ReLU())

    def embed(self, observations: torch.Tensor) -> torch.Tensor:
        ids = observations.long().clamp(0, 255) + self.offsets  # type: ignore[operator]
        vectors = self.embedding(ids)  # (B, C, H, W, E)
        b, c, h, w, e = vectors.shape
        return vectors.permute(0, 1, 4, 2, 3).reshape(b, c * e, h, w)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.linear(self.cnn(self.embed(observations)))


class DictExtractor(BaseFeaturesExtractor):
    """Features of a Dict observation from the config's wrappers: `SmallCNN` on each image key
    and, on every other key, its numbers scaled to [0, 1] by the space's bounds (tile token
    hashes reach 2**31) and one `Linear(.., 64)` + ReLU; the parts are concatenated.

    Why not SB3's `CombinedExtractor`: its NatureCNN needs 36 pixels a side (BonkQuest trains on
    20x30 frames) and it feeds raw token ids to the heads.

    Args:
        observation_space: the Dict space the policy sees (images channel-first, as SB3 gives).
        cnn_output_dim: features of each image key.
        vector_dim: features of each other key.
    """

    def __init__(
        self, observation_space: gym.spaces.Dict, cnn_output_dim: int = 256, vector_dim: int = 64
    ) -> None:
        from stable_baselines3.common.preprocessing import is_image_space

        parts: dict[str, nn.Module] = {}
        total = 0
        lows: dict[str, torch.Tensor] = {}
        spans: dict[str, torch.Tensor] = {}
        for key, sub in observation_space.spaces.items():
            if is_image_space(sub, check_channels=False):
                parts[key] = SmallCNN(sub, features_dim=cnn_output_dim)  # type: ignore[arg-type]
                total += cnn_output_dim
                continue
            size = int(np.prod(sub.shape))  # type: ignore[arg-type]
            low = np.nan_to_num(np.asarray(sub.low, np.float64).reshape(-1), posinf=0, neginf=0)  # type: ignore[attr-defined]
            high = np.asarray(sub.high, np.float64).reshape(-1)  # type: ignore[attr-defined]
            span = np.where(np.isfinite(high) & (high > low), high - low, 1.0)
            lows[key] = torch.as_tensor(low, dtype=torch.float32)
            spans[key] = torch.as_tensor(span, dtype=torch.float32)
            parts[key] = nn.Sequential(nn.Linear(size, vector_dim), nn.ReLU())
            total += vector_dim
        super().__init__(observation_space, features_dim=total)
        self.parts = nn.ModuleDict(parts)
        for key in lows:
            self.register_buffer(f"low_{key}", lows[key])
            self.register_buffer(f"span_{key}", spans[key])

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:  # type: ignore[override]
        out = []
        for key, part in self.parts.items():
            x = observations[key]
            if isinstance(part, SmallCNN):
                out.append(part(x))
                continue
            flat = x.reshape(x.shape[0], -1).float()
            low, span = getattr(self, f"low_{key}"), getattr(self, f"span_{key}")
            out.append(part((flat - low) / span))
        return torch.cat(out, dim=1)


def policy_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """`policy_kwargs` for SB3 PPO per the config's `policy`, `features`, `net_arch`."""
    kwargs: dict[str, Any] = {}
    if cfg.policy == "CnnPolicy" and cfg.features == "cells":  # `PixelCells` codes, unscaled
        kwargs["features_extractor_class"] = CellCNN
        kwargs["features_extractor_kwargs"] = {"features_dim": cfg.features_dim}
        kwargs["normalize_images"] = False
    elif cfg.policy == "CnnPolicy" and cfg.features == "ego-cells":  # codes, player-relative
        kwargs["features_extractor_class"] = EgoCellCNN
        kwargs["features_extractor_kwargs"] = {
            "features_dim": cfg.features_dim,
            "frame_stack": cfg.frame_stack,
        }
        kwargs["normalize_images"] = False
    elif cfg.policy == "CnnPolicy":
        kwargs["features_extractor_class"] = SmallCNN if cfg.features == "small" else NatureCNN
        kwargs["features_extractor_kwargs"] = {"features_dim": cfg.features_dim}
    elif uses_dict_extractor(cfg):  # the config's wrappers: small CNN + scaled numbers
        kwargs["features_extractor_class"] = DictExtractor
        kwargs["features_extractor_kwargs"] = {"cnn_output_dim": cfg.features_dim}
    elif cfg.policy == "MultiInputPolicy":  # SB3's CombinedExtractor: NatureCNN per image key
        kwargs["features_extractor_kwargs"] = {"cnn_output_dim": cfg.features_dim}
    if cfg.log_std_init is not None:
        kwargs["log_std_init"] = cfg.log_std_init
    if cfg.net_arch is not None:
        kwargs["net_arch"] = list(cfg.net_arch)
    return kwargs


def learning_rate(cfg: TrainConfig) -> Any:
    """A constant rate, or SB3's linear decay to 0 over the run (`lr_schedule: linear`)."""
    if cfg.lr_schedule == "constant":
        return cfg.learning_rate
    return LinearSchedule(cfg.learning_rate)


class LinearSchedule:
    """Picklable linear schedule (SB3 saves schedules with cloudpickle; loading rebuilds it from
    the config instead of unpickling it: `metabonk_gym.training.safeload`).

    Args:
        start: the rate at the start of training (progress remaining 1), falling to 0 at the end.

    >>> LinearSchedule(1e-3)(0.5)
    0.0005
    """

    def __init__(self, start: float) -> None:
        self.start = start

    def __call__(self, progress_remaining: float) -> float:
        return self.start * progress_remaining


def make_ppo(cfg: TrainConfig, venv: Any) -> Any:
    """A new SB3 PPO per the config (`venv` gives the spaces)."""
    from stable_baselines3 import PPO

    torch.set_num_threads(cfg.torch_threads)
    return PPO(
        cfg.policy,
        venv,
        learning_rate=learning_rate(cfg),
        n_steps=cfg.n_steps,
        batch_size=cfg.batch_size,
        n_epochs=cfg.n_epochs,
        gamma=cfg.gamma,
        gae_lambda=cfg.gae_lambda,
        clip_range=cfg.clip_range,
        ent_coef=cfg.ent_coef,
        vf_coef=cfg.vf_coef,
        max_grad_norm=cfg.max_grad_norm,
        target_kl=cfg.target_kl,
        policy_kwargs=policy_kwargs(cfg),
        seed=cfg.seed,
        device=cfg.device,
        verbose=0,
    )
