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

#: The folder of sheeprl's logs and checkpoints inside a Dreamer run directory.
_SHEEPRL_DIR = "sheeprl"


def is_dreamer_run(spec: str | Path) -> bool:
    """Whether `spec` is a run directory of `metabonk train dreamer` (its `config.yaml` and
    sheeprl's folder)."""
    path = Path(spec).expanduser()
    return path.is_dir() and (path / "config.yaml").is_file() and (path / _SHEEPRL_DIR).is_dir()


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
        from metabonk_gym.worldmodel.dreamer import DreamerPolicy

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
