"""Training configs: per-env defaults, YAML/TOML files (rl-zoo3 style) and flag overrides.

One flat set of keys covers the env (state, reward, preprocessing), PPO's hyperparameters,
logging and behavioural cloning. A file holds either these keys directly or one section per env
id (as rl-zoo3's hyperparameter files do) plus an optional `default` section. Unknown keys are
rejected with the nearest valid key, because a typo that silently trains with a default wastes an
afternoon of CPU.

Precedence: built-in defaults for the env (and start state) < the file < flags.

>>> cfg = resolve_config("MetaBonk/BonkQuest-v0", overrides={"n_envs": 2})
>>> cfg.n_envs, cfg.state, cfg.obs_type
(2, 'room1', 'grayscale')
>>> resolve_config("MetaBonk/BonkQuest-v0", overrides={"n_env": 2})
Traceback (most recent call last):
...
metabonk_gym.training.errors.ConfigError: unknown config key 'n_env' (did you mean 'n_envs'?); valid keys: ...
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.training.errors import ConfigError

CHOICES: dict[str, tuple[Any, ...]] = {
    "obs_type": ("rgb", "grayscale", "state"),
    "downscale": (1, 2, 4, 8),
    "policy": ("CnnPolicy", "MlpPolicy", "MultiInputPolicy"),
    "features": ("small", "nature"),
    "lr_schedule": ("constant", "linear"),
    "device": ("cpu", "cuda", "auto"),
}

#: Keys that define what the model sees and does: a resumed run or a fine-tuned model must keep them.
MODEL_KEYS: tuple[str, ...] = (
    "frameskip",
    "obs_type",
    "downscale",
    "frame_stack",
    "policy",
    "features",
    "net_arch",
    "features_dim",
)


@dataclass
class TrainConfig:
    """Every knob of `train_ppo`, `train_bc` and `run_curriculum`, with CPU-friendly defaults."""

    # ---- env
    state: str | None = None
    reward: str | dict[str, Any] = "default"
    frameskip: int = 4
    obs_type: str = "grayscale"
    downscale: int = 4
    frame_stack: int = 4
    sticky_action_prob: float = 0.0
    max_episode_steps: int | None = None
    #: Seeded variants: each reset draws its game seed from this list (None: any seed).
    game_seeds: list[int] | None = None
    #: Success condition that also ends the episode, e.g. {"variable": "rooms_visited",
    #: "op": "greater-or-equal", "reference": 2}; None: success is the game's own `won`.
    goal: dict[str, Any] | None = None
    #: Potential-based shaping towards objectives (`ApproachShaping` kwargs: position, targets,
    #: weight, absent); None: none.
    shaping: dict[str, Any] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Megabonk: training env i connects to base_port + i (`metabonk bonklink-sim --instances`).
    base_port: int = 5560
    # ---- model and PPO
    policy: str = "CnnPolicy"
    features: str = "small"
    features_dim: int = 256
    net_arch: list[int] | None = None
    #: Continuous actions (Megabonk): the Gaussian's initial log standard deviation (None: SB3's 0).
    log_std_init: float | None = None
    n_envs: int = 4
    total_steps: int = 500_000
    learning_rate: float = 2.5e-4
    lr_schedule: str = "linear"
    n_steps: int = 128
    batch_size: int = 256
    n_epochs: int = 4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.1
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    seed: int = 0
    device: str = "cpu"
    torch_threads: int = 1
    # ---- logging
    checkpoint_every: int = 50_000
    keep_checkpoints: int = 3
    video_every: int = 100_000
    video_length: int = 300
    win_window: int = 100
    # ---- behavioural cloning
    bc_epochs: int = 100
    bc_batch_size: int = 64
    bc_learning_rate: float = 1e-3
    bc_ent_coef: float = 0.0
    bc_value_coef: float = 0.5

    # ------------------------------------------------------------------ helpers
    def to_dict(self) -> dict[str, Any]:
        """Plain data (for YAML files and the model zip)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "config") -> TrainConfig:
        """Checked construction: unknown keys and wrong types raise `ConfigError`."""
        return cls(**validate(data, source))

    def env_kwargs_for_make(self, env_id: str | None = None, index: int = 0) -> dict[str, Any]:
        """Keyword arguments for `gym.make` of `env_id` (the frame stack is applied outside the
        env). The GBA options (frameskip, obs_type, ...) go to GBA envs only; for Megabonk,
        env `index` gets port `base_port + index` (see `metabonk_gym.training.megabonk`)."""
        if env_id is not None:
            from metabonk_gym.training.megabonk import env_kwargs, is_megabonk

            if is_megabonk(env_id):
                return env_kwargs(self, index)
        kwargs: dict[str, Any] = {
            "frameskip": self.frameskip,
            "obs_type": self.obs_type,
            "downscale": self.downscale,
            "sticky_action_prob": self.sticky_action_prob,
            "reward": self.reward,
        }
        if self.state is not None:
            kwargs["state"] = self.state
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.max_episode_steps
        kwargs.update(self.env_kwargs)
        return kwargs


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(TrainConfig)}
_HINTS = typing.get_type_hints(TrainConfig)

