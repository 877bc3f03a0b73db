"""metabonk_gym.experts: agents behind one protocol (`Agent`: `reset(obs, info)`,
`act(obs, info) -> action`): random, scripted experts (`RamExpert`, the base a game's `game.py`
builds its `Expert` on), trained models, humans, with shortest paths on tile grids
(`pathfinding`). `metabonk_gym.agents.registry.make_agent(name, env)` builds one by name.

>>> from metabonk_gym.experts import RamExpert
>>> RamExpert.name
'scripted'
"""

from metabonk_gym.experts.base import Agent, AgentError, RamExpert, RandomAgent, RepeatAgent

__all__ = ["Agent", "AgentError", "RamExpert", "RandomAgent", "RepeatAgent"]
