"""Wrapper stacks of training configs: the `wrappers:` list, checked, applied and read back.

What: a config's `wrappers:` is a list of `{name: NAME, OPTION: VALUE, ...}` entries (or bare
names), applied in order around each training env inside the vector engine's workers; the names
are those of the wrapper classes research code imports from `metabonk_gym.wrappers`
(`tile_tokens` is `TileTokens`, `pause_to_think` is `PauseToThink`, ...). Why one module: training,
`eval`, `play`, `record` and `ladder` must build the same stack, so the run's `config.yaml` holds it
and `run_wrappers(RUN_DIR)` reads it back.

>>> normalize_wrappers(["tile_tokens", {"name": "ButtonHistory", "n": 4}])
[{'name': 'tile_tokens'}, {'name': 'button_history', 'n': 4}]
>>> normalize_wrappers([{"name": "tile_token"}])
Traceback (most recent call last):
...
metabonk_gym.training.errors.ConfigError: unknown wrapper 'tile_token' (did you mean 'tile_tokens'?); wrappers: button_history, grid_overlay, memory, pause_to_think, pixel_cells, ram_features, temporal_strip, text_map, tile_tokens [config]
>>> describe_wrappers([{"name": "button_history", "n": 4}])
'button_history(n=4)'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

import metabonk_gym.think.pause_to_think  # noqa: F401  (registers PauseToThink)
import metabonk_gym.wrappers  # noqa: F401  (registers the wrappers it exports)
import metabonk_gym.wrappers.memory  # noqa: F401  (registers Memory)
from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.utils import did_you_mean
from metabonk_gym.wrappers.registry import CONFIG_WRAPPERS, WrapperEntry

#: One entry of a `wrappers:` list after `normalize_wrappers`: `name` plus the options.
WrapperSpec = dict[str, Any]


#: The wrappers a config may name, by their snake_case class names: every class that registered
#: itself with `metabonk_gym.wrappers.registry.config_wrapper` (the imports above load them all).
WRAPPERS: dict[str, WrapperEntry] = dict(CONFIG_WRAPPERS)
#: The thinking wrapper's name, and its option that only a trainer reads.
THINK = "pause_to_think"
SERVE = "serve"
#: Options a trainer reads and the wrapper never gets: `serve: true` asks the SB3 trainers to
#: serve the model to all envs from one server (`metabonk_gym.training.thinkserver`); built
#: elsewhere (eval, play) the entry is an in-process model per env.
TRAINER_OPTIONS: dict[str, tuple[str, ...]] = {THINK: (SERVE,)}
#: The class names as aliases (`TileTokens` for `tile_tokens`).
ALIASES: dict[str, str] = {entry.cls.__name__: name for name, entry in WRAPPERS.items()}


def _nearest(word: str, valid: Sequence[str]) -> str:
    return did_you_mean(word, valid)


def normalize_wrappers(value: Any, source: str = "config") -> list[WrapperSpec]:
    """A `wrappers:` value as a checked list of `{name, **options}` (names in snake_case);
    an unknown name or option is a one-line `ConfigError` naming the nearest."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(
            f"wrappers must be a list of names or {{name: NAME, OPTION: VALUE}} entries, not "
            f"{value!r} [{source}]"
        )
    out: list[WrapperSpec] = []
    for item in value:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ConfigError(
                f"each wrappers entry needs a name ({{name: tile_tokens, ...}}), not {item!r} "
                f"[{source}]"
            )
        name = str(ALIASES.get(item["name"], item["name"]))
        if name not in WRAPPERS:
            raise ConfigError(
                f"unknown wrapper {item['name']!r}{_nearest(name, [*WRAPPERS, *ALIASES])}; "
                f"wrappers: {', '.join(sorted(WRAPPERS))} [{source}]"
            )
        options = {k: v for k, v in item.items() if k != "name"}
        if isinstance(options.get("options"), Mapping) and len(options) == 1:
            options = dict(options["options"])  # {name: X, options: {...}} also reads
        valid = [*WRAPPERS[name].options(), *TRAINER_OPTIONS.get(name, ())]
        for key in options:
            if key not in valid:
                raise ConfigError(
                    f"wrapper {name} has no option {key!r}{_nearest(str(key), valid)}; options: "
                    f"{', '.join(valid)} [{source}]"
                )
        out.append({"name": name, **options})
    return out


