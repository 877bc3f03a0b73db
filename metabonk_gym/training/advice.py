"""The advice schedule in training: tells `PauseToThink` envs the trainer's step count.

What: a config whose `wrappers:` hold `pause_to_think` with `advice_fade: [START, END]` fades the
adviser out over training env steps; the envs step in worker processes and do not know the
trainer's count, so `AdviceCallback` sends it (`set_train_step`) before each rollout and logs
`think/advice_scale` and `think/follow_weight`. Why a callback: the same envs in eval, never told
a step, play alone (the schedule's end).

>>> fade_of([{"name": "pause_to_think", "engine": "oracle", "advice_fade": [0, 1000]}])
[0, 1000]
>>> fade_of([{"name": "tile_tokens"}]) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from metabonk_gym.think.pause_to_think import advice_scale
from metabonk_gym.training.wrapstack import WrapperSpec

THINK = "pause_to_think"


def fade_of(specs: Sequence[WrapperSpec]) -> list[int] | None:
    """The `advice_fade` of the stack's `pause_to_think` (None: none, or no fade)."""
    for spec in specs:
        if spec["name"] == THINK and spec.get("advice_fade") is not None:
            return [int(v) for v in spec["advice_fade"]]
    return None


def follow_weight_of(specs: Sequence[WrapperSpec]) -> float:
    """The `follow_weight` of the stack's `pause_to_think` (0 without one)."""
    for spec in specs:
        if spec["name"] == THINK:
            return float(spec.get("follow_weight", 0.0))
    return 0.0


def set_train_step(venv: Any, step: int) -> None:
    """Tell every env of `venv` (an SB3 `VecEnv`) the trainer's env step count."""
    venv.env_method("set_train_step", int(step))


class AdviceCallback(BaseCallback):
    """Before each rollout: the step count to the envs, and the schedule to TensorBoard.

    Args:
        specs: the config's wrapper stack (with a `pause_to_think` that has `advice_fade`).
    """

    def __init__(self, specs: Sequence[WrapperSpec]) -> None:
        super().__init__()
        fade = fade_of(specs)
        if fade is None:
            raise ValueError("AdviceCallback needs a pause_to_think with advice_fade")
        self.fade = fade
        self.weight = follow_weight_of(specs)

    def _on_rollout_start(self) -> None:
        step = int(self.num_timesteps)
        set_train_step(self.training_env, step)
        scale = advice_scale(self.fade, step)
        self.logger.record("think/advice_scale", scale)
        self.logger.record("think/follow_weight", self.weight * scale)

    def _on_step(self) -> bool:
        return True