#: Built-in defaults per env id (and per start state), tuned so that CPU runs finish.
ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    # BonkQuest is a tile game (8x8 tiles, sprites on the grid): downscale 8 gives one pixel per
    # tile and loses nothing the policy needs, at ~7x the training speed of downscale 4.
    "MetaBonk/BonkQuest-v0": {
        "state": "room1",
        "reward": "explore",
        "downscale": 8,
        "learning_rate": 5e-4,
        "n_epochs": 10,
        "batch_size": 128,
        "clip_range": 0.2,
        "total_steps": 500_000,
    },
    # BonkArena is about where the enemies are: an MLP on the RAM state vector (player, HP, menu,
    # the nearest 8 enemies and 2 gems relative to the player) survived 1.6x as long as random
    # after 1M steps on a CPU; a CNN on 40x60 frames, where an enemy is a 2x2-pixel blob, stayed
    # near 1.3x (docs/training.md). `--set obs_type=grayscale --set policy=CnnPolicy
    # --set frame_stack=4` trains from pixels.
    "MetaBonk/BonkArena-v0": {
        "reward": "survival",
        "obs_type": "state",
        "policy": "MlpPolicy",
        "frame_stack": 1,
        "net_arch": [64, 64],
        "n_envs": 2,
        "n_steps": 512,
        "batch_size": 256,
        "n_epochs": 10,
        "learning_rate": 3e-4,
        "lr_schedule": "constant",
        "clip_range": 0.2,
        "total_steps": 1_000_000,
        "gamma": 0.995,
    },
    # Megabonk (BonkLink; `metabonk_gym.training.megabonk`): an MLP on the scaled state vector
    # learns far faster on a CPU than a CNN on frames; 4 ticks per action (15 decisions per game
    # second); Gaussian actions, so no entropy bonus (it would only widen them).
    "MetaBonk/Megabonk-v0": {
        "reward": "survival",
        "obs_type": "state",
        "policy": "MlpPolicy",
        "frame_stack": 1,
        "downscale": 2,
        "frameskip": 4,
        "net_arch": [64, 64],
        "n_envs": 4,
        "n_steps": 256,
        "batch_size": 256,
        "n_epochs": 10,
        "learning_rate": 3e-4,
        "clip_range": 0.2,
        "ent_coef": 0.0,
        "gamma": 0.99,
        "max_episode_steps": 4500,
        "total_steps": 300_000,
    },
}

