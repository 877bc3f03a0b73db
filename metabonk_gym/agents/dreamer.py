"""`DreamerAgent`: a `metabonk train dreamer` run directory as an agent for play, record and eval.

What: it wraps `metabonk_gym.worldmodel.dreamer.DreamerPolicy` (the run's actor, read with
`torch.load(weights_only=True)`) in the `Agent` protocol; its recurrent state is reset at every
episode start. Why: `metabonk eval RUN_DIR` and `play --agent RUN_DIR` load a Dreamer run as
they load a PPO zip, with no branch on the algorithm in the callers.

>>> is_dreamer_run("/nonexistent")
False
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from metabonk_gym.experts.base import AgentError
from metabonk_gym.rundir import RunDir
from metabonk_gym.worldmodel.dreamer import SHEEPRL_DIR, DreamerPolicy

#: How `train dreamer` makes its env: `gym.make(ENV_ID, **env_kwargs)`, so the env's own
#: defaults for the settings a training config would otherwise change.
_ENV_DEFAULTS = {"obs_type": "rgb", "downscale": 1, "frameskip": 4}


def is_dreamer_run(spec: str | Path) -> bool:
    """Whether `spec` is a run directory of `metabonk train dreamer` (its `config.yaml` and
    sheeprl's folder)."""
    path = Path(spec).expanduser()
    return path.is_dir() and (path / "config.yaml").is_file() and (path / SHEEPRL_DIR).is_dir()


def dreamer_base_config(run_dir: str | Path, env_id: str) -> dict[str, Any]:
    """The config base an episode of a Dreamer run needs: the frames it was trained on (the
    env's own defaults, then the run's `env_kwargs`) and no frame stack; `AgentError` when the
    run was made for another env."""
    stored = RunDir(Path(run_dir).expanduser()).read_config()
    theirs = str(stored.get("env_id", "")).split(":")[-1]
    if theirs and theirs != env_id.split(":")[-1]:
        raise AgentError(f"{run_dir} was trained on {theirs}, not {env_id}")
    env_kwargs = dict((stored.get("dreamer") or {}).get("env_kwargs") or {})
    env_kwargs.pop("max_episode_steps", None)  # training's episode limit: eval sets its own
    base: dict[str, Any] = {k: env_kwargs.pop(k, v) for k, v in _ENV_DEFAULTS.items()}
    base["frame_stack"] = 1
    if "state" in env_kwargs:
        base["state"] = env_kwargs.pop("state")
    if env_kwargs:
        base["env_kwargs"] = env_kwargs
    if stored.get("wrappers"):  # the stack it was trained with (checked when the config resolves)
        base["wrappers"] = stored["wrappers"]
    return base


def dreamer_env_overrides(run_dir: str | Path) -> dict[str, Any]:
    """The env kwargs a Dreamer run needs to see frames as in training (as
    `model_env_overrides` for a model zip)."""
    stored = RunDir(Path(run_dir).expanduser()).read_config()
    base = dreamer_base_config(run_dir, str(stored.get("env_id", "")))
    return {k: base[k] for k in _ENV_DEFAULTS}


class DreamerAgent:
    """Acts with a Dreamer run's actor on the env's own frames (resized as in training).

    Args:
        run_dir: a `metabonk train dreamer` run directory with at least one checkpoint.
        env: the env it acts in; `AgentError` when it is another game or has other actions.
        deterministic: take the most likely action (default) instead of sampling it.
        trust: accepted for symmetry with model zips; a Dreamer checkpoint is always read
            without unpickling (`weights_only=True`).
    """

    def __init__(
        self, run_dir: str | Path, env: gym.Env, deterministic: bool = True, trust: bool = False
    ) -> None:
        del trust  # nothing in a Dreamer checkpoint needs unpickling
        self.name = str(run_dir)
        self.policy = DreamerPolicy(run_dir, greedy=deterministic)
        spec = env.unwrapped.spec
        ours = spec.id.split(":")[-1] if spec is not None else None
        theirs = self.policy.env_id.split(":")[-1]
        if ours is not None and ours != theirs:
            raise AgentError(f"{run_dir} was trained on {theirs}, not {ours}")
        n = getattr(env.action_space, "n", None)
        if n is None or int(n) != self.policy.n_actions:
            raise AgentError(
                f"{run_dir} has {self.policy.n_actions} discrete actions, the env {env.action_space}"
            )

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        self.policy.reset()

    def act(self, obs: Any, info: dict[str, Any]) -> int:
        return self.policy(obs)
