"""Training speed with a wrapper stack vs none: PPO env steps per second, ratio in one run.

What: the same PPO config (the env's training defaults, `frame_stack` 4 on the vector env) trained
for `steps` env steps, once with `wrappers: [tile_tokens]` (the VRAM tile tokens, sprites and
classes beside the frame, every key frame-stacked, `MultiInputPolicy`) and once without; rounds
alternate the two so machine noise hits both, and medians are compared. The time covers the
whole learn call (env workers, the wrappers inside them, the policy and its updates), not
start-up. Why: a wrapper stack is worth training with only if it costs little (target >= 0.8x).

>>> VARIANTS["tile_tokens + frame stack"]
[{'name': 'tile_tokens'}]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv
from metabonk_gym.training.policies import make_ppo

#: The stacks compared: name -> `wrappers:` list (the config's frame stack applies to both).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "tile_tokens + frame stack": [{"name": "tile_tokens"}],
}


def _steps_per_second(
    env_id: str, wrappers: list[dict[str, Any]], steps: int, n_envs: int
) -> float:
    """Env steps per second of PPO's `learn(steps)` (after one warm-up rollout)."""
    from stable_baselines3.common.logger import configure

    cfg = resolve_config(
        env_id,
        overrides={
            "wrappers": wrappers,
            "n_envs": n_envs,
            "n_steps": 128,
            "batch_size": 128,
            "video_every": 0,
        },
    )
    venv = make_train_venv(env_id, cfg)
    try:
        model = make_ppo(cfg, venv)
        with tempfile.TemporaryDirectory() as log_dir:
            model.set_logger(configure(str(Path(log_dir)), []))
            model.learn(cfg.n_steps * n_envs)  # warm-up: workers, first update
            start = time.perf_counter()
            model.learn(steps, reset_num_timesteps=False)
            elapsed = time.perf_counter() - start
        return float(model.num_timesteps - cfg.n_steps * n_envs) / elapsed
    finally:
        close_venv(venv)


def run_train_wrappers(
    env_id: str = "MetaBonk/BonkQuest-v0", steps: int = 4096, rounds: int = 3, n_envs: int = 4
) -> dict[str, Any]:
    """Median env steps/s of each variant over `rounds` alternating rounds, and the ratio of
    the wrapped stack to none."""
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(rounds):
        for name, wrappers in VARIANTS.items():
            rates[name].append(_steps_per_second(env_id, wrappers, steps, n_envs))
    none = statistics.median(rates["none"])
    wrapped = statistics.median(rates["tile_tokens + frame stack"])
    return {
        "env": env_id,
        "steps_per_round": steps,
        "rounds": rounds,
        "n_envs": n_envs,
        "steps_per_s_none": none,
        "steps_per_s_tile_tokens_frame_stack": wrapped,
        "ratio": wrapped / none,
        "target": 0.8,
    }
