"""A warm start for the backward curriculum: behavioural cloning of the demonstration.

The backward algorithm (`metabonk_gym.training.backward`) begins with a random policy near the
demonstration's end and moves the start back one point at a time, so its PPO learns every stretch
of the path from scratch. Go-Explore's paper offers the other road, cloning the archive's
trajectory first: here the demonstration's actions are replayed in the training envs themselves
(the same frames, stacking and transposition the policy sees, never RAM), once clean and the
other passes with sticky actions so the frames also cover states a little off the path (each
labelled with the demonstration's action at that step: a noisy replay, as in DART), and the
policy learns them (cross-entropy on the actions, the value head on the discounted returns). PPO
with the curriculum then starts from a policy that already walks the path.

>>> discounted([0.0, 0.0, 1.0], 0.5).tolist()
[0.25, 0.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def discounted(rewards: Sequence[float], gamma: float) -> np.ndarray:
    """Discounted returns of one pass, from each step to its end."""
    out = np.zeros(len(rewards), np.float32)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


@dataclass
class DemoFrames:
    """The cloning set: the policy's observations along the replays, the demonstration's
    action at each, the discounted return from there, and whether the clean pass (no sticky
    actions) succeeded."""

    obs: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    clean_success: bool
    passes: int


def _one_round(
    venv: Any, actions: np.ndarray, active: int, gamma: float
) -> tuple[list[np.ndarray], list[int], list[np.ndarray], bool]:
    """Replay `actions` in the first `active` envs of `venv` at once (the rest play along
    unrecorded); the frames, labels and returns of each, and whether env 0's episode ended in
    success."""
    obs = venv.reset()
    alive = np.zeros(venv.num_envs, bool)
    alive[:active] = True
    frames: list[list[np.ndarray]] = [[] for _ in range(active)]
    labels: list[list[int]] = [[] for _ in range(active)]
    rewards: list[list[float]] = [[] for _ in range(active)]
    success = False
    for action in actions:
        for i in np.flatnonzero(alive):
            frames[i].append(np.array(obs[i]))
            labels[i].append(int(action))
        obs, reward, dones, infos = venv.step(np.full(venv.num_envs, int(action)))
        for i in np.flatnonzero(alive):
            rewards[i].append(float(reward[i]))
            if dones[i]:
                alive[i] = False
                success = success or (i == 0 and bool(infos[i].get("success")))
        if not alive.any():
            break
    out_frames = [np.stack(f) for f in frames if f]
    out_returns = [discounted(r, gamma) for r in rewards if r]
    return out_frames, [a for lab in labels for a in lab], out_returns, success


def collect_demo_frames(
    venv: Any,
    actions: np.ndarray,
    passes: int,
    sticky: float,
    gamma: float,
    start: tuple[str | None, int],
    max_steps: int,
) -> DemoFrames:
    """Replay the demonstration's `actions` `passes` times in the training `venv` (SB3's, as
    the model sees it) from `start` (state, game seed): the first pass clean, the others with
    sticky actions `sticky`; the envs' sticky actions are set back to `sticky` after."""
    n = venv.num_envs
    venv.env_method("set_start", start[0], [start[1]])
    venv.set_attr("_max_episode_steps", max_steps)
    frames: list[np.ndarray] = []
    labels: list[int] = []
    returns: list[np.ndarray] = []
    clean = False
    try:
        for first in range(0, passes, n):
            venv.set_attr("sticky_action_prob", sticky)
            if first == 0:
                venv.set_attr("sticky_action_prob", 0.0, indices=[0])
            f, lab, r, success = _one_round(venv, actions, min(n, passes - first), gamma)
            clean = clean or (first == 0 and success)
            frames.extend(f)
            labels.extend(lab)
            returns.extend(r)
    finally:
        venv.set_attr("sticky_action_prob", sticky)
    return DemoFrames(
        np.concatenate(frames),
        np.asarray(labels, np.int64),
        np.concatenate(returns),
        clean,
        passes,
    )


def clone_demo(
    model: Any,
    data: DemoFrames,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int = 0,
    value_coef: float = 0.5,
) -> dict[str, float]:
    """Fit `model`'s policy to `data` for `epochs` passes (Adam, minibatches); the last
    epoch's loss and the accuracy on every frame after."""
    import torch

    policy = model.policy
    policy.set_training_mode(True)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    device = policy.device
    obs = torch.as_tensor(data.obs, device=device)
    actions = torch.as_tensor(data.actions, device=device)
    returns = torch.as_tensor(data.returns, device=device)
    loss_sum, batches = 0.0, 0
    for _ in range(epochs):
        loss_sum, batches = 0.0, 0
        for chunk in np.array_split(
            rng.permutation(len(actions)), max(1, len(actions) // batch_size)
        ):
            index = torch.as_tensor(chunk, device=device)
            values, log_prob, _ = policy.evaluate_actions(obs[index], actions[index])
            value_loss = torch.nn.functional.mse_loss(values.flatten(), returns[index])
            loss = -log_prob.mean() + value_coef * value_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_sum, batches = loss_sum + float(loss.item()), batches + 1
    policy.set_training_mode(False)
    hits = 0
    with torch.no_grad():
        for start in range(0, len(actions), 512):
            dist = policy.get_distribution(obs[start : start + 512])
            guess = dist.distribution.probs.argmax(dim=1)
            hits += int((guess == actions[start : start + 512]).sum())
    return {
        "bc_loss": loss_sum / max(batches, 1),
        "bc_accuracy": hits / max(len(actions), 1),
        "bc_frames": float(len(actions)),
    }


__all__ = ["DemoFrames", "clone_demo", "collect_demo_frames", "discounted"]
