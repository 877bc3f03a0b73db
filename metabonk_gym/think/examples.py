"""Worked examples for the compact prompt, drawn from the oracle: a situation and its directive.

What: `oracle_examples(env)` plays the game with the oracle strategist and keeps the first
situations with different kinds of directives (the most urgent goal and the line that places
the target, short so the prompt stays small) together with the oracle's answer; `write_examples(folder, examples)` stores them as
the game folder's `think_examples.json`, which `GameAdapter.prompt_examples` reads.
Why: a small model given a JSON schema copies its title into the answer; shown two or three
answers a perfect player gave in situations like its own, it fills the fields with their
meaning. `metabonk think examples ENV` runs both.

>>> import gymnasium as gym, metabonk_gym
>>> env = gym.make("MetaBonk/BonkQuest-v0")
>>> examples = oracle_examples(env, count=2)
>>> [e["answer"]["action"] for e in examples], examples[0]["user"].splitlines()[0][:22]
(['collect', 'open'], 'Goal: find the key of ')
>>> env.close()
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym

from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.directive import DIRECTIVE_KEYS
from metabonk_gym.think.games import EXAMPLES_FILE, adapter_for
from metabonk_gym.think.view import GameView
from metabonk_gym.utils import atomic_write_bytes


def oracle_examples(
    env: gym.Env, count: int = 2, seed: int = 0, max_steps: int = 3000
) -> list[dict[str, Any]]:
    """Up to `count` examples with different actions (tile targets first) from one oracle
    episode of `env` (seed `seed`, at most `max_steps` steps)."""
    adapter = adapter_for(env)
    agent = make_think_agent(env, model_path="oracle")
    found: dict[str, dict[str, Any]] = {}
    try:
        obs, info = env.reset(seed=seed)
        calls = 0
        for step in range(max_steps):
            view = GameView.capture(env, info, step, obs)
            goal = "Goal: " + (adapter.goals(view) or ["win"])[0]
            spatial = adapter.spatial(view)  # before stepping
            action = agent.act(obs, info)
            if agent.director.stats.calls != calls:
                calls = agent.director.stats.calls
                directive = agent.directive
                if directive.action not in found and directive.source == "oracle":
                    tile = directive.tile
                    where = [
                        line for line in spatial if tile and f"x={tile[0]}, y={tile[1]}" in line
                    ]
                    found[directive.action] = {
                        "user": "\n".join([goal, *where[:1]]),
                        "answer": {k: directive.to_dict()[k] for k in DIRECTIVE_KEYS},
                    }
                if len(found) >= count:
                    break
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    finally:
        agent.close()
    return list(found.values())[:count]


def write_examples(folder: str | Path, examples: list[dict[str, Any]]) -> Path:
    """Store `examples` as `folder/think_examples.json` (atomically); returns the path."""
    path = Path(folder) / EXAMPLES_FILE
    data = {"source": "oracle (metabonk think examples)", "examples": examples}
    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())
    return path
