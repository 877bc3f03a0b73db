"""`RewardFunction`: a named sum of reward terms, and `build_reward` from presets, dicts or files.

>>> from metabonk_gym.rewards.terms import Delta, TimePenalty
>>> fn = RewardFunction({"score": Delta("score", 0.5), "time": TimePenalty(0.1)})
>>> fn.reset({"score": 0})
>>> total, terms = fn.step({"score": 4}); round(total, 3), terms
(1.9, {'score': 2.0, 'time': -0.1})
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from metabonk_gym.rewards.presets import available_presets
from metabonk_gym.rewards.terms import TERM_TYPES, RewardTerm, ScenarioVariable, Vars, check_op

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.errors import RewardSpecError


class RewardFunction:
    """Weighted terms over game variables; keeps the previous step's variables itself."""

    def __init__(self, terms: Mapping[str, RewardTerm]) -> None:
        self.terms = dict(terms)
        self._previous: dict[str, Any] = {}

    @property
    def variables(self) -> set[str]:
        """Every variable a term reads."""
        return {v for term in self.terms.values() for v in term.variables}

    @property
    def required_variables(self) -> set[str]:
        """The variables that must exist (terms marked `optional` read 0 without theirs)."""
        return {v for term in self.terms.values() if not term.optional for v in term.variables}

    def reset(self, current: Vars) -> None:
        self._previous = dict(current)
        for term in self.terms.values():
            term.reset(current)

    def step(self, current: Vars) -> tuple[float, dict[str, float]]:
        previous = self._previous
        values: dict[str, float] = {}
        total = 0.0
        for name, term in self.terms.items():  # summed in order, as sum() would
            values[name] = value = float(term(previous, current))
            total += value
        self._previous = dict(current)
        return total, values


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
        _check_numbers(name, terms[name])
    return terms


def _check_numbers(name: str, term: RewardTerm) -> None:
    """Refuse a term whose numeric fields (weight, reference, ...) hold anything but numbers, at
    build time rather than at the first step.

    >>> from metabonk_gym.rewards.terms import Delta
    >>> _check_numbers("score", Delta("score", weight="abc"))
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.RewardSpecError: reward term 'score': weight must be a number, not 'abc'
    """
    for spec in dataclasses.fields(term):  # type: ignore[arg-type]
        kind = str(spec.type)
        if spec.name.startswith("_") or kind not in ("float", "int", "float | None"):
            continue
        value = getattr(term, spec.name)
        if value is None and kind == "float | None":
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(float(value))
        ):
            raise RewardSpecError(
                f"reward term {name!r}: {spec.name} must be a number, not {value!r}"
            )


def terms_from_scenario(scenario: Mapping[str, Any]) -> dict[str, RewardTerm]:
    """The reward part of a stable-retro `scenario.json`, one term per variable."""
    variables = (scenario.get("reward") or {}).get("variables") or {}
    terms: dict[str, RewardTerm] = {}
    for name, entry in variables.items():
        if entry.get("op") is not None:
            check_op(entry["op"])
        try:
            terms[name] = ScenarioVariable(
                variable=name,
                reward=float(entry.get("reward", 0.0)),
                penalty=float(entry.get("penalty", 0.0)),
                op=entry.get("op"),
                reference=int(entry.get("reference", 0)),
                measurement=str(entry.get("measurement", "delta")),
            )
        except (TypeError, ValueError, OverflowError) as exc:
            raise RewardSpecError(f"scenario.json variable {name!r}: {exc}") from None
        _check_numbers(name, terms[name])  # a NaN weight would make every reward NaN
    return terms


#: A condition's `reference` that means "the variable's value when the episode began".
START_REFERENCE = "start"


@dataclasses.dataclass
class VariableCheck:
    """One scenario condition: `op(variable, reference)`, where the reference may be `"start"`
    (the value at reset), so "the level went up" reads the same from any level's start state.

    >>> check = VariableCheck.parse("level", {"op": "greater-than", "reference": "start"})
    >>> check.reset({"level": 3}); check({"level": 3}), check({"level": 4})
    (False, True)
    """

    variable: str
    test: Any
    reference: int | None  # None: the value at reset
    start_value: int = 0

    @classmethod
    def parse(cls, name: str, entry: Mapping[str, Any]) -> VariableCheck:
        """A check from a scenario entry (`op`, `reference`: an int or "start")."""
        if not isinstance(entry, Mapping):
            raise RewardSpecError(f"condition on {name!r} must be a mapping with op and reference")
        reference = entry.get("reference", 0)
        try:
            ref = None if reference == START_REFERENCE else int(reference)
            return cls(name, check_op(entry.get("op", "equal")), ref)
        except (TypeError, ValueError, OverflowError) as exc:
            raise RewardSpecError(
                f"condition on {name!r}: {exc} (reference: an int or {START_REFERENCE!r})"
            ) from None

    def reset(self, current: Vars) -> None:
        self.start_value = int(current[self.variable])

    def __call__(self, current: Vars) -> bool:
        ref = self.start_value if self.reference is None else self.reference
        return bool(self.test(int(current[self.variable]), ref))


