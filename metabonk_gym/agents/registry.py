"""Agents by name: `make_agent("random" | "scripted" | "think" | "think:MODEL" | "human" | PATH.zip |
RUN_DIR | "replay:SOURCE", env)` (a model zip of any trainer, a run directory of any trainer:
`agents.runs`, or recorded actions played back: `agents.replay`, a Go-Explore archive's best
trajectory or a Minari dataset's episodes).

`think:MODEL` is the think agent with its strategist given in the name (`think:oracle`,
`think:M.gguf`, `think:policy.pt` from `metabonk distill`, `think:http://HOST:PORT` a model
server, the rule baselines `think:first` and `think:random`: the first or a random option,
seeded by the agent's seed, or `think:fallback`: the follower alone on its fallback
directives), so one string names an oracle + follower or model thinker + follower (the ladder).

The scripted expert of an env is its game folder's `Expert` (the folder's `game.py`, found
through `env.unwrapped.game_data`), so a user's game folder can ship one too; no game is named
here. Every function takes an `AgentSpec` (`agents.spec`, parsed once by the caller) or its
text.

>>> AGENT_NAMES
('random', 'scripted', 'think', 'human')
>>> check_agent_spec("scripted")
'scripted'
>>> think_options("think:first")
{'engine': 'first'}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from metabonk_gym.agents.dreamer import DreamerAgent, dreamer_env_overrides
from metabonk_gym.agents.human import HumanAgent
from metabonk_gym.agents.model import ModelAgent, model_env_overrides
from metabonk_gym.agents.replay import ReplayAgent
from metabonk_gym.agents.spec import (
    AGENT_NAMES,
    AgentSpec,
    repeat_action,
    think_options,
    unknown_agent,
)
from metabonk_gym.experts.base import Agent, AgentError, RandomAgent, RepeatAgent
from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.games import game_module

__all__ = [
    "AGENT_NAMES",
    "AgentSpec",
    "agent_env_overrides",
    "check_agent_spec",
    "make_agent",
    "repeat_action",
    "scripted_expert",
    "think_options",
    "unknown_agent",
]


def check_agent_spec(spec: str | AgentSpec) -> str:
    """The spec's text when it names an agent, a model file or a run directory (of any
    trainer: `agents.runs.find_run` checks it), else a clear error (`AgentSpec.parse`)."""
    return AgentSpec.parse(spec).text


def agent_env_overrides(spec: str | AgentSpec) -> dict[str, Any]:
    """Env kwargs an agent needs (a model sees frames as it was trained: obs_type, downscale,
    frameskip); `{}` for agents that read RAM or take any frame."""
    agent = AgentSpec.parse(spec)
    if agent.is_dreamer:
        return dreamer_env_overrides(agent.weights)
    if agent.is_model:
        return model_env_overrides(Path(agent.weights))
    return {}


def scripted_expert(env: gym.Env, seed: int | None = None) -> Agent:
    """The scripted expert of the env's game: its game folder's `game.py` `Expert(env, seed)`."""
    expert = getattr(game_module(env), "Expert", None)
    if expert is None:
        game = getattr(env.unwrapped, "game_data", None)
        where = f"the game folder {game.folder}" if game is not None else "this env"
        raise AgentError(
            f"no scripted expert for {where}: its game.py defines no Expert class "
            "(see docs/new-game.md, 'game.py')"
        )
    agent: Agent = expert(env, seed=seed)
    return agent


def make_agent(
    spec: str | AgentSpec, env: gym.Env, seed: int | None = None, **kwargs: Any
) -> Agent:
    """The agent named by `spec` ("random", "repeat:N", "scripted", "think", "think:MODEL",
    "human", "replay:SOURCE", a model PATH.zip or a run directory) for `env` (an env made with
    `agent_env_overrides(spec)`)."""
    agent = AgentSpec.parse(spec)
    if agent.kind == "random":
        return RandomAgent(env.action_space, seed=seed)
    if agent.kind == "repeat":
        return RepeatAgent(env.action_space, int(agent.action or 0))
    if agent.kind == "scripted":
        return scripted_expert(env, seed=seed)
    if agent.kind == "human":
        return HumanAgent(env, **kwargs)
    if agent.kind == "think":
        options = dict(agent.think)
        if options.get("engine") == "random" and seed is not None:
            options["seed"] = seed  # the rule's answers repeat for the same seed
        made: Agent = make_think_agent(env, **{**kwargs, **options})
        return made
    if agent.kind == "replay":
        return ReplayAgent(agent.text, env)
    if agent.is_dreamer:
        return DreamerAgent(Path(agent.weights), env, **kwargs)
    if agent.is_model:
        return ModelAgent(Path(agent.weights), env, **kwargs)
    raise unknown_agent(agent.text)
