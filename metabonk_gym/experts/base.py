"""Agents: anything that maps (observation, info) to an action, behind one small protocol.

`play`, `record` and `eval` run any agent the same way: a random agent, a game's scripted expert
(reads RAM, plans on the tile map), a trained model (`PATH.zip`, with the frame stack it was
trained with), a System 2 "think" agent, or a human at the keyboard.

>>> import gymnasium as gym, numpy as np
>>> class Env:
...     action_space = gym.spaces.Discrete(5)
>>> agent = RandomAgent(Env.action_space, seed=0)
>>> 0 <= agent.act(np.zeros(1), {}) < 5
True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from metabonk_gym.errors import MetabonkError

AGENT_NAMES: tuple[str, ...] = ("random", "scripted", "think", "human")


class AgentError(MetabonkError, ValueError):
    """An agent spec that names no agent, or an agent that cannot play this env."""


@runtime_checkable
class Agent(Protocol):
    """`reset` at each episode start, then `act` once per step."""

    name: str

    def reset(self, obs: Any, info: dict[str, Any]) -> None: ...

    def act(self, obs: Any, info: dict[str, Any]) -> int: ...


class RamExpert:
    """Base of the scripted experts: each step decides from the game's RAM (`_decide`) and
    remembers the action, since the games act on new button presses only."""

    name = "scripted"
    game: Any
    noop: int = 0
    _last: int = 0

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        self._last = self.noop

    def act(self, obs: Any, info: dict[str, Any]) -> int:
        action = self._decide()
        self._last = action
        return action

    def _var(self, name: str) -> int:
        return int(self.game.read_variable(name))

    def _decide(self) -> int:
        raise NotImplementedError


class RandomAgent:
    """Uniform random actions from the env's action space (seeded): an int for a `Discrete`
    space, the space's own sample otherwise (e.g. Megabonk's Box)."""

    name = "random"

    def __init__(self, action_space: gym.spaces.Space, seed: int | None = None) -> None:
        self.action_space = action_space
        self.action_space.seed(seed)

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        pass

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        sample = self.action_space.sample()
        return int(sample) if isinstance(self.action_space, gym.spaces.Discrete) else sample


def _is_model_path(spec: str) -> bool:
    """True for a model file; a `.zip` that does not exist is an error naming the path."""
    path = Path(spec).expanduser()
    if spec.endswith(".zip") and not path.is_file():
        raise AgentError(f"model file not found: {path}")
    return path.is_file()


def check_agent_spec(spec: str) -> str:
    """`spec` itself when it names an agent or an existing model file, else a clear error."""
    if spec in AGENT_NAMES or _is_model_path(spec):
        return spec
    raise unknown_agent(spec)


def agent_env_overrides(spec: str) -> dict[str, Any]:
    """Env kwargs an agent needs (a model sees frames as it was trained: obs_type, downscale,
    frameskip); `{}` for agents that read RAM or take any frame."""
    if spec in AGENT_NAMES:
        return {}
    if _is_model_path(spec):
        from metabonk_gym.experts.model import model_env_overrides

        return model_env_overrides(Path(spec).expanduser())
    raise unknown_agent(spec)


def unknown_agent(spec: str) -> AgentError:
    path = Path(spec).expanduser()
    if spec.endswith(".zip") and not path.exists():
        return AgentError(f"model file not found: {path}")
    return AgentError(
        f"unknown agent {spec!r}; use one of {', '.join(AGENT_NAMES)} or a model PATH.zip"
    )


def make_agent(spec: str, env: gym.Env, seed: int | None = None, **kwargs: Any) -> Agent:
    """The agent named by `spec` ("random", "scripted", "think", "human" or a model PATH.zip)
    for `env` (an env made with `agent_env_overrides(spec)` applied)."""
    if spec == "random":
        return RandomAgent(env.action_space, seed=seed)
    if spec == "scripted":
        from metabonk_gym.experts.registry import scripted_expert

        return scripted_expert(env, seed=seed)
    if spec == "human":
        from metabonk_gym.experts.human import HumanAgent

        return HumanAgent(env, **kwargs)
    if spec == "think":
        return _think_agent(env, **kwargs)
    if _is_model_path(spec):
        from metabonk_gym.experts.model import ModelAgent

        return ModelAgent(Path(spec).expanduser(), env, **kwargs)
    raise unknown_agent(spec)


def _think_agent(env: gym.Env, **kwargs: Any) -> Agent:
    """The System 2 agent of `metabonk_gym.think`, when that package provides one."""
    import importlib

    try:
        module = importlib.import_module("metabonk_gym.think.agent")
        factory = module.make_think_agent
    except (ImportError, AttributeError) as exc:
        raise AgentError(
            "the 'think' agent needs metabonk_gym.think.agent.make_think_agent (the System 2 package "
            f"and its extra: pip install 'metabonk-gym[think]'): {exc}"
        ) from exc
    agent: Agent = factory(env, **kwargs)
    return agent


def close_agent(agent: Any) -> None:
    """Release what an agent holds (a think agent's model server, ...), if it has `close()`."""
    close = getattr(agent, "close", None)
    if callable(close):
        close()


def action_index(env: gym.Env, buttons: set[str]) -> int:
    """The discrete action that presses exactly `buttons`, or failing that the one pressing the
    most of them and nothing else (0, the no-op, when none fits)."""
    combos = [set(c) for c in env.unwrapped.integration.discrete_actions]  # type: ignore[attr-defined]
    if buttons in combos:
        return combos.index(buttons)
    best, best_size = 0, 0
    for i, combo in enumerate(combos):
        if combo and combo <= buttons and len(combo) > best_size:
            best, best_size = i, len(combo)
    return best


def to_int_action(action: Any) -> int:
    """An action from numpy/torch scalars as a plain int."""
    return int(np.asarray(action).reshape(-1)[0])
