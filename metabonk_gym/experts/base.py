"""Agents: anything that maps (observation, info) to an action, behind one small protocol.

`play`, `record` and `eval` run any agent the same way: a random agent, a game's scripted expert
(reads RAM, plans on the tile map; `RamExpert` is its base, a game's `game.py` gives `Expert`),
a trained model, a System 2 "think" agent, or a human at the keyboard
(`metabonk_gym.agents.registry.make_agent` builds one from its name).

>>> import gymnasium as gym, numpy as np
>>> class Env:
...     action_space = gym.spaces.Discrete(5)
>>> agent = RandomAgent(Env.action_space, seed=0)
>>> 0 <= agent.act(np.zeros(1), {}) < 5
True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from metabonk_gym.errors import AgentError as AgentError  # re-exported


@runtime_checkable
class Agent(Protocol):
    """`reset` at each episode start, then `act` once per step."""

    name: str

    def reset(self, obs: Any, info: dict[str, Any]) -> None: ...

    def act(self, obs: Any, info: dict[str, Any]) -> int: ...


class RamExpert:
    """Base of the scripted experts: each step decides from the game's RAM (`_decide`) and
    remembers the action, since the games act on new button presses only.

    A game's `Expert(env, seed=None)` subclasses it: it sets `game` (`env.unwrapped`), `noop`
    and implements `_decide`.
    """

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

    def executed(self, action: int) -> None:
        """The action the game actually got when another policy (or noise) acted instead
        (DAgger relabelling): the next new-press test compares with it."""
        self._last = int(action)

    def _var(self, name: str) -> int:
        return int(self.game.read_variable(name))

    def _decide(self) -> int:
        raise NotImplementedError


class RandomAgent:
    """Uniform random actions from the env's action space (seeded): an int for a `Discrete`
    space, the space's own sample otherwise (e.g. Megabonk's Box).

    Args:
        action_space: the space to sample; it is seeded in place, so pass a copy to keep the
            env's own sampler untouched.
        seed: the sampler's seed (the same seed, the same actions); None: unpredictable.
    """

    name = "random"

    def __init__(self, action_space: gym.spaces.Space, seed: int | None = None) -> None:
        self.action_space = action_space
        self.action_space.seed(seed)

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        pass

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        sample = self.action_space.sample()
        return int(sample) if isinstance(self.action_space, gym.spaces.Discrete) else sample


class RepeatAgent:
    """The same discrete action every step (`repeat:N`): the obvious rule beside which a learned
    agent is measured (always RIGHT in a dodging game, always no-op in a city that grows alone).

    >>> import gymnasium as gym
    >>> RepeatAgent(gym.spaces.Discrete(3), 2).act(None, {})
    2

    Args:
        action_space: the env's action space (`Discrete`).
        action: the action index to repeat.
    """

    def __init__(self, action_space: gym.spaces.Space, action: int) -> None:
        if not isinstance(action_space, gym.spaces.Discrete) or not 0 <= action < int(
            action_space.n
        ):
            raise AgentError(
                f"repeat:{action}: this env's actions are {action_space}; repeat:N takes a "
                "Discrete action index"
            )
        self.action = int(action)
        self.name = f"repeat:{action}"

    def reset(self, obs: Any, info: dict[str, Any]) -> None:
        pass

    def act(self, obs: Any, info: dict[str, Any]) -> int:
        return self.action


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
