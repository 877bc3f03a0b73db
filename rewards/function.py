"""`RewardFunction`: a named sum of reward terms, and `build_reward` from presets, dicts or files.

>>> from metabonk_gym.rewards.terms import Delta, TimePenalty
>>> fn = RewardFunction({"score": Delta("score", 0.5), "time": TimePenalty(0.1)})
>>> fn.reset({"score": 0})
>>> total, terms = fn.step({"score": 4}); round(total, 3), terms
(1.9, {'score': 2.0, 'time': -0.1})
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.rewards.terms import TERM_TYPES, RewardTerm, ScenarioVariable, Vars, check_op

from metabonk_gym.errors import RewardSpecError


class RewardFunction:
    """Weighted terms over game variables; keeps the previous step's variables itself."""

    def __init__(self, terms: Mapping[str, RewardTerm]) -> None:
        self.terms = dict(terms)
        self._previous: dict[str, Any] = {}

    @property
    def variables(self) -> set[str]:
        return {v for term in self.terms.values() for v in term.variables}

    def reset(self, current: Vars) -> None:
        self._previous = dict(current)
        for term in self.terms.values():
            term.reset(current)

    def step(self, current: Vars) -> tuple[float, dict[str, float]]:
        values = {name: float(term(self._previous, current)) for name, term in self.terms.items()}
        self._previous = dict(current)
        return sum(values.values()), values


def terms_from_dict(spec: Mapping[str, Any]) -> dict[str, RewardTerm]:
    """Terms from `{"name": {"type": "delta", "variable": "score", "weight": 1}, ...}`."""
    terms: dict[str, RewardTerm] = {}
    for name, entry in spec.items():
        if not isinstance(entry, Mapping) or "type" not in entry:
            raise RewardSpecError(
                f"reward term {name!r} must be a mapping with a 'type' ({', '.join(TERM_TYPES)})"
            )
        kwargs = {k: v for k, v in entry.items() if k != "type"}
        if "keys" in kwargs:
            kwargs["keys"] = tuple(kwargs["keys"])
        try:
            terms[name] = TERM_TYPES[entry["type"]](**kwargs)
        except KeyError:
            raise RewardSpecError(
                f"reward term {name!r}: unknown type {entry['type']!r}; valid: {', '.join(TERM_TYPES)}"
            ) from None
        except (TypeError, ValueError) as exc:
            raise RewardSpecError(f"reward term {name!r}: {exc}") from exc
    return terms


def terms_from_scenario(scenario: Mapping[str, Any]) -> dict[str, RewardTerm]:
    """The reward part of a stable-retro `scenario.json`, one term per variable."""
    variables = (scenario.get("reward") or {}).get("variables") or {}
    terms: dict[str, RewardTerm] = {}
    for name, entry in variables.items():
        if entry.get("op") is not None:
            check_op(entry["op"])
        terms[name] = ScenarioVariable(
            variable=name,
            reward=float(entry.get("reward", 0.0)),
            penalty=float(entry.get("penalty", 0.0)),
            op=entry.get("op"),
            reference=int(entry.get("reference", 0)),
            measurement=str(entry.get("measurement", "delta")),
        )
    return terms


class DoneCondition:
    """The `done` part of a stable-retro `scenario.json`: `any` or `all` of variable conditions."""

    def __init__(self, scenario: Mapping[str, Any]) -> None:
        done = scenario.get("done") or {}
        self.mode = done.get("condition", "any")
        if self.mode not in ("any", "all"):
            raise RewardSpecError(
                f"scenario done condition must be 'any' or 'all', not {self.mode!r}"
            )
        self.checks = [
            (name, check_op(entry.get("op", "equal")), int(entry.get("reference", 0)))
            for name, entry in (done.get("variables") or {}).items()
        ]

    @property
    def variables(self) -> set[str]:
        return {name for name, _, _ in self.checks}

    def __call__(self, current: Vars) -> bool:
        if not self.checks:
            return False
        results = (test(int(current[name]), ref) for name, test, ref in self.checks)
        return any(results) if self.mode == "any" else all(results)


def load_spec_file(path: Path) -> dict[str, Any]:
    """A reward spec from a .json, .yaml/.yml or .toml file."""
    text = path.read_text()
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            raise RewardSpecError(f"reward file {path} must end in .json, .yaml, .yml or .toml")
    except RewardSpecError:
        raise
    except Exception as exc:
        raise RewardSpecError(f"cannot parse reward file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise RewardSpecError(f"reward file {path} must hold a mapping of terms")
    return data.get("terms", data)


def build_reward(
    spec: str | Path | Mapping[str, Any] | RewardFunction | None,
    game: str,
    scenario: Mapping[str, Any],
    variables: set[str] | None = None,
) -> RewardFunction:
    """A reward from `None`/"default" (scenario.json), a preset name, a file path, or a dict of
    terms; checks that every variable it reads exists when `variables` is given."""
    from metabonk_gym.rewards.presets import PRESETS

    if isinstance(spec, RewardFunction):
        fn = spec
    elif spec is None or spec == "default":
        fn = RewardFunction(terms_from_scenario(scenario))
    elif isinstance(spec, Mapping):
        fn = RewardFunction(terms_from_dict(spec))
    elif isinstance(spec, (str, Path)) and (str(spec) in PRESETS.get(game, {})):
        fn = RewardFunction(terms_from_dict(PRESETS[game][str(spec)]))
    elif isinstance(spec, (str, Path)) and Path(spec).suffix in (".json", ".yaml", ".yml", ".toml"):
        path = Path(spec).expanduser()
        if not path.is_file():
            raise RewardSpecError(f"reward file not found: {path}")
        fn = RewardFunction(terms_from_dict(load_spec_file(path)))
    else:
        names = ["default", *PRESETS.get(game, {})]
        raise RewardSpecError(
            f"unknown reward {spec!r} for {game}; presets: {', '.join(names)}; or pass a dict of "
            "terms or a .json/.yaml/.toml file"
        )
    if variables is not None:
        missing = fn.variables - variables
        if missing:
            raise RewardSpecError(
                f"reward reads unknown variables {sorted(missing)}; {game} defines: {', '.join(sorted(variables))}"
            )
    return fn
