"""metabonk_gym.agents: agents by name, and running them: evaluate, play, record.

The agents layer sits above training: `AgentSpec.parse(text)` reads an agent's name once
(`spec.py`), `registry.make_agent(spec, env)` builds a random, scripted (the game folder's
`Expert`), human, think or trained-model agent, and `evaluate` (one env or many), `record`,
`play`, the ladder and the learning proof run them in envs. Names are imported on first use, so
`import metabonk_gym.agents` does not import torch.

>>> import metabonk_gym.agents as agents
>>> sorted(agents.AGENT_NAMES)
['human', 'random', 'scripted', 'think']
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "AGENT_NAMES": "metabonk_gym.agents.registry",
    "AgentSpec": "metabonk_gym.agents.spec",
    "make_agent": "metabonk_gym.agents.registry",
    "episode_config": "metabonk_gym.agents.episode",
    "evaluate": "metabonk_gym.agents.evaluate",
    "record": "metabonk_gym.agents.record",
    "play": "metabonk_gym.agents.record",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'metabonk_gym.agents' has no attribute {name!r}")
