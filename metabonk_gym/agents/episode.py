"""The config of an env for an agent given by name or model path.

A trained model must see frames as it was trained, so its own config is the base; any other agent
gets the env's training defaults; then the config file and the flags apply on top.

`--goal` picks what an episode's `won` scores: `config`, the config's goal (BonkQuest's training
default: leave room 1; the episode ends there), or `game`, the game's own win (`game_won`; the
config's goal is dropped so the episode plays on):

>>> episode_config("MetaBonk/BonkQuest-v0", "random").state
'room1'
>>> cfg = episode_config("MetaBonk/BonkQuest-v0", "random")
>>> scoring(cfg, "config")["won_means"]
"the config's goal: rooms_visited greater-or-equal 2"
>>> scored = with_goal(cfg, "game")
>>> scored.goal, scoring(scored, "game")["won_means"]
(None, "the game's own win (game_won)")
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.agents.dreamer import dreamer_base_config
from metabonk_gym.agents.model import model_config
from metabonk_gym.agents.replay import check_replay
from metabonk_gym.agents.spec import AgentSpec
from metabonk_gym.training.config import MODEL_KEYS, TrainConfig, resolve_config
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.wrapstack import check_wrappers_match, normalize_wrappers


def episode_config(
    env_id: str,
    agent: str | AgentSpec,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """The config of an env for `agent`: a model's own config as the base (it must see frames as
    it was trained), else the env's training defaults; then the file and flags."""
    spec = AgentSpec.parse(agent)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if spec.kind == "replay":  # recorded actions: the episodes must start as they did
        cfg = resolve_config(env_id, config_file, overrides)
        check_replay(spec.text, cfg.state, cfg.frameskip)
        return cfg
    if spec.run is None:
        return resolve_config(env_id, config_file, overrides)
    weights = spec.weights  # a run directory: its model zip (or the Dreamer run)
    if spec.is_dreamer:
        base = dreamer_base_config(weights, env_id)
        cfg = resolve_config(env_id, config_file, overrides, base=base)
        check_wrappers_match(weights, cfg.wrappers, normalize_wrappers(base.get("wrappers")))
        return cfg
    base = model_config(Path(weights), env_id)
    cfg = resolve_config(env_id, config_file, overrides, base=base)
    # the run's wrapper stack is rebuilt from its config; another one is a one-line error
    check_wrappers_match(weights, cfg.wrappers, normalize_wrappers(base.get("wrappers")))
    changed = [k for k in MODEL_KEYS if getattr(cfg, k) != base.get(k, getattr(cfg, k))]
    if changed:
        raise ConfigError(
            f"{weights} was trained with {', '.join(f'{k}={base[k]!r}' for k in changed)}; an "
            "episode for it cannot change these"
        )
    return cfg


#: What `won` may score: the config's goal or the game's own win.
GOALS: tuple[str, ...] = ("config", "game")


def with_goal(cfg: TrainConfig, goal: str) -> TrainConfig:
    """`cfg` scoring `goal`: unchanged for "config", without its goal for "game" (so `won` is
    the game's own win and the episode does not end at the config's goal)."""
    if goal not in GOALS:
        raise ConfigError(f"--goal must be one of {', '.join(GOALS)}, not {goal!r}")
    return cfg if goal == "config" else dataclasses.replace(cfg, goal=None)


def scoring(cfg: TrainConfig, goal: str) -> dict[str, Any]:
    """What a report says about its `won`: which goal (`config` or `game`), the condition, and
    in words."""
    condition = cfg.goal
    if condition is None:
        means = "the game's own win (game_won)"
    else:
        words = " ".join(
            str(condition.get(k, d))
            for k, d in (("variable", ""), ("op", "equal"), ("reference", 0))
        )
        means = f"the config's goal: {words}"
    return {"goal": goal, "condition": condition, "won_means": means}
