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
from metabonk_gym.training.egocells import EgoCellCNN, embed_codes
from metabonk_gym.training.newest import newest_width, rollout_buffer_args
from metabonk_gym.training.transpose import wrap_for_sb3
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
        return embed_codes(self.embedding, self.offsets, observations)  # type: ignore[arg-type]

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.linear(self.cnn(self.embed(observations)))


class DictExtractor(BaseFeaturesExtractor):
    """Features of a Dict observation from the config's wrappers: `SmallCNN` on each image key
    (all its stacked frames) and one `Linear(.., vector_dim)` + ReLU on the newest frame of
    every other key, its numbers scaled to [0, 1] by the space's bounds (tile token hashes reach
    2**31), concatenated.

    Why not SB3's `CombinedExtractor`: its NatureCNN needs 36 pixels a side (BonkQuest trains on
    20x30 frames) and it feeds raw token ids to the heads. Why the newest frame of the other keys:
    the stacked image carries the motion, and a dense layer per key over every stacked frame of
    the token grids (4 x 2,400 numbers each) cost more than the CNN in each of PPO's epochs
    (`metabonk bench train-wrappers`: 0.55x of the frame-only training speed; 0.8x+ with this).

    Args:
        observation_space: the Dict space the policy sees (images channel-first, as SB3 gives).
        cnn_output_dim: features of each image key.
        vector_dim: features of all other keys together.
        frame_stack: frames `VecFrameStack` stacked on each key's last axis (the config's
            `frame_stack`; 1: none): the other keys are read at the newest.

    >>> import gymnasium as gym, numpy as np, torch
    >>> space = gym.spaces.Dict({"pixels": gym.spaces.Box(0, 255, (2, 20, 30), np.uint8),
    ...                          "tiles": gym.spaces.Box(0, 9, (20, 60), np.int32)})
    >>> ext = DictExtractor(space, cnn_output_dim=32, vector_dim=8, frame_stack=2)
    >>> ext.widths, ext({"pixels": torch.zeros(3, 2, 20, 30), "tiles": torch.ones(3, 20, 60)}).shape
    ({'tiles': 30}, torch.Size([3, 40]))
    """

    def __init__(
        self,
        observation_space: gym.spaces.Dict,
        cnn_output_dim: int = 256,
        vector_dim: int = 64,
        frame_stack: int = 1,
    ) -> None:
        from stable_baselines3.common.preprocessing import is_image_space

        images: dict[str, nn.Module] = {}
        self.widths: dict[str, int] = {}  # other keys: how many last-axis entries are newest
        shifts: list[np.ndarray] = []
        scales: list[np.ndarray] = []
        for key, sub in observation_space.spaces.items():
            if is_image_space(sub, check_channels=False):
                images[key] = SmallCNN(sub, features_dim=cnn_output_dim)  # type: ignore[arg-type]
                continue
            shape = tuple(sub.shape or (1,))
            last = shape[-1]
            width = self.widths[key] = newest_width(shape, frame_stack)
            low = np.asarray(sub.low, np.float64).reshape(shape)[..., last - width :]  # type: ignore[attr-defined]
            high = np.asarray(sub.high, np.float64).reshape(shape)[..., last - width :]  # type: ignore[attr-defined]
            low = np.nan_to_num(low.reshape(-1), posinf=0, neginf=0)
            high = high.reshape(-1)
            span = np.where(np.isfinite(high) & (high > low), high - low, 1.0)
            scales.append(1.0 / span)
            shifts.append(-low / span)
        total = cnn_output_dim * len(images) + (vector_dim if self.widths else 0)
        super().__init__(observation_space, features_dim=total)
        self.parts = nn.ModuleDict(images)
        self.vector: nn.Module | None = None
        if self.widths:
            size = sum(len(s) for s in scales)
            self.vector = nn.Sequential(nn.Linear(size, vector_dim), nn.ReLU())
            # x * scale + shift, one fused op (`addcmul`) on the concatenated keys
            self.register_buffer(
                "scale", torch.as_tensor(np.concatenate(scales), dtype=torch.float32)
            )
            self.register_buffer(
                "shift", torch.as_tensor(np.concatenate(shifts), dtype=torch.float32)
            )

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:  # type: ignore[override]
        out = [part(observations[key]) for key, part in self.parts.items()]
        if self.vector is not None:
            batch = next(iter(observations.values())).shape[0]
            flat = torch.cat(
                [
                    observations[key][..., -width:].reshape(batch, -1).float()
                    for key, width in self.widths.items()
                ],
                dim=1,
            )
            out.append(self.vector(torch.addcmul(self.shift, flat, self.scale)))  # type: ignore[arg-type]
        return torch.cat(out, dim=1)


#: SB3's Adam for PPO (its `eps`) as one fused kernel over all parameters (`torch.optim.Adam(
#: fused=True)`, CPU and CUDA) instead of a loop of small ops per parameter tensor. Why: on this
#: 2-core CPU a minibatch update with the tile-token stack cost 2.8 ms more than the frame-only
#: one, mostly Adam's per-element passes over the token layer's 152k weights; fused, 1.2 ms more
#: (`metabonk bench train-wrappers`), and the frame-only update no slower. Same algorithm and
#: hyper-parameters; a checkpoint saved without it resumes with the optimizer it was saved with.
ADAM_KWARGS: dict[str, Any] = {"eps": 1e-5, "fused": True}


def policy_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """`policy_kwargs` for SB3 PPO per the config's `policy`, `features`, `net_arch` (and the
    fused Adam of `ADAM_KWARGS`).

    >>> from metabonk_gym.training.config import resolve_config
    >>> policy_kwargs(resolve_config("MetaBonk/BonkQuest-v0"))["optimizer_kwargs"]
    {'eps': 1e-05, 'fused': True}
    """
    kwargs: dict[str, Any] = {"optimizer_kwargs": dict(ADAM_KWARGS)}
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
        kwargs["features_extractor_kwargs"] = {
            "cnn_output_dim": cfg.features_dim,
            "frame_stack": cfg.frame_stack,
        }
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
        wrap_for_sb3(venv),  # SB3's image transpose without its deep copy of Dict observations
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
        **rollout_buffer_args(cfg, venv.observation_space),  # DictExtractor's: newest frames
        seed=cfg.seed,
        device=cfg.device,
        verbose=0,
    )