class DoneCondition:
    """The `done` part of a stable-retro `scenario.json`: `any` or `all` of variable conditions
    (a `reference` of `"start"` compares with the value at reset)."""

    def __init__(self, scenario: Mapping[str, Any]) -> None:
        done = scenario.get("done") or {}
        self.mode = done.get("condition", "any")
        if self.mode not in ("any", "all"):
            raise RewardSpecError(
                f"scenario done condition must be 'any' or 'all', not {self.mode!r}"
            )
        self.checks = [
            VariableCheck.parse(name, entry)
            for name, entry in (done.get("variables") or {}).items()
        ]

    @property
    def variables(self) -> set[str]:
        return {check.variable for check in self.checks}

    def reset(self, current: Vars) -> None:
        """Remember the values at the episode's start (for `"start"` references)."""
        for check in self.checks:
            check.reset(current)

    def __call__(self, current: Vars) -> bool:
        if not self.checks:
            return False
        results = (check(current) for check in self.checks)
        return any(results) if self.mode == "any" else all(results)


#: File suffixes a reward spec may have (the config-file formats).
SPEC_SUFFIXES: tuple[str, ...] = (".json", ".yaml", ".yml", ".toml")


def unknown_reward_message(spec: Any, game: str, presets: Mapping[str, Any]) -> str:
    """The error for a reward that is no preset and no file, naming the choices.

    >>> unknown_reward_message("explor", "BonkQuest", {"explore": {}})
    "unknown reward 'explor' for BonkQuest; presets: default, explore; or pass a dict of terms or a .json/.yaml/.toml file"
    """
    names = ", ".join(["default", *(name for name in presets if name != "default")])
    return (
        f"unknown reward {spec!r} for {game}; presets: {names}; or pass a dict of terms or a "
        ".json/.yaml/.toml file"
    )


def load_spec_file(path: Path) -> dict[str, Any]:
    """A reward spec from a .json, .yaml/.yml or .toml file (its terms, or its `terms:` section)."""
    try:
        data = load_config_file(path)
    except ConfigFileError as exc:
        raise RewardSpecError(f"reward file: {exc}") from exc
    if not isinstance(data, dict):
        raise RewardSpecError(f"reward file {path} must hold a mapping of terms")
    return data.get("terms", data)


def build_reward(
    spec: str | Path | Mapping[str, Any] | RewardFunction | None,
    game: str,
    scenario: Mapping[str, Any],
    variables: set[str] | None = None,
    presets: Mapping[str, Any] | None = None,
) -> RewardFunction:
    """A reward from `None`/"default" (the game's "default" preset, else scenario.json), a preset name, a file path, or a dict of
    terms; checks that every variable it reads exists when `variables` is given.

    `presets` are the game's own (`GameData.presets()`), looked up before the generic ones of
    `metabonk_gym.rewards.presets`.
    """
    named = available_presets(presets)
    if isinstance(spec, RewardFunction):
        fn = spec
    elif (spec is None or spec == "default") and "default" not in named:
        fn = RewardFunction(terms_from_scenario(scenario))
    elif spec is None:  # a game without scenario.json declares its "default" preset
        fn = RewardFunction(terms_from_dict(named["default"]))
    elif isinstance(spec, Mapping):
        fn = RewardFunction(terms_from_dict(spec))
    elif isinstance(spec, (str, Path)) and str(spec) in named:
        fn = RewardFunction(terms_from_dict(named[str(spec)]))
    elif isinstance(spec, (str, Path)) and Path(spec).suffix in SPEC_SUFFIXES:
        path = Path(spec).expanduser()
        if not path.is_file():
            raise RewardSpecError(f"reward file not found: {path}")
        fn = RewardFunction(terms_from_dict(load_spec_file(path)))
    else:
        raise RewardSpecError(unknown_reward_message(spec, game, named))
    if variables is not None:
        missing = fn.required_variables - variables
        if missing:
            raise RewardSpecError(
                f"reward reads unknown variables {sorted(missing)}; {game} defines: {', '.join(sorted(variables))}"
            )
    return fn