#: Defaults for one start state: BonkQuest room1 is the "take the key and leave" benchmark.
STATE_DEFAULTS: dict[tuple[str, str], dict[str, Any]] = {
    ("MetaBonk/BonkQuest-v0", "room1"): {
        "reward": "room1",
        "goal": {"variable": "rooms_visited", "op": "greater-or-equal", "reference": 2},
        # potential-based, towards the key and then the exit: PPO learns room 1 in ~100k steps
        # with it, and plateaus near random (win rate ~0.2) in 50k without
        "shaping": {"weight": 0.05},
        "max_episode_steps": 200,
    },
}


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_type_ok(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Any:
        return True
    return isinstance(value, hint)


def _hint_name(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("<class '", "").replace("'>", "")


def unknown_key_error(key: str, valid: list[str], source: str) -> ConfigError:
    """A `ConfigError` for `key` naming the nearest valid key."""
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(
        f"unknown config key {key!r}{hint}; valid keys: {', '.join(valid)} [{source}]"
    )


def validate(data: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """Check keys, types and choices; coerce ints to floats where a float is expected."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in FIELDS:
            raise unknown_key_error(str(key), list(FIELDS), source)
        hint = _HINTS[key]
        if not _type_ok(value, hint):
            raise ConfigError(
                f"config key {key!r} must be {_hint_name(hint)}, not {value!r} [{source}]"
            )
        if hint is float and isinstance(value, int):
            value = float(value)
        if key in CHOICES and value not in CHOICES[key]:
            raise ConfigError(
                f"config key {key!r} must be one of {', '.join(map(str, CHOICES[key]))}, not {value!r} [{source}]"
            )
        out[key] = value
    for key in (
        "n_envs",
        "n_steps",
        "batch_size",
        "n_epochs",
        "frameskip",
        "frame_stack",
        "torch_threads",
        "base_port",
    ):
        if key in out and out[key] < 1:
            raise ConfigError(f"config key {key!r} must be >= 1, not {out[key]} [{source}]")
    if out.get("goal") is not None:
        check_goal(out["goal"], source)
    if out.get("shaping") is not None:
        extra = set(out["shaping"]) - {"position", "targets", "weight", "absent"}
        if extra:
            raise ConfigError(
                f"shaping takes position, targets, weight and absent, not {sorted(extra)} [{source}]"
            )
    for key in (
        "total_steps",
        "checkpoint_every",
        "video_every",
        "keep_checkpoints",
        "video_length",
    ):
        if key in out and out[key] < 0:
            raise ConfigError(f"config key {key!r} must be >= 0, not {out[key]} [{source}]")
    return out


def check_goal(goal: Mapping[str, Any], source: str = "config") -> None:
    """A goal is {variable, op (stable-retro scenario op), reference}."""
    from metabonk_gym.rewards.terms import OPS

    extra = set(goal) - {"variable", "op", "reference"}
    if extra or "variable" not in goal:
        raise ConfigError(
            f"goal must be {{variable: NAME, op: OP, reference: INT}}, not {dict(goal)!r} [{source}]"
        )
    if goal.get("op", "equal") not in OPS:
        raise ConfigError(
            f"goal op {goal.get('op')!r} is unknown; valid: {', '.join(OPS)} [{source}]"
        )


def load_config_file(path: str | Path, env_id: str) -> dict[str, Any]:
    """The (unchecked) keys a YAML/TOML/JSON file sets for `env_id`.

    A file either holds config keys directly, or sections named by env id plus an optional
    `default` section applied first.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        elif path.suffix == ".json":
            data = json.loads(text)
        else:
            raise ConfigError(f"config file {path} must end in .yaml, .yml, .toml or .json")
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot parse config file {path}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {path} must hold a mapping of keys, not {type(data).__name__}"
        )
    sections = [k for k in data if "/" in str(k) or k == "default"]
    if not sections:
        return data
    flat = [k for k in data if k not in sections]
    if flat:
        raise ConfigError(
            f"config file {path} mixes env sections ({', '.join(sections)}) with top-level keys "
            f"({', '.join(flat)}); put shared keys under 'default:'"
        )
    short = env_id.split(":")[-1]
    if short not in data and "default" not in data:
        raise ConfigError(
            f"config file {path} has no section for {short}; sections: {', '.join(sections)}. "
            "Add one, or a 'default:' section"
        )
    merged: dict[str, Any] = {}
    for section in ("default", short):
        part = data.get(section) or {}
        if not isinstance(part, dict):
            raise ConfigError(f"config file {path}: section {section!r} must be a mapping")
        merged.update(part)
    return merged


def env_defaults(env_id: str, state: str | None = None) -> dict[str, Any]:
    """Built-in defaults for `env_id` (and for `state` when it differs from the env's default)."""
    short = env_id.split(":")[-1]
    out = dict(ENV_DEFAULTS.get(short, {}))
    state = state if state is not None else out.get("state")
    if state is not None:
        out.update(STATE_DEFAULTS.get((short, state), {}))
    return out


def resolve_config(
    env_id: str,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    base: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """Defaults for `env_id` < `base` < `config_file` < `overrides` (given as they are: a None
    value sets an optional key such as `goal` to None)."""
    file_part = (
        validate(load_config_file(config_file, env_id), str(config_file)) if config_file else {}
    )
    flag_part = validate(dict(overrides or {}), "flags")
    base_part = validate(dict(base or {}), "base")
    state = flag_part.get("state", file_part.get("state", base_part.get("state")))
    merged: dict[str, Any] = env_defaults(env_id, state)
    merged.update(base_part)
    merged.update(file_part)
    merged.update(flag_part)
    cfg = TrainConfig.from_dict(merged, "merged")
    check_for_env(env_id, cfg)
    if cfg.batch_size > cfg.n_steps * cfg.n_envs:
        raise ConfigError(
            f"batch_size ({cfg.batch_size}) is larger than one rollout (n_steps x n_envs = "
            f"{cfg.n_steps * cfg.n_envs}); lower batch_size or raise n_steps"
        )
    return cfg


def check_for_env(env_id: str, cfg: TrainConfig) -> None:
    """Settings that only some envs take: Megabonk's checks, and no Megabonk-only ones for GBA."""
    from metabonk_gym.training.megabonk import check_config, is_megabonk

    if is_megabonk(env_id):
        check_config(cfg)
        return
    if cfg.policy == "MultiInputPolicy":
        raise ConfigError(
            f"policy MultiInputPolicy is for MetaBonk/Megabonk-v0's Dict observations; {env_id} "
            "takes CnnPolicy (obs_type rgb/grayscale) or MlpPolicy (obs_type state, or frames)"
        )
    if cfg.obs_type == "state" and cfg.policy != "MlpPolicy":
        raise ConfigError(
            f"obs_type state (the integration's RAM state vector) needs policy MlpPolicy, not "
            f"{cfg.policy}; add --set policy=MlpPolicy, or use obs_type rgb/grayscale"
        )


def config_to_yaml(cfg: TrainConfig | Mapping[str, Any]) -> str:
    """YAML text of a config (what `DIR/config.yaml` holds)."""
    import yaml

    data = cfg.to_dict() if isinstance(cfg, TrainConfig) else dict(cfg)
    return yaml.safe_dump(data, sort_keys=False)


def parse_set_options(items: list[str] | None) -> dict[str, Any]:
    """`--set key=value` flags (values parsed as YAML: numbers, lists, dicts, null).

    >>> parse_set_options(["gamma=0.98", "net_arch=[64, 64]", "state=room2"])
    {'gamma': 0.98, 'net_arch': [64, 64], 'state': 'room2'}
    """
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set takes KEY=VALUE, not {item!r}")
        key = key.strip()
        if key not in FIELDS:
            raise unknown_key_error(key, list(FIELDS), "--set")
        try:
            out[key] = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {key}: cannot parse {raw!r}: {exc}") from exc
    return out
