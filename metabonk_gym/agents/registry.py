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
here.

>>> AGENT_NAMES
('random', 'scripted', 'think', 'human')
>>> check_agent_spec("scripted")
'scripted'
>>> think_options("think:oracle"), think_options("think:http://127.0.0.1:8080")
({'model_path': 'oracle'}, {'base_url': 'http://127.0.0.1:8080'})
>>> think_options("think:first")
{'engine': 'first'}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from metabonk_gym.agents.dreamer import DreamerAgent, dreamer_env_overrides, is_dreamer_run
from metabonk_gym.agents.human import HumanAgent
from metabonk_gym.agents.model import ModelAgent, model_env_overrides
from metabonk_gym.agents.replay import ReplayAgent, check_replay, replay_source
from metabonk_gym.agents.runs import agent_path, find_run
from metabonk_gym.experts.base import Agent, AgentError, RandomAgent, RepeatAgent
from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.baselines import RULE_STRATEGISTS
from metabonk_gym.think.games import game_module

AGENT_NAMES: tuple[str, ...] = ("random", "scripted", "think", "human")


def _is_model_path(spec: str) -> bool:
    """True for a model file; a `.zip` that does not exist is an error naming the path."""
    path = Path(spec).expanduser()
    if spec.endswith(".zip") and not path.is_file():
        raise AgentError(f"model file not found: {path}")
    return path.is_file()


def think_options(spec: str) -> dict[str, Any]:
    """The think agent's strategist options named by `think:MODEL` (`{}` for anything else)."""
    if not spec.startswith("think:"):
        return {}
    model = spec.split(":", 1)[1]
    if not model:
        raise AgentError(
            "think: names no strategist; use think:oracle, think:M.gguf, "
            "think:policy.pt or think:http://HOST:PORT"
        )
    if model.startswith(("http://", "https://")):
        return {"base_url": model}
    if model in (*RULE_STRATEGISTS, "fallback"):  # no file: the strategist itself
        return {"engine": model}
    return {"model_path": model}


def repeat_action(spec: str) -> int | None:
    """The action index of a `repeat:N` spec (None for any other spec).

    >>> repeat_action("repeat:2"), repeat_action("random")
    (2, None)
    """
    if not spec.startswith("repeat:"):
        return None
    index = spec.partition(":")[2]
    if not index.isdigit():
        raise AgentError(f"agent {spec!r}: write repeat:N with N an action index (repeat:0)")
    return int(index)


def check_agent_spec(spec: str) -> str:
    """`spec` itself when it names an agent, a model file or a run directory (of any trainer:
    `agents.runs.find_run` checks it), else a clear error."""
    if spec in AGENT_NAMES or think_options(spec) or repeat_action(spec) is not None:
        return spec
    if replay_source(spec) is not None:
        check_replay(spec)  # a missing, corrupt or foreign file: one line before any work
        return spec
    if Path(spec).expanduser().is_dir():
        find_run(spec)
        return spec
    if _is_model_path(spec):
        return spec
    raise unknown_agent(spec)


def agent_env_overrides(spec: str) -> dict[str, Any]:
    """Env kwargs an agent needs (a model sees frames as it was trained: obs_type, downscale,
    frameskip); `{}` for agents that read RAM or take any frame."""
    if spec in AGENT_NAMES or think_options(spec) or replay_source(spec) is not None:
        return {}
    spec = agent_path(spec)
    if is_dreamer_run(spec):
        return dreamer_env_overrides(spec)
    if _is_model_path(spec):
        return model_env_overrides(Path(spec).expanduser())
    raise unknown_agent(spec)


def unknown_agent(spec: str) -> AgentError:
    """The error for an agent spec that names nothing (a missing model file says so)."""
    path = Path(spec).expanduser()
    if spec.endswith(".zip") and not path.exists():
        return AgentError(f"model file not found: {path}")
    return AgentError(
        f"unknown agent {spec!r}; use one of {', '.join(AGENT_NAMES)}, think:MODEL, a model "
        "PATH.zip, a run directory (train ppo/bc/appo/dreamer, curriculum, tune pbt) or "
        "replay:ARCHIVE.npz / replay:DATASET_ID"
    )


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


def make_agent(spec: str, env: gym.Env, seed: int | None = None, **kwargs: Any) -> Agent:
    """The agent named by `spec` ("random", "repeat:N", "scripted", "think", "think:MODEL",
    "human", a model PATH.zip or a run directory) for `env` (an env made with `agent_env_overrides(spec)`)."""
    if spec == "random":
        return RandomAgent(env.action_space, seed=seed)
    if (action := repeat_action(spec)) is not None:
        return RepeatAgent(env.action_space, action)
    if spec == "scripted":
        return scripted_expert(env, seed=seed)
    if spec == "human":
        return HumanAgent(env, **kwargs)
    if spec == "think" or think_options(spec):
        options = think_options(spec)
        if options.get("engine") == "random" and seed is not None:
            options["seed"] = seed  # the rule's answers repeat for the same seed
        agent: Agent = make_think_agent(env, **{**kwargs, **options})
        return agent
    if replay_source(spec) is not None:
        return ReplayAgent(spec, env)
    spec = agent_path(spec)
    if is_dreamer_run(spec):
        return DreamerAgent(Path(spec).expanduser(), env, **kwargs)
    if _is_model_path(spec):
        return ModelAgent(Path(spec).expanduser(), env, **kwargs)
    raise unknown_agent(spec)