def makes_dict(specs: Sequence[WrapperSpec]) -> bool:
    """True when the stack's observation is a Dict (any wrapper that adds keys)."""
    return any(
        WRAPPERS[s["name"]].dict_obs
        and not (s["name"] == "pause_to_think" and s.get("directive_in_obs") is False)
        for s in specs
    )


def uses_dict_extractor(cfg: Any) -> bool:
    """A config whose wrappers make a Dict observation, with `features: small`, trains with
    `DictExtractor` (small CNN on frames, scaled numbers otherwise); Dict observations without
    wrappers (Megabonk's) keep SB3's `CombinedExtractor`, as their models were trained."""
    return bool(cfg.wrappers) and cfg.policy == "MultiInputPolicy" and cfg.features == "small"


def apply_wrappers(env: gym.Env, specs: Sequence[WrapperSpec] | None) -> gym.Env:
    """`env` inside the wrappers of `specs`, first entry innermost; a wrapper that refuses
    its options (a wrong type or value) is a `ConfigError` naming it. Closes `env` on error.

    >>> import metabonk_gym
    >>> env = apply_wrappers(gym.make("MetaBonk/BonkQuest-v0"), [{"name": "button_history", "n": 2}])
    >>> sorted(env.observation_space.spaces)
    ['buttons', 'pixels']
    >>> env.close()
    """
    for spec in normalize_wrappers(list(specs or [])):
        trainer_only = TRAINER_OPTIONS.get(spec["name"], ())
        options = {k: v for k, v in spec.items() if k != "name" and k not in trainer_only}
        try:
            env = WRAPPERS[spec["name"]].cls(env, **options)  # type: ignore[call-arg]
        except (TypeError, ValueError, KeyError) as exc:
            env.close()
            raise ConfigError(
                f"wrapper {describe_wrappers([spec])} failed on {env.spec.id if env.spec else env}: "
                f"{exc}".replace("\n", " ")
            ) from exc
        except BaseException:
            env.close()
            raise
    return env


def describe_wrappers(specs: Sequence[WrapperSpec] | None) -> str:
    """A one-line text of a stack, innermost first ("none" for an empty one)."""
    if not specs:
        return "none"
    parts = []
    for spec in specs:
        options = ", ".join(f"{k}={v!r}" for k, v in spec.items() if k != "name")
        parts.append(f"{spec['name']}({options})")
    return " > ".join(parts)


def same_wrappers(a: Sequence[WrapperSpec] | None, b: Sequence[WrapperSpec] | None) -> bool:
    """True when two stacks are the same wrappers with the same options, in the same order.

    >>> same_wrappers(["tile_tokens"], [{"name": "TileTokens"}])
    True
    """
    return normalize_wrappers(list(a or [])) == normalize_wrappers(list(b or []))


def run_wrappers(run_dir: str | Path) -> list[WrapperSpec]:
    """The wrapper stack a run directory was trained with (its `config.yaml`'s `wrappers:`;
    `[]` for a run without one): what `eval`, `play`, `record` and `ladder` rebuild."""
    path = Path(run_dir).expanduser()
    config_file = path / "config.yaml" if path.is_dir() else path
    if not config_file.is_file():
        raise ConfigError(f"{path} is not a run directory: it has no config.yaml")
    try:
        data = load_config_file(config_file)
    except ConfigFileError as exc:
        raise ConfigError(str(exc)) from exc
    if not isinstance(data, Mapping):
        raise ConfigError(f"{config_file} must hold a mapping")
    return normalize_wrappers(data.get("wrappers"), str(config_file))


def check_wrappers_match(
    run_dir: str | Path, wanted: Sequence[WrapperSpec] | None, stack: Sequence[WrapperSpec]
) -> None:
    """A one-line `ConfigError` when `wanted` (a command's own `wrappers:`; None: not given)
    differs from `stack`, the run's: a policy sees only the observations it was trained on."""
    if wanted is None or same_wrappers(wanted, stack):
        return
    raise ConfigError(
        f"{run_dir} was trained with wrappers {describe_wrappers(stack)}, not "
        f"{describe_wrappers(normalize_wrappers(list(wanted)))}; drop the wrappers setting "
        "(the run's own stack is rebuilt from its config.yaml)"
    )
