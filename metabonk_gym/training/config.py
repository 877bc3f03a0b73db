"""Training configs: per-game defaults, YAML/TOML files (rl-zoo3 style) and flag overrides.

One flat set of keys covers the env (state, reward, preprocessing), PPO's hyperparameters,
logging and behavioural cloning. A file holds either these keys directly or one section per env
id (as rl-zoo3's hyperparameter files do) plus an optional `default` section. Unknown keys are
rejected with the nearest valid key, because a typo that silently trains with a default wastes an
afternoon of CPU.

Precedence: `TrainConfig`'s generic defaults < the game's `defaults.yaml` (and its section for
the start state) < the file < flags. The game is the env's bundled game folder, or the folder
given as `env_kwargs: {integration: FOLDER}` (a user's game: `docs/new-game.md`).

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
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metabonk_gym.bonklink import DEFAULT_PORT
from metabonk_gym.configfile import ConfigFileError, find_file, parse_yaml
from metabonk_gym.configfile import load_config_file as read_config_file
from metabonk_gym.errors import MetabonkError
from metabonk_gym.gamedata import DEFAULTS_SECTIONS, GameData
from metabonk_gym.games import game_for
from metabonk_gym.registration import EnvTraits, env_traits, short_id
from metabonk_gym.rewards.terms import OPS
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.wrapstack import makes_dict, normalize_wrappers
from metabonk_gym.utils import did_you_mean

CHOICES: dict[str, tuple[Any, ...]] = {
    "obs_type": ("rgb", "grayscale", "state"),
    "downscale": (1, 2, 4, 8),
    "policy": ("CnnPolicy", "MlpPolicy", "MultiInputPolicy"),
    "features": ("small", "nature", "cells", "ego-cells"),
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
    "wrappers",
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
    #: Robustify's bonus per waypoint of the demonstration's path passed (0: none; see
    #: `envs.WaypointReward`).
    waypoint_reward: float = 0.0
    #: Success condition that also ends the episode, e.g. {"variable": "rooms_visited",
    #: "op": "greater-or-equal", "reference": 2}; None: success is the game's own `won`.
    goal: dict[str, Any] | None = None
    #: Potential-based shaping towards objectives (`ApproachShaping` kwargs: position, targets,
    #: weight, absent); None: none.
    shaping: dict[str, Any] | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Wrappers around each env, innermost first: `{name: tile_tokens, OPTION: VALUE}` entries
    #: (`metabonk_gym.training.wrapstack`); a Dict observation picks `MultiInputPolicy`.
    wrappers: list[dict[str, Any]] = field(default_factory=list)
    #: Megabonk: training env i connects to base_port + i (`metabonk bonklink-sim --instances`).
    base_port: int = DEFAULT_PORT
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
        env): the core options every env takes, the start state and sticky actions when set, and
        for envs with a port per copy (`EnvTraits.port_per_env`), port `base_port + index`."""
        kwargs: dict[str, Any] = {
            "frameskip": self.frameskip,
            "obs_type": self.obs_type,
            "downscale": self.downscale,
            "reward": self.reward,
        }
        if self.sticky_action_prob:
            kwargs["sticky_action_prob"] = self.sticky_action_prob
        if self.state is not None:
            kwargs["state"] = self.state
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.max_episode_steps
        if env_id is not None and traits_of(env_id).port_per_env:
            kwargs["port"] = self.base_port + index
        kwargs.update(self.env_kwargs)
        return kwargs


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(TrainConfig)}

_INF = float("inf")
#: Number keys with bounds: (low, high, low excluded). Rates and clips must be positive (a
#: negative learning rate would train the policy away from its rewards).
#: Most envs one training run steps (each is a process; the vector engine's workers step at
#: most 255 each).
MAX_N_ENVS = 255
RANGES: dict[str, tuple[float, float, bool]] = {
    "learning_rate": (0.0, _INF, True),
    "bc_learning_rate": (0.0, _INF, True),
    "clip_range": (0.0, _INF, True),
    "max_grad_norm": (0.0, _INF, True),
    "target_kl": (0.0, _INF, True),
    "gamma": (0.0, 1.0, False),
    "gae_lambda": (0.0, 1.0, False),
    "ent_coef": (0.0, _INF, False),
    "vf_coef": (0.0, _INF, False),
    "bc_ent_coef": (0.0, _INF, False),
    "bc_value_coef": (0.0, _INF, False),
    "sticky_action_prob": (0.0, 1.0, False),
    "waypoint_reward": (0.0, _INF, False),
}
#: Upper bounds of whole-number keys, generous for training yet far from what would exhaust
#: memory when a shared run or model zip sets them (`frame_stack: 4000000` stacks that many
#: frames; `n_steps` sizes the rollout buffer, `features_dim` and `net_arch` the network).
MAX_VALUES: dict[str, int] = {
    "frame_stack": 64,
    "n_steps": 1 << 16,
    "batch_size": 1 << 20,
    "n_epochs": 10_000,
    "features_dim": 1 << 14,
    "frameskip": 1024,
    "max_episode_steps": 10**9,
    "total_steps": 10**13,
    "torch_threads": 1024,
    "checkpoint_every": 10**12,
    "keep_checkpoints": 10**6,
    "video_every": 10**12,
    "video_length": 1 << 20,
    "win_window": 1 << 20,
    "bc_epochs": 1 << 20,
    "bc_batch_size": 1 << 20,
}
#: `net_arch`: at most this many layers of at most `features_dim`'s bound units each.
MAX_NET_LAYERS = 16
#: `game_seeds`: at most this many seeds.
MAX_GAME_SEEDS = 1 << 16
_HINTS = typing.get_type_hints(TrainConfig)

