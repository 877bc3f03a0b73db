"""Worked examples for the compact prompt, drawn from the oracle: a situation and its directive.

What: `oracle_examples(env)` plays the game with the oracle strategist and keeps the first
situations with different kinds of directives (the most urgent goal and the line that places
the target, short so the prompt stays small) together with the oracle's answer;
`oracle_choice_examples(env)` does the same for the choice profile (the numbered options and the
oracle's pick); `write_examples(folder, examples, key)` stores them in the game folder's
`think_examples.json`, which `GameAdapter.prompt_examples` reads.
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
from metabonk_gym.think.directive import DIRECTIVE_KEYS, pick_of
from metabonk_gym.think.games import EXAMPLES_FILE, adapter_for
from metabonk_gym.think.prompts import PromptBuilder
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


def oracle_choice_examples(
    env: gym.Env, count: int = 3, seed: int = 0, max_steps: int = 3000
) -> list[dict[str, Any]]:
    """Up to `count` examples for the choice profile from one oracle episode: the per-call
    text with the numbered options and the oracle's pick (`{"pick": N}`): one per action (the
    first `count` actions the oracle used), each the episode's last of that action whose
    pick is not 1 where there is one (a few-shot prompt whose answers were all 1 would teach
    "always 1"; the last ones, because early ones may rest on secrets the player has not
    learnt yet, such as the key chest before the sage has spoken)."""
    adapter = adapter_for(env)
    builder = PromptBuilder(adapter, profile="choice", examples=[])
    agent = make_think_agent(env, model_path="oracle")
    seen: list[dict[str, Any]] = []
    try:
        obs, info = env.reset(seed=seed)
        calls = 0
        for step in range(max_steps):
            view = GameView.capture(env, info, step, obs)
            options = adapter.options(view)  # before stepping
            action = agent.act(obs, info)
            if agent.director.stats.calls != calls:
                calls = agent.director.stats.calls
                pick = pick_of(agent.directive, options)
                if pick is not None and agent.directive.source == "oracle":
                    seen.append(
                        {
                            "user": builder.choice_text(view, options),
                            "answer": {"pick": pick},
                            "action": agent.directive.action,
                        }
                    )
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    finally:
        agent.close()
    by_action: dict[str, list[dict[str, Any]]] = {}
    for example in seen:
        by_action.setdefault(example["action"], []).append(example)
    chosen = []  # per action, the last one whose pick is not 1 (else the last one)
    for examples in list(by_action.values())[:count]:
        later = [e for e in examples if e["answer"]["pick"] != 1] or examples
        chosen.append(later[-1])
    return [{"user": e["user"], "answer": e["answer"]} for e in chosen]


def write_examples(
    folder: str | Path, examples: list[dict[str, Any]], key: str = "examples"
) -> Path:
    """Store `examples` under `key` (`examples`: compact, `choice_examples`: choice) in
    `folder/think_examples.json`, keeping the file's other keys (atomically); returns the path."""
    path = Path(folder) / EXAMPLES_FILE
    data: dict[str, Any] = {}
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
    data.setdefault("source", "oracle (metabonk think examples)")
    data[key] = examples
    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())
    return path
