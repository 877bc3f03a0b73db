"""RLlib's side of `metabonk_gym.training.rllib`: the SB3 policy as an RLModule, the env creator
runners call, the episode callbacks that feed TensorBoard, and PPO/APPO that export `model.zip`.

This module imports ray at module level; only `metabonk_gym.training.rllib` imports it, inside
functions, so `import metabonk_gym` never imports ray. The RLModule wraps the very policy
`make_ppo` builds for the SB3 path (same extractor, heads and initialisation), so a run's weights
save as an ordinary SB3 model zip that `metabonk eval` and `play --agent` load.

>>> score(__import__("metabonk_gym.training.callbacks", fromlist=["x"]).EpisodeStats())
-1000000000.0
>>> train_scalars({"learners": {"default_policy": {"vf_loss": 0.5, "entropy": 1.0}}})
{'train/value_loss': 0.5, 'train/entropy': 1.0, 'train/entropy_loss': -1.0}
"""

from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from ray.rllib.algorithms.appo import APPO
from ray.rllib.algorithms.ppo import PPO
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import (
    TARGET_NETWORK_ACTION_DIST_INPUTS,
    TargetNetworkAPI,
    ValueFunctionAPI,
)
from ray.rllib.core.rl_module.torch import TorchRLModule

from metabonk_gym.rundir import model_metadata, save_model
from metabonk_gym.training.callbacks import episode_number as _number
from metabonk_gym.training.callbacks import episode_scalars
from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.rllib_envs import SpacesEnv

#: `metrics_logger` key of the finished episodes' records (an item series).
EPISODES_KEY = "metabonk_episodes"


# ---------------------------------------------------------------------------- the RLModule


