"""Which scripted expert plays which bundled game.

>>> sorted(EXPERTS)
['BonkArena', 'BonkQuest']
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym

from metabonk_gym.experts.base import AgentError

#: game name -> "module:Class" of its scripted expert
EXPERTS: dict[str, str] = {
    "BonkQuest": "metabonk_gym.experts.bonkquest:BonkQuestExpert",
    "BonkArena": "metabonk_gym.experts.bonkarena:BonkArenaExpert",
}


def scripted_expert(env: gym.Env, seed: int | None = None) -> Any:
    """The scripted expert of the env's game (it reads RAM through `env.unwrapped`)."""
    integration = getattr(env.unwrapped, "integration", None)
    game = getattr(integration, "name", None)
    if game not in EXPERTS:
        raise AgentError(
            f"no scripted expert for {game or type(env.unwrapped).__name__}; experts exist for "
            f"{', '.join(EXPERTS)}"
        )
    module, cls = EXPERTS[game].split(":")
    return getattr(importlib.import_module(module), cls)(env, seed=seed)
