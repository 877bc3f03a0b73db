"""Running an agent for whole episodes in one env: shared by `play`, `record` and `eval`.

The env is built from the same config as training (`resolve_config`), so an evaluation sees the
episodes a model was trained on: for a model zip, its own config (preprocessing, reward, goal,
start) is the base and flags may change only what does not alter what the model sees.

>>> r = EpisodeResult(index=0, seed=3, ret=1.5, length=10, success=True)
>>> r.to_dict()["return"]
1.5
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class EpisodeResult:
    """One episode: return, length, success (goal or win), how it ended, final game variables."""

    index: int
    seed: int | None
    ret: float
    length: int
    success: bool
    won: bool = False
    lost: bool = False
    terminated: bool = False
    truncated: bool = False
    stopped: bool = False
    game_seed: int | None = None
    variables: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "seed": self.seed,
            "game_seed": self.game_seed,
            "return": self.ret,
            "length": self.length,
            "won": self.success,
            "game_won": self.won,
            "lost": self.lost,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "stopped": self.stopped,
            "variables": self.variables,
        }


@dataclass
class Trajectory:
    """What `record` stores: observations (one more than actions), actions, rewards, ends, infos."""

    observations: list[np.ndarray] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminations: list[bool] = field(default_factory=list)
    truncations: list[bool] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    #: The agent's own choice at each step (differs from `actions` where noise replaced it).
    labels: list[Any] = field(default_factory=list)


def _stored(action: Any) -> Any:
    """An action as a dataset keeps it: an int (Discrete), else a copy of the array
    (MultiBinary buttons, Megabonk's Box)."""
    return int(action) if np.ndim(action) == 0 else np.array(action)


def info_numbers(info: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers and flags of an info dict as plain Python values (what episode results keep).

    >>> import numpy as np
    >>> info_numbers({"hp": np.int16(3), "won": np.bool_(True), "x": 1.5, "name": "room"})
    {'hp': 3, 'won': True, 'x': 1.5}
    """
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, (bool, np.bool_)):
            out[key] = bool(value)
        elif isinstance(value, (int, np.integer)):
            out[key] = int(value)
        elif isinstance(value, (float, np.floating)):
            out[key] = float(value)
    return out


def run_episode(
    env: Any,
    agent: Any,
    *,
    index: int = 0,
    seed: int | None = None,
    trajectory: Trajectory | None = None,
    on_frame: Callable[[np.ndarray], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    noise: float = 0.0,
    rng: np.random.Generator | None = None,
) -> EpisodeResult:
    """Play one episode of `agent` in `env` (which applies its own time limit).

    `trajectory` collects the data a dataset needs; `on_frame` gets every RGB frame (videos);
    `should_stop()` returning True (a closed window, Ctrl-C) ends the episode early with
    `stopped=True`. With `noise` > 0, that fraction of steps executes a random action instead of
    the agent's (DART-style demonstrations: the data then shows how the agent recovers from
    mistakes); `trajectory.labels` keeps the agent's choices.

    An agent with `episode_start(index, seed) -> (seed, options)` chooses the episode's reset
    seed and options (a replay starts where its recording did), and one with
    `episode_end(info)` gets the last step's info.
    """
    rng = rng if rng is not None else np.random.default_rng(seed)
    options = None
    start = getattr(agent, "episode_start", None)
    if callable(start):  # an agent replaying recorded episodes starts each as it was recorded
        seed, options = start(index, seed)
    obs, info = env.reset(seed=seed, options=options)
    agent.reset(obs, info)
    if trajectory is not None:
        trajectory.observations.append(obs)
        trajectory.infos.append(info)
    if on_frame is not None:
        on_frame(env.unwrapped.render())
    total, length = 0.0, 0
    terminated = truncated = stopped = False
    game_seed = info.get("game_seed")
    while True:
        if should_stop is not None and should_stop():
            stopped = True
            break
        label = agent.act(obs, info)
        action = label
        if noise > 0.0 and rng.random() < noise:
            action = int(rng.integers(env.action_space.n))  # discrete actions (GBA envs)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        length += 1
        if trajectory is not None:
            trajectory.observations.append(obs)
            trajectory.actions.append(_stored(action))
            trajectory.labels.append(_stored(label))
            trajectory.rewards.append(float(reward))
            trajectory.terminations.append(bool(terminated))
            trajectory.truncations.append(bool(truncated))
            trajectory.infos.append(info)
        if on_frame is not None:
            on_frame(env.unwrapped.render())
        if terminated or truncated:
            break
    end = getattr(agent, "episode_end", None)
    if callable(end):
        end(info)
    variables = {k: v for k, v in info_numbers(info).items() if k not in ("success",)}
    return EpisodeResult(
        index=index,
        seed=seed,
        ret=total,
        length=length,
        success=bool(info.get("success", info.get("won", False))),
        won=bool(info.get("won", False)),
        lost=bool(info.get("lost", False)),
        terminated=bool(terminated),
        truncated=bool(truncated),
        stopped=stopped,
        game_seed=int(game_seed) if game_seed is not None else None,
        variables=variables,
    )
