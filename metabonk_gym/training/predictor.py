"""Train the learned frame predictor (`metabonk train predictor`) on recorded episodes.

Episodes are played by a "sticky" random policy (each random action is held for 2-9 steps, as a
player holds a direction), so sprites move the way they move in play. Training fits the tiny
conv net of `metabonk_gym.wrappers.predictor_net` to the next frame (mean squared error, which
is what PSNR measures) on random crops, on the CPU, within a time budget; it reports PSNR at
t+1 on a held-out episode of each game next to the `copy` predictor's.

>>> import numpy as np
>>> actions = sticky_actions(np.random.default_rng(0), 6, 10)
>>> len(actions), int(actions.max()) < 6
(10, True)
>>> DEFAULT_ENVS
('MetaBonk/BonkQuest-v0', 'MetaBonk/BonkArena-v0')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: The default envs to train on: the bundled games written for this suite (deterministic
#: frames; the predictor's figures are measured on them). `--env` adds any other.
DEFAULT_ENVS: tuple[str, ...] = ("MetaBonk/BonkQuest-v0", "MetaBonk/BonkArena-v0")


def sticky_actions(
    rng: np.random.Generator, n_actions: int, steps: int, hold: tuple[int, int] = (2, 10)
) -> np.ndarray:
    """`steps` random discrete actions, each held for `hold[0]`..`hold[1] - 1` steps."""
    out = np.empty(steps, np.int64)
    i = 0
    while i < steps:
        n = int(rng.integers(*hold))
        out[i : i + n] = rng.integers(n_actions)
        i += n
    return out


def _n_actions(env: Any) -> int:
    from gymnasium import spaces

    if not isinstance(env.action_space, spaces.Discrete):
        raise TypeError(
            f"the sticky random policy needs a Discrete action space, not {env.action_space}"
        )
    return int(env.action_space.n)


def record_episode(env_id: str, seed: int, steps: int, **env_kwargs: Any) -> np.ndarray:
    """Frames (T, H, W, 3) uint8 of one episode under the sticky random policy (the env is
    closed again: one emulator per process)."""
    import gymnasium as gym

    import metabonk_gym  # noqa: F401

    env = gym.make(env_id, **env_kwargs)
    try:
        obs, _ = env.reset(seed=seed)
        actions = sticky_actions(np.random.default_rng(seed), _n_actions(env), steps)
        frames = [obs]
        for action in actions:
            obs, _, terminated, truncated, _ = env.step(int(action))
            frames.append(obs)
            if terminated or truncated:
                break
        return np.stack(frames)
    finally:
        env.close()


def record_episodes(
    env_ids: Sequence[str] = DEFAULT_ENVS,
    episodes: int = 3,
    steps: int = 300,
    seed: int = 0,
    **env_kwargs: Any,
) -> list[np.ndarray]:
    """`episodes` episodes of each env, seeds `seed`, `seed + 1`, ..."""
    return [
        record_episode(env_id, seed + i, steps, **env_kwargs)
        for env_id in env_ids
        for i in range(episodes)
    ]


def _batch(
    episodes: list[np.ndarray], rng: np.random.Generator, size: int, crop: int, context: int
) -> tuple[Any, Any]:
    import torch

    from metabonk_gym.wrappers.predictor_net import to_input

    xs, ys = [], []
    for _ in range(size):
        ep = episodes[int(rng.integers(len(episodes)))]
        t = int(rng.integers(context - 1, len(ep) - 1))
        h, w = ep.shape[1:3]
        ch, cw = min(crop, h), min(crop, w)
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        clip = ep[t - context + 1 : t + 2, y0 : y0 + ch, x0 : x0 + cw]
        xs.append(clip[:context])
        ys.append(clip[context])
    x = to_input(np.stack(xs))
    now = torch.as_tensor(np.stack([c[-1] for c in xs])).float().div(255.0).permute(0, 3, 1, 2)
    target = torch.as_tensor(np.stack(ys)).float().div(255.0).permute(0, 3, 1, 2)
    return x, target - now


def heldout_psnr(
    model: Any, episode: np.ndarray, context: int, every: int = 4
) -> tuple[float, float]:
    """PSNR at t+1 over an episode (from the mean squared error): (model, copy)."""
    from metabonk_gym.wrappers.predictor_net import rollout

    err_model = err_copy = 0.0
    n = 0
    for t in range(context - 1, len(episode) - 1, every):
        pred = rollout(model, episode[t - context + 1 : t + 1], 1)[0].astype(np.float64)
        real = episode[t + 1].astype(np.float64)
        err_model += float(np.mean((pred - real) ** 2))
        err_copy += float(np.mean((episode[t].astype(np.float64) - real) ** 2))
        n += 1

    def to_db(err: float) -> float:
        return float(10 * np.log10(255.0**2 / max(err / max(n, 1), 1e-10)))

    return to_db(err_model), to_db(err_copy)


def train_predictor(
    out: str | Path = "predictor.pt",
    env_ids: Sequence[str] = DEFAULT_ENVS,
    episodes: int = 3,
    steps: int = 300,
    seed: int = 0,
    iterations: int = 1500,
    time_limit_s: float = 180.0,
    batch_size: int = 16,
    crop: int = 64,
    lr: float = 2e-3,
    width: int = 16,
    threads: int | None = None,
    frames: list[np.ndarray] | None = None,
    validation: list[np.ndarray] | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Record episodes (or use `frames`), train the tiny predictor, save it to `out`.

    Stops after `iterations` or `time_limit_s` seconds of training, whichever comes first.
    Validation uses one held-out episode per env (seed `seed + 10_000`) unless `validation`
    is given. Returns the figures written into the model file.
    """
    import torch

    from metabonk_gym.wrappers.predictor_net import TinyPredictor, save_model

    log = log or (lambda _msg: None)
    if threads is not None:
        torch.set_num_threads(int(threads))
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    if frames is None:
        log(f"recording {episodes} episode(s) x {steps} steps of {', '.join(env_ids)}")
        frames = record_episodes(env_ids, episodes, steps, seed)
    if validation is None:
        validation = record_episodes(env_ids, 1, steps, seed + 10_000)
    model = TinyPredictor(width=width)
    context = model.context
    usable = [ep for ep in frames if len(ep) > context]
    if not usable:
        raise ValueError(f"training needs episodes longer than {context} frames")
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(iterations, 1))
    recorded = time.perf_counter() - start
    train_start = time.perf_counter()
    losses: list[float] = []
    done = 0
    model.train()
    for done in range(1, iterations + 1):  # noqa: B007 (the count is reported)
        x, target = _batch(usable, rng, batch_size, crop, context)
        loss = torch.nn.functional.mse_loss(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if done % 100 == 0:
            log(f"iteration {done}: loss {np.mean(losses[-100:]):.6f}")
        if time.perf_counter() - train_start > time_limit_s:
            break
    train_seconds = time.perf_counter() - train_start
    model.eval()
    metrics: dict[str, Any] = {
        "iterations": done,
        "train_seconds": train_seconds,
        "record_seconds": recorded,
        "final_loss": float(np.mean(losses[-50:])) if losses else None,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    for env_id, episode in zip(env_ids, validation):
        ours, copy = heldout_psnr(model, episode, context)
        name = env_id.split("/")[-1].split("-")[0]
        metrics[f"{name}_psnr_t1"] = ours
        metrics[f"{name}_copy_psnr_t1"] = copy
        metrics[f"{name}_psnr_vs_copy_db"] = ours - copy
    path = save_model(model, out, metrics)
    metrics["path"] = str(path)
    log(f"saved {path}")
    return metrics
