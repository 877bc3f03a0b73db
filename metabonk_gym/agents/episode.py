"""The config of an env for an agent given by name or model path.

A trained model must see frames as it was trained, so its own config is the base; any other agent
gets the env's training defaults; then the config file and the flags apply on top.

>>> episode_config("MetaBonk/BonkQuest-v0", "random").state
'room1'
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.agents.dreamer import dreamer_base_config, is_dreamer_run
from metabonk_gym.agents.model import model_config
from metabonk_gym.agents.registry import AGENT_NAMES, check_agent_spec
from metabonk_gym.training.config import MODEL_KEYS, TrainConfig, resolve_config
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.wrapstack import check_wrappers_match, normalize_wrappers


def episode_config(
    env_id: str,
    agent: str,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """The config of an env for `agent`: a model's own config as the base (it must see frames as
    it was trained), else the env's training defaults; then the file and flags."""
    check_agent_spec(agent)
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if agent in AGENT_NAMES:
        return resolve_config(env_id, config_file, overrides)
    if is_dreamer_run(agent):
        base = dreamer_base_config(agent, env_id)
        return resolve_config(env_id, config_file, overrides, base=base)
    base = model_config(Path(agent).expanduser(), env_id)
    cfg = resolve_config(env_id, config_file, overrides, base=base)
    # the run's wrapper stack is rebuilt from its config; another one is a one-line error
    check_wrappers_match(agent, cfg.wrappers, normalize_wrappers(base.get("wrappers")))
    changed = [k for k in MODEL_KEYS if getattr(cfg, k) != base.get(k, getattr(cfg, k))]
    if changed:
        raise ConfigError(
            f"{agent} was trained with {', '.join(f'{k}={base[k]!r}' for k in changed)}; an episode "
            "for it cannot change these"
        )
    return cfg