class SB3PolicyModule(TorchRLModule, ValueFunctionAPI, TargetNetworkAPI):
    """SB3's `ActorCriticPolicy` (built by `make_ppo` from the run's config) as an RLlib module.

    Observations arrive as the env gives them (channels last); images are transposed to the
    policy's channels-first layout as SB3's `VecTransposeImage` does, and scaled by SB3's own
    preprocessing. Discrete actions give logits; Box actions the Gaussian's mean and SB3's
    state-independent log std (RLlib's `TorchDiagGaussian` inputs). APPO's target network is a
    copy of the whole policy.

    Args (via `model_config`): `cfg`, the run's `TrainConfig` as a dict.
    """

    def setup(self) -> None:
        from metabonk_gym.training.policies import make_ppo

        model_config: Any = self.model_config
        cfg = TrainConfig.from_dict(dict(model_config["cfg"]))
        torch.set_num_threads(cfg.torch_threads)
        obs_space: Any = self.observation_space
        model = make_ppo(cfg, SpacesEnv(obs_space, self.action_space))  # type: ignore[arg-type]
        self.policy = model.policy
        self._transpose = _transposed_keys(obs_space, model.policy.observation_space)
        self._box = isinstance(self.action_space, spaces.Box)
        if not isinstance(self.action_space, (spaces.Box, spaces.Discrete)):
            raise ValueError(
                f"RLlib training takes Discrete or Box actions, not {self.action_space}"
            )

    def _layout(self, obs: Any) -> Any:
        if isinstance(obs, Mapping):
            return {
                k: (v.permute(0, 3, 1, 2) if k in self._transpose else v) for k, v in obs.items()
            }
        return obs.permute(0, 3, 1, 2) if "" in self._transpose else obs

    def _features(self, policy: Any, obs: Any) -> Any:
        return policy.extract_features(self._layout(obs))

    def _dist_inputs(self, policy: Any, features: Any) -> Any:
        latent_pi = policy.mlp_extractor.forward_actor(features)
        out = policy.action_net(latent_pi)
        if self._box:
            out = torch.cat([out, policy.log_std.expand_as(out)], dim=-1)
        return out

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        features = self._features(self.policy, batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: self._dist_inputs(self.policy, features)}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        features = self._features(self.policy, batch[Columns.OBS])
        return {
            Columns.ACTION_DIST_INPUTS: self._dist_inputs(self.policy, features),
            Columns.EMBEDDINGS: features,
        }

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
        if embeddings is None:
            embeddings = self._features(self.policy, batch[Columns.OBS])
        latent_vf = self.policy.mlp_extractor.forward_critic(embeddings)
        return self.policy.value_net(latent_vf).squeeze(-1)

    def make_target_networks(self) -> None:
        self._target_policy = make_target_network(self.policy)

    def get_target_network_pairs(self) -> list[tuple[Any, Any]]:
        return [(self.policy, self._target_policy)]

    def forward_target(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        features = self._features(self._target_policy, batch[Columns.OBS])
        return {TARGET_NETWORK_ACTION_DIST_INPUTS: self._dist_inputs(self._target_policy, features)}

    def get_non_inference_attributes(self) -> list[str]:
        return ["_target_policy"] if hasattr(self, "_target_policy") else []


def _transposed_keys(env_space: spaces.Space, policy_space: spaces.Space) -> set[str]:
    """Keys ("" for a Box) whose images SB3 transposed to channels first."""
    if isinstance(env_space, spaces.Dict):
        return {
            k
            for k, s in env_space.spaces.items()
            if len(s.shape or ()) == 3 and s.shape != policy_space[k].shape  # type: ignore[index]
        }
    if len(env_space.shape or ()) == 3 and env_space.shape != policy_space.shape:
        return {""}
    return set()


# ---------------------------------------------------------------------------- export


def module_state(algo: Any) -> dict[str, Any]:
    """The learner's module weights (a torch state dict of `SB3PolicyModule`)."""
    state = algo.learner_group.get_state(components="learner/rl_module/default_policy")
    weights = state["learner"]["rl_module"]["default_policy"]
    return {k: torch.as_tensor(np.array(v)) for k, v in weights.items()}  # a writable copy


def export_policy(algo: Any, path: Path, steps: int) -> Path:
    """Write the algorithm's policy as a metabonk SB3 model zip (`model_metadata` inside)."""
    from metabonk_gym.training.policies import make_ppo

    env_config = algo.config.env_config
    cfg = TrainConfig.from_dict(dict(env_config["cfg"]))
    model = make_ppo(cfg, SpacesEnv(algo.config.observation_space, algo.config.action_space))
    weights = {
        k[len("policy.") :]: v for k, v in module_state(algo).items() if k.startswith("policy.")
    }
    model.policy.load_state_dict(weights)
    model.num_timesteps = int(steps)
    meta = model_metadata(
        env_config["env_id"], "ppo", cfg.to_dict(), engine="rllib", rllib_algo=env_config["algo"]
    )
    return save_model(model, Path(path), meta)


class _ExportMixin:
    """`save_checkpoint` also writes `model.zip` (the policy, as SB3) into the checkpoint."""

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        super().save_checkpoint(checkpoint_dir)  # type: ignore[misc]
        steps = lifetime_steps(self)
        export_policy(self, Path(checkpoint_dir) / "model.zip", steps)


class MetabonkPPO(_ExportMixin, PPO):
    """RLlib PPO whose checkpoints hold `model.zip` (see `_ExportMixin`)."""


class MetabonkAPPO(_ExportMixin, APPO):
    """RLlib APPO whose checkpoints hold `model.zip` (see `_ExportMixin`)."""


def lifetime_steps(algo: Any) -> int:
    """Env steps the algorithm has sampled over its life (restored with a checkpoint)."""
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

    with contextlib.suppress(Exception):
        value = algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0)
        return int(value or 0)
    return 0


# ---------------------------------------------------------------------------- callbacks


