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
import torch
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, NatureCNN
from torch import nn

from metabonk_gym.training.config import TrainConfig


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


def policy_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """`policy_kwargs` for SB3 PPO per the config's `policy`, `features`, `net_arch`."""
    kwargs: dict[str, Any] = {}
    if cfg.policy == "CnnPolicy":
        kwargs["features_extractor_class"] = SmallCNN if cfg.features == "small" else NatureCNN
        kwargs["features_extractor_kwargs"] = {"features_dim": cfg.features_dim}
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
