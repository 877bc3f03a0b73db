"""`train_bc`: behavioural cloning from a Minari dataset into an SB3 PPO policy.

The `imitation` library would be the usual tool, but imitation 1.0.1 pins gymnasium ~=0.29 and
stable-baselines3 ~=2.2, which cannot be installed beside stable-retro 1.0.1 (gymnasium >= 1.0).
So BC is trained here directly over SB3's policy API (`policy.evaluate_actions`): the result is a
PPO model of exactly the class and preprocessing `train ppo` builds from the same config, and
`train ppo --init-from DIR/model.zip` fine-tunes it.

Besides the action log-likelihood, the value head is fitted to the dataset's discounted returns
(`bc_value_coef`), so PPO fine-tuning does not start with a random critic whose first updates
would wash out the cloned policy.

>>> discounted_returns(np.array([0.0, 0.0, 1.0]), 0.5).tolist()
[0.25, 0.5, 1.0]
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from metabonk_gym.rundir import RunDir, model_metadata, save_model
from metabonk_gym.runloop import RunLoop, seed_all
from metabonk_gym.training.config import TrainConfig, config_to_yaml, resolve_config
from metabonk_gym.training.datasets import check_dataset_env, check_dataset_fits, load_dataset
from metabonk_gym.training.envs import convert_frames, probe_env
from metabonk_gym.training.errors import DatasetError
from metabonk_gym.training.ppo import TrainResult
from metabonk_gym.training.safeload import SpacesEnv
from metabonk_gym.training.stacking import stack_episode, stacked_space
from metabonk_gym.training.wrapstack import describe_wrappers


def discounted_returns(rewards: np.ndarray, gamma: float) -> np.ndarray:
    out = np.zeros(len(rewards), dtype=np.float64)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def dataset_arrays(
    dataset: Any, cfg: TrainConfig, source: tuple[str, int]
) -> tuple[Any, np.ndarray, np.ndarray]:
    """(policy observations (N, H, W, C*stack), actions (N,), discounted returns (N,)); for a
    dataset recorded with a `wrappers:` stack (Dict observations) a dict of such arrays, each key
    stacked as `VecFrameStack` does."""

    target = (cfg.obs_type, cfg.downscale)
    xs: list[Any] = []
    ys: list[np.ndarray] = []
    gs: list[np.ndarray] = []
    for episode in dataset.iterate_episodes():
        if len(episode.actions) == 0:
            continue
        if isinstance(episode.observations, dict):  # the wrappers' keys, recorded as seen
            xs.append(
                {
                    k: stack_episode(np.asarray(v[:-1]), cfg.frame_stack)
                    for k, v in episode.observations.items()
                }
            )
        else:
            frames = convert_frames(np.asarray(episode.observations[:-1]), source, target)
            xs.append(stack_episode(frames, cfg.frame_stack))
        infos = episode.infos or {}
        labels = infos.get("expert_action")  # the agent's choice where recording added noise
        actions = labels[:-1] if labels is not None else episode.actions
        if np.ndim(episode.actions) == 2:  # Box actions (Megabonk's sticks and buttons)
            ys.append(np.asarray(episode.actions, dtype=np.float32))
        else:
            ys.append(np.asarray(actions, dtype=np.int64).reshape(-1))
        gs.append(discounted_returns(np.asarray(episode.rewards), cfg.gamma))
    if not xs:
        raise DatasetError(f"dataset {dataset.spec.dataset_id} has no steps")
    returns = np.concatenate(gs).astype(np.float32)
    if isinstance(xs[0], dict):
        return {k: np.concatenate([x[k] for x in xs]) for k in xs[0]}, np.concatenate(ys), returns
    return np.concatenate(xs), np.concatenate(ys), returns


@dataclass
class BcData:
    """A dataset made ready for cloning (`bc_data`): the policy's inputs, labels and returns.

    Args:
        x: policy observations (N, H, W, C*stack), or a dict of them per key.
        y: the actions to clone (N,) or (N, D) for Box actions.
        g: the discounted returns the value head is fitted to (N,).
        policy_space: the policy's (stacked) observation space.
        action_space: the env's action space.
    """

    x: Any
    y: np.ndarray
    g: np.ndarray
    policy_space: Any
    action_space: Any

    @property
    def samples(self) -> int:
        return len(self.y)


def bc_data(env_id: str, dataset_id: str, cfg: TrainConfig) -> BcData:
    """Load `dataset_id` and check it fits the env and the config's wrappers and frames."""
    dataset = load_dataset(dataset_id)
    check_dataset_env(dataset, env_id)
    obs_space, action_space, _ = probe_env(env_id, cfg)
    kwargs = check_dataset_fits(dataset, env_id, action_space, cfg.frameskip)
    source = (str(kwargs.get("obs_type", "rgb")), int(kwargs.get("downscale", 1)))
    recorded = dataset.spec.observation_space
    dict_obs = isinstance(obs_space, spaces.Dict) or isinstance(recorded, spaces.Dict)
    if dict_obs and recorded != obs_space:  # recorded with another wrapper stack
        raise DatasetError(
            f"dataset {dataset_id} has observations {recorded}, the config's wrappers "
            f"({describe_wrappers(cfg.wrappers)}) give {obs_space}; record it with the same "
            "wrappers: (metabonk record ... --config FILE)"
        )
    x, y, g = dataset_arrays(dataset, cfg, source)
    policy_space: Any
    if isinstance(obs_space, spaces.Dict):
        policy_space = spaces.Dict(
            {k: stacked_space(s, cfg.frame_stack) for k, s in obs_space.spaces.items()}  # type: ignore[arg-type]
        )
    else:
        policy_space = stacked_space(obs_space, cfg.frame_stack)  # type: ignore[arg-type]
        if x.shape[1:] != policy_space.shape:
            raise DatasetError(
                f"dataset frames become {x.shape[1:]}, the policy wants {policy_space.shape}"
            )
    return BcData(x, y, g, policy_space, action_space)