#: The policies each obs_type takes unless the game's defaults.yaml says otherwise (`policies:`).
POLICIES: dict[str, list[str]] = {
    "state": ["MlpPolicy"],
    "rgb": ["CnnPolicy", "MlpPolicy"],
    "grayscale": ["CnnPolicy", "MlpPolicy"],
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
    hint = did_you_mean(key, valid)
    return ConfigError(
        f"unknown config key {key!r}{hint}; valid keys: {', '.join(valid)} [{source}]"
    )


def validate(data: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """Check keys, types and choices; coerce ints to floats where a float is expected."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in FIELDS:
            raise unknown_key_error(str(key), list(FIELDS), source)
        if key == "wrappers":  # names and options checked, bare names allowed
            value = normalize_wrappers(value, source)
        hint = _HINTS[key]
        if not _type_ok(value, hint):
            raise ConfigError(
                f"config key {key!r} must be {_hint_name(hint)}, not {_short(value)} [{source}]"
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
        "total_steps",
        "features_dim",
        "win_window",
        "bc_epochs",
        "bc_batch_size",
    ):
        if key in out and out[key] < 1:
            raise ConfigError(f"config key {key!r} must be >= 1, not {out[key]} [{source}]")
    steps = out.get("max_episode_steps")
    if steps is not None and steps < 1:
        raise ConfigError(f"config key 'max_episode_steps' must be >= 1, not {steps} [{source}]")
    _check_upper_bounds(out, source)
    if out.get("n_envs", 1) > MAX_N_ENVS:
        raise ConfigError(
            f"config key 'n_envs' must be <= {MAX_N_ENVS} (each env runs in a process), "
            f"not {out['n_envs']} [{source}]"
        )
    for key, (low, high, low_open) in RANGES.items():
        value = out.get(key)
        if value is None:
            continue
        if value < low or value > high or (low_open and value == low):
            bound = f"> {low}" if low_open else f">= {low}"
            limit = f"{bound} and <= {high}" if high != float("inf") else bound
            raise ConfigError(
                f"config key {key!r} must be {limit}, not {value} (e.g. --set {key}="
                f"{FIELDS[key].default}) [{source}]"
            )
    if out.get("goal") is not None:
        check_goal(out["goal"], source)
    if out.get("shaping") is not None:
        extra = set(out["shaping"]) - {"position", "targets", "weight", "absent"}
        if extra:
            raise ConfigError(
                f"shaping takes position, targets, weight and absent, not {sorted(extra)} [{source}]"
            )
    for key in (
        "checkpoint_every",
        "video_every",
        "keep_checkpoints",
        "video_length",
    ):
        if key in out and out[key] < 0:
            raise ConfigError(f"config key {key!r} must be >= 0, not {out[key]} [{source}]")
    return out


def _check_upper_bounds(out: Mapping[str, Any], source: str) -> None:
    """`ConfigError` for a whole number above its `MAX_VALUES` bound, or a `net_arch` or
    `game_seeds` list too long or too wide.

    >>> _check_upper_bounds({"frame_stack": 4_000_000}, "run/model.zip")
    Traceback (most recent call last):
    ...
    metabonk_gym.training.errors.ConfigError: config key 'frame_stack' must be <= 64, not 4000000 [run/model.zip]
    """
    for key, high in MAX_VALUES.items():
        value = out.get(key)
        if value is not None and value > high:
            raise ConfigError(f"config key {key!r} must be <= {high}, not {value} [{source}]")
    arch = out.get("net_arch") or []
    width = MAX_VALUES["features_dim"]
    if len(arch) > MAX_NET_LAYERS or any(not 1 <= n <= width for n in arch):
        raise ConfigError(
            f"config key 'net_arch' must be at most {MAX_NET_LAYERS} layers of 1..{width} "
            f"units, not {_short(arch)} [{source}]"
        )
    if len(out.get("game_seeds") or []) > MAX_GAME_SEEDS:
        raise ConfigError(
            f"config key 'game_seeds' holds more than {MAX_GAME_SEEDS} seeds [{source}]"
        )


def _short(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut to `limit` characters (a hostile list can be long)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_goal(goal: Mapping[str, Any], source: str = "config") -> None:
    """A goal is {variable, op (stable-retro scenario op), reference}."""

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
    try:
        data = read_config_file(path)
    except ConfigFileError as exc:
        raise ConfigError(f"config file: {exc}") from exc
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
    short = short_id(env_id)
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


def game_of(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> GameData | None:
    """The game folder behind `env_id` made with `env_kwargs` (None: a user env without one).

    >>> game_of("MetaBonk/BonkArena-v0").name
    'BonkArena'
    """
    traits_of(env_id)  # an unknown id fails here with the list of ids
    try:
        return game_for(env_id, **dict(env_kwargs or {}))
    except MetabonkError as exc:  # a missing integration folder, an unreadable data file
        raise ConfigError(str(exc)) from exc


def traits_of(env_id: str) -> EnvTraits:
    """`env_traits(env_id)`, with an unknown id as a `ConfigError` listing the known ones."""
    try:
        return env_traits(env_id)
    except MetabonkError as exc:
        raise ConfigError(str(exc)) from exc


def env_defaults(
    env_id: str, state: str | None = None, env_kwargs: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The game's defaults.yaml for `env_id`: its config keys, then its `states:` section for
    `state` (or for the state the defaults name); checked, with errors naming the file.

    >>> env_defaults("MetaBonk/BonkQuest-v0", "room1")["reward"]
    'room1'
    """
    game = game_of(env_id, env_kwargs)
    if game is None:
        return {}
    data = game.defaults()
    source = str(find_file(game.folder, "defaults") or game.folder / "defaults.yaml")
    out = validate({k: v for k, v in data.items() if k not in DEFAULTS_SECTIONS}, source)
    state = state if state is not None else out.get("state")
    per_state = (data.get("states") or {}).get(state) if state is not None else None
    if per_state:
        out.update(validate(per_state, f"{source} states.{state}"))
    return out


def resolve_config(
    env_id: str,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    base: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """The game's defaults for `env_id` < `base` < `config_file` < `overrides` (given as they
    are: a None value sets an optional key such as `goal` to None)."""
    file_part = (
        validate(load_config_file(config_file, env_id), str(config_file)) if config_file else {}
    )
    flag_part = validate(dict(overrides or {}), "flags")
    base_part = validate(dict(base or {}), "base")
    parts = (flag_part, file_part, base_part)
    state = next((p["state"] for p in parts if "state" in p), None)
    env_kwargs = next((p["env_kwargs"] for p in parts if "env_kwargs" in p), None)
    merged: dict[str, Any] = env_defaults(env_id, state, env_kwargs)
    merged.update(base_part)
    merged.update(file_part)
    merged.update(flag_part)
    if makes_dict(merged.get("wrappers") or []):  # Dict observations: SB3's MultiInputPolicy
        merged["policy"] = "MultiInputPolicy"
    cfg = TrainConfig.from_dict(merged, "merged")
    check_for_env(env_id, cfg)
    if cfg.batch_size > cfg.n_steps * cfg.n_envs:
        raise ConfigError(
            f"batch_size ({cfg.batch_size}) is larger than one rollout (n_steps x n_envs = "
            f"{cfg.n_steps * cfg.n_envs}); lower batch_size or raise n_steps"
        )
    return cfg


def check_for_env(env_id: str, cfg: TrainConfig) -> None:
    """Settings the env cannot take, from its traits (`env_traits`) and its game's data: start
    states, sticky actions, shaping, ports, and the policy each obs_type needs."""
    traits = traits_of(env_id)
    needs = {
        "state": (traits.start_states, "it cannot choose its start state"),
        "game_seeds": (traits.start_states, "it cannot seed its game at reset"),
        "shaping": (traits.ram_variables, "shaping reads game variables from RAM"),
        "sticky_action_prob": (traits.sticky_actions, "it takes no sticky_action_prob"),
        "waypoint_reward": (traits.ram_variables, "waypoints are RAM cells of a path"),
    }
    for key, (supported, why) in needs.items():
        if getattr(cfg, key) and not supported:
            raise ConfigError(f"{key} is not supported for {env_id}: {why}; drop it")
    if traits.port_per_env:
        if "port" in cfg.env_kwargs:
            raise ConfigError(
                "env_kwargs.port is set per env from base_port (env i uses base_port + i); "
                "set base_port instead"
            )
        if not 1 <= cfg.base_port <= 65536 - cfg.n_envs:
            raise ConfigError(
                f"base_port {cfg.base_port} with {cfg.n_envs} envs leaves the TCP port range"
            )
    if makes_dict(cfg.wrappers):
        return  # the wrappers' Dict observation takes MultiInputPolicy, whatever obs_type
    game = game_of(env_id, cfg.env_kwargs)
    policies = {**POLICIES, **((game.defaults().get("policies") or {}) if game else {})}
    allowed = policies.get(cfg.obs_type) or POLICIES[cfg.obs_type]
    if isinstance(allowed, str):
        allowed = [allowed]
    if cfg.policy not in allowed:
        raise ConfigError(
            f"obs_type {cfg.obs_type} needs policy {' or '.join(allowed)} on {env_id}, not "
            f"{cfg.policy}; set policy: {allowed[0]} (--set policy={allowed[0]})"
        )


def check_env_fit(cfg: TrainConfig, env_id: str, info_names: list[str]) -> None:
    """Checks that need the env's info names (`probe_env`): the goal's variable must be one of
    them, or a RAM variable of an env that reads those (`EnvTraits.ram_variables`).

    >>> check_env_fit(TrainConfig(goal={"variable": "lap"}), "MetaBonk/Megabonk-v0", ["hp"])
    Traceback (most recent call last):
    ...
    metabonk_gym.training.errors.ConfigError: goal variable 'lap' is not an info variable of MetaBonk/Megabonk-v0; valid: hp
    """
    goal = cfg.goal
    if goal is None or goal["variable"] in info_names or traits_of(env_id).ram_variables:
        return
    raise ConfigError(
        f"goal variable {goal['variable']!r} is not an info variable of {env_id}; valid: "
        f"{', '.join(info_names)}"
    )


def config_to_yaml(cfg: TrainConfig | Mapping[str, Any]) -> str:
    """YAML text of a config (what `DIR/config.yaml` holds)."""
    import yaml

    data = cfg.to_dict() if isinstance(cfg, TrainConfig) else dict(cfg)
    return yaml.safe_dump(data, sort_keys=False)


def parse_key_values(items: list[str] | None, flag: str) -> dict[str, Any]:
    """`KEY=VALUE` flags (`--set`, `--env-kwarg`, `--agent-opt`), values parsed as YAML
    (numbers, booleans, lists, dicts, null).

    >>> parse_key_values(["gamma=0.98", "net_arch=[64, 64]", "check_hash=false"], "--set")
    {'gamma': 0.98, 'net_arch': [64, 64], 'check_hash': False}
    """
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} takes KEY=VALUE, not {item!r}")
        key = key.strip()
        try:
            out[key] = parse_yaml(raw)
        except (yaml.YAMLError, ConfigFileError) as exc:
            raise ConfigError(f"{flag} {key}: cannot parse {raw!r}: {exc}") from exc
    return out


def parse_env_kwargs(
    items: list[str] | None = None,
    integration: str | Path | None = None,
    rom: str | Path | None = None,
) -> dict[str, Any]:
    """The config's `env_kwargs` from `--env-kwarg KEY=VALUE` flags, an integration folder and a
    ROM (stored as absolute paths, so the run and its model work from any folder).

    >>> parse_env_kwargs(["backend=skyemu"])
    {'backend': 'skyemu'}
    """
    out = parse_key_values(items, "--env-kwarg")
    for key, path in (("integration", integration), ("rom", rom)):
        if path is None:
            continue
        resolved = Path(path).expanduser().resolve()
        if key == "integration" and not resolved.is_dir():
            raise ConfigError(
                f"--integration {path} is not a folder; an integration is a folder with "
                "data.json, scenario.json and metadata.json (docs/new-game.md)"
            )
        out[key] = str(resolved)
    return out


def parse_set_options(items: list[str] | None) -> dict[str, Any]:
    """`--set key=value` flags for config keys (see `parse_key_values`).

    >>> parse_set_options(["gamma=0.98", "net_arch=[64, 64]", "state=room2"])
    {'gamma': 0.98, 'net_arch': [64, 64], 'state': 'room2'}
    """
    for item in items or []:
        key = item.partition("=")[0].strip()
        if "=" in item and key and key not in FIELDS:
            raise unknown_key_error(key, list(FIELDS), "--set")
    return parse_key_values(items, "--set")
