"""metabonk_gym.experts: agents behind one protocol (`Agent`: `reset(obs, info)`,
`act(obs, info) -> action`): random, the bundled games' scripted experts, trained models, humans.

`make_agent("random" | "scripted" | "think" | "human" | PATH.zip, env)` builds one.
"""

from metabonk_gym.experts.base import (
    Agent,
    AgentError,
    RandomAgent,
    agent_env_overrides,
    make_agent,
)

__all__ = ["Agent", "AgentError", "RandomAgent", "agent_env_overrides", "make_agent"]