class Cloner:
    """One PPO policy fitted to a `BcData`: an epoch of Adam steps, and its accuracy.

    Args:
        model: the PPO model whose policy is fitted.
        data: the samples.
        cfg: the run's config (`bc_*` options, `max_grad_norm`).
    """

    def __init__(self, model: Any, data: BcData, cfg: TrainConfig) -> None:
        import torch

        self.policy, self.data, self.cfg = model.policy, data, cfg
        space = data.policy_space
        self.transposed: set[str] = set()
        self.channel_first = False
        if isinstance(space, spaces.Dict):  # the image keys SB3 turned channel-first
            self.transposed = {
                k for k, s in space.spaces.items() if model.observation_space[k].shape != s.shape
            }
        else:
            self.channel_first = model.observation_space.shape != space.shape
        self.box = isinstance(data.action_space, spaces.Box)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.bc_learning_rate)

    def observations(self, indices: np.ndarray) -> Any:
        import torch

        x, device = self.data.x, self.policy.device
        if isinstance(x, dict):
            return {
                k: torch.as_tensor(
                    np.transpose(v[indices], (0, 3, 1, 2)) if k in self.transposed else v[indices],
                    device=device,
                )
                for k, v in x.items()
            }
        obs = x[indices]
        if self.channel_first:
            obs = np.transpose(obs, (0, 3, 1, 2))
        return torch.as_tensor(obs, device=device)

    def batch(self, indices: np.ndarray) -> tuple[Any, Any, Any]:
        import torch

        device = self.policy.device
        return (
            self.observations(indices),
            torch.as_tensor(self.data.y[indices], device=device),
            torch.as_tensor(self.data.g[indices], device=device),
        )

    def accuracy(self, indices: np.ndarray) -> float:
        """Discrete: the share of steps whose most likely action is the dataset's; Box: the
        mean absolute error of the policy's mean action (clipped to the space)."""
        import torch

        if len(indices) == 0:
            return float("nan")
        hits = 0.0
        with torch.no_grad():
            for start in range(0, len(indices), 512):
                obs, act, _ = self.batch(indices[start : start + 512])
                dist = self.policy.get_distribution(obs)
                if self.box:
                    mean = dist.distribution.mean.clamp(-1.0, 1.0)
                    hits += float((mean - act).abs().mean(dim=1).sum())
                else:
                    hits += int((dist.distribution.probs.argmax(dim=1) == act).sum())
        return hits / len(indices)

    def epoch(self, train: np.ndarray, val: np.ndarray) -> dict[str, float]:
        """One pass of Adam over `train` (in its order); the mean losses, and the accuracy on
        `train` and `val` (when it has samples) after it."""
        import torch

        cfg, policy = self.cfg, self.policy
        totals = {"loss": 0.0, "value_loss": 0.0, "entropy": 0.0}
        batches = 0
        for start in range(0, len(train), cfg.bc_batch_size):
            obs, act, ret = self.batch(train[start : start + cfg.bc_batch_size])
            values, log_prob, entropy = policy.evaluate_actions(obs, act)
            value_loss = torch.nn.functional.mse_loss(values.flatten(), ret)
            ent = entropy.mean() if entropy is not None else torch.zeros(())
            loss = -log_prob.mean() - cfg.bc_ent_coef * ent + cfg.bc_value_coef * value_loss
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
            totals["loss"] += loss.item()
            totals["value_loss"] += value_loss.item()
            totals["entropy"] += ent.item()
            batches += 1
        policy.set_training_mode(False)
        stats = {k: v / max(batches, 1) for k, v in totals.items()}
        name = "action_error" if self.box else "accuracy"
        stats[name] = self.accuracy(train)
        if len(val):
            stats[f"val_{name}"] = self.accuracy(val)
        policy.set_training_mode(True)
        return stats