class MetabonkCallbacks(RLlibCallback):
    """Per episode (in the runners): its return, length, `success`, the game variables at its end
    and each reward term's sum, as one record of the `metabonk_episodes` item series. Per training
    iteration (in the algorithm's process): `EpisodeStats` over those records and the scalars the
    SB3 path writes (`episode/*`, `game/*`, `reward_terms/*`, `rollout/*`, `time/fps`, `train/*`)
    into `env_config["tensorboard"]` (a Tune member: its own subfolder), plus `result["metabonk"]`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._stats: Any = None
        self._logger: Any = None
        self._last: tuple[float, int] | None = None

    def on_episode_step(self, *, episode: Any, **kwargs: Any) -> None:
        info = episode.get_infos(-1) or {}
        terms = episode.custom_data.setdefault("terms", defaultdict(float))
        for name, value in (info.get("reward_terms") or {}).items():
            terms[name] += float(value)

    def on_episode_end(
        self,
        *,
        episode: Any,
        prev_episode_chunks: list[Any] | None = None,
        env_runner: Any = None,
        metrics_logger: Any = None,
        **kwargs: Any,
    ) -> None:
        info = episode.get_infos(-1) or {}
        names = (env_runner.config.env_config.get("info_names") if env_runner else None) or []
        chunks = [*(prev_episode_chunks or []), episode]  # cut at rollout boundaries
        record = {
            "r": float(sum(c.get_return() for c in chunks)),
            "l": int(sum(len(c) for c in chunks)),
            "won": bool(info["success"]) if "success" in info else None,
            "vars": {n: v for n in names if (v := _number(info.get(n))) is not None},
            "terms": dict(episode.custom_data.get("terms") or {}),
        }
        if metrics_logger is not None:
            metrics_logger.log_value(EPISODES_KEY, record, reduce="item_series")

    def on_train_result(self, *, algorithm: Any, result: dict, **kwargs: Any) -> None:
        from metabonk_gym.training.callbacks import EpisodeStats

        env_config = algorithm.config.env_config
        if self._stats is None:
            self._stats = EpisodeStats(window=int(env_config["cfg"].get("win_window", 100)))
        runners = result.get("env_runners") or {}
        records = runners.pop(EPISODES_KEY, None)
        records = records if isinstance(records, list) else []
        for rec in records:
            self._stats.add(rec["r"], rec["l"], rec["won"])
        steps = lifetime_steps(algorithm)
        scalars = episode_scalars(records, self._stats)
        scalars.update(train_scalars(result))
        now = _now()
        if self._last is not None and now > self._last[0] and steps > self._last[1]:
            scalars["time/fps"] = (steps - self._last[1]) / (now - self._last[0])
        self._last = (now, steps)
        self._write(algorithm, scalars, steps)
        result["metabonk"] = {
            "steps": steps,
            "episodes": self._stats.episodes,
            "win_rate": self._stats.win_rate(),
            "mean_return": self._stats.mean_return(),
            "score": score(self._stats),
            "fps": scalars.get("time/fps"),
        }
        result["metabonk_steps"] = steps  # top level: what Tune's PBT schedules and ranks by
        result["metabonk_score"] = result["metabonk"]["score"]

    def _write(self, algorithm: Any, scalars: dict[str, float], steps: int) -> None:
        folder = algorithm.config.env_config.get("tensorboard")
        if not folder:
            return
        if self._logger is None:
            from stable_baselines3.common.logger import configure

            trial = member_name(algorithm)
            path = (
                Path(folder) / trial
                if algorithm.config.env_config.get("per_trial") and trial
                else Path(folder)
            )
            self._logger = configure(str(path), ["tensorboard"])
        for tag, value in scalars.items():
            if value is not None and math.isfinite(value):
                self._logger.record(tag, value)
        self._logger.record("time/total_timesteps", steps)
        self._logger.dump(steps)


def member_name(algorithm: Any) -> str | None:
    """A Tune member's trial folder name (None outside Tune)."""
    storage = getattr(algorithm, "_storage", None)
    if storage is not None and getattr(storage, "trial_fs_path", None):
        return Path(storage.trial_fs_path).name
    name = getattr(algorithm, "trial_name", None)
    return None if name in (None, "default") else str(name)


def _now() -> float:
    import time

    return time.monotonic()


#: RLlib learner results -> the SB3 path's `train/*` names.
TRAIN_NAMES: dict[str, str] = {
    "policy_loss": "train/policy_gradient_loss",
    "vf_loss": "train/value_loss",
    "entropy": "train/entropy",
    "total_loss": "train/loss",
    "default_optimizer_learning_rate": "train/learning_rate",
    "vf_explained_var": "train/explained_variance",
}


def train_scalars(result: Mapping[str, Any]) -> dict[str, float]:
    """`train/*` scalars from an RLlib result's `learners/default_policy`."""
    learner = ((result.get("learners") or {}).get("default_policy")) or {}
    out = {}
    for key, tag in TRAIN_NAMES.items():
        value = _number(learner.get(key))
        if value is not None:
            out[tag] = value
    if "train/entropy" in out:
        out["train/entropy_loss"] = -out["train/entropy"]
    return out


def score(stats: Any) -> float:
    """What PBT ranks members by (`EpisodeStats.score`: the win rate where episodes are won, else
    the mean return; -1e9 before any episode ends)."""
    return float(stats.score())