def train_bc(
    env_id: str,
    dataset_id: str,
    run_dir: str | Path,
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    val_fraction: float = 0.1,
    progress: bool = False,
) -> TrainResult:
    """Clone the dataset's actions into a PPO policy saved as `run_dir/model.zip`.

    TensorBoard gets `bc/loss`, `bc/accuracy`, `bc/val_accuracy`, `bc/value_loss` and
    `bc/entropy` per epoch; with Box actions (Megabonk's) `bc/action_error` and
    `bc/val_action_error` (mean absolute error of the policy's mean action) instead of the
    accuracies. Ctrl-C / SIGTERM (`process.stop_on_signals`) keeps the clone as it stands (its
    finished epochs and the part of the next one) as `model.zip`, marked interrupted.
    """
    from stable_baselines3.common.vec_env import DummyVecEnv

    from metabonk_gym.training.policies import make_ppo

    cfg = resolve_config(env_id, config_file, overrides)
    run = RunDir(Path(run_dir))
    run.check_new()
    data = bc_data(env_id, dataset_id, cfg)
    existed = run.path.exists()
    run.path.mkdir(parents=True, exist_ok=True)
    run.write_config(config_to_yaml(cfg))
    run.write_state(env_id=env_id, algo="bc", status="running", dataset=dataset_id)

    rng = seed_all(cfg.seed, cfg.torch_threads)
    samples = data.samples
    order = rng.permutation(samples)
    n_val = int(samples * val_fraction) if samples >= 20 else 0
    val, train = order[:n_val], order[n_val:]
    venv = DummyVecEnv([lambda: SpacesEnv(data.policy_space, data.action_space)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PPO's rollout-size hints do not apply to cloning
        model = make_ppo(cfg, venv)
    cloner = Cloner(model, data, cfg)
    stats: dict[str, float] = {}

    def save() -> None:
        model.policy.set_training_mode(False)
        meta = model_metadata(
            env_id, "bc", cfg.to_dict(), dataset=dataset_id, samples=samples, **stats
        )
        save_model(model, run.model, meta)

    def interrupted(epochs_done: int) -> None:
        if epochs_done:
            save()
        model.policy.set_training_mode(False)
        run.write_state(status="interrupted", epochs_done=epochs_done, samples=samples, **stats)

    loop = RunLoop(
        total=cfg.bc_epochs,
        tensorboard=run.tensorboard,
        on_interrupt=interrupted,
        on_error=lambda _exc: run.discard_new(existed),
        bar="BC" if progress else "",
        bar_keys=("loss", "accuracy", "val_accuracy"),
    )
    try:
        with loop:
            model.policy.set_training_mode(True)
            for epoch in loop.steps():
                rng.shuffle(train)
                stats = cloner.epoch(train, val)
                loop.report(epoch, stats, prefix="bc/")
            save()
            run.write_state(status="finished", num_timesteps=0, samples=samples, **stats)
    finally:
        venv.close()
    return TrainResult(
        run_dir=run.path,
        model_path=run.model,
        num_timesteps=0,
        extra={"samples": samples, **stats},
    )
