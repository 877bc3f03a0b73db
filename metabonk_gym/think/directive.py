"""Directives: what System 2 tells System 1, their JSON schema, lenient parsing and strict checks.

What: a `Directive` is one strategic instruction (`goal`, `reasoning`, `action`, `target`,
`duration_frames`, `confidence`). `DirectiveSpec` holds a game's action enum and coordinate ranges
and builds the JSON schema that grammar-constrained decoding enforces (llama.cpp's JSON-schema
grammar, the OpenAI `response_format`). `parse_directive` turns model text into a directive.

Why lenient parsing *and* strict validation: grammar output can still hold control characters
inside strings (byte-level vocabularies), code fences or chatter from servers without grammar
support, and llama.cpp's grammar does not enforce integer ranges, so a confused model can answer
`"x": 1111111`. Text is repaired where the intent is unambiguous (control characters, fences,
surrounding prose, `"7"` for 7, over-long prose cut to its bound); anything that changes meaning
(an unknown action, an out-of-range tile, a missing field) is rejected with a reason, and the
caller falls back to `DirectiveSpec.fallback(reason)`.

>>> spec = DirectiveSpec(game="Demo", actions=("go_to", "wait"))
>>> d = parse_directive('```json\\n{"goal": "door", "reasoning": "", "action": "go_to", '
...     '"target": {"x": 3, "y": "4"}, "duration_frames": 120, "confidence": 0.9}\\n```', spec)
>>> d.action, d.target, d.duration_frames
('go_to', {'x': 3, 'y': 4}, 120)
>>> parse_directive('{"goal": "x", "reasoning": "", "action": "go_to", "target": {"x": 99, "y": 0},'
...     ' "duration_frames": 60, "confidence": 1}', spec)
Traceback (most recent call last):
...
metabonk_gym.errors.DirectiveError: target.x 99 is out of range 0..29
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from metabonk_gym.errors import DirectiveError as DirectiveError  # re-exported

#: Keys of a directive, in the order the schema asks the model to write them.
DIRECTIVE_KEYS = ("goal", "reasoning", "action", "target", "duration_frames", "confidence")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Directive:
    """One instruction from System 2.

    `target` is `{"x": col, "y": row}` (tile / screen-cell coordinates), `{"option": i}` (a menu
    option) or None. `source` says who produced it (`model`, `oracle`, `distilled`, `fallback`);
    `reason` is why a fallback was used.
    """

    goal: str
    reasoning: str
    action: str
    target: dict[str, int] | None
    duration_frames: int
    confidence: float
    source: str = "model"
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what `info["directive"]` holds)."""
        out = asdict(self)
        out["target"] = dict(self.target) if self.target is not None else None
        return out

    @property
    def tile(self) -> tuple[int, int] | None:
        """The target tile `(x, y)`, or None when the target is not a tile."""
        if self.target is not None and "x" in self.target and "y" in self.target:
            return int(self.target["x"]), int(self.target["y"])
        return None

    @property
    def option(self) -> int | None:
        """The target menu option, or None."""
        if self.target is not None and "option" in self.target:
            return int(self.target["option"])
        return None


@dataclass(frozen=True)
class DirectiveSpec:
    """A game's directive vocabulary: actions, coordinate ranges, bounds and its safe fallback.

    `tile_actions` need a tile target, `option_actions` a menu option; other actions take a tile
    or null. The fallback is what System 1 does when System 2 is late, wrong or down.
    """

    game: str
    actions: tuple[str, ...]
    grid_w: int = 30
    grid_h: int = 20
    n_options: int = 0
    tile_actions: tuple[str, ...] = ("go_to",)
    option_actions: tuple[str, ...] = ()
    max_goal_chars: int = 80
    max_reasoning_chars: int = 240
    min_duration_frames: int = 1
    max_duration_frames: int = 3600
    fallback_action: str = "wait"
    fallback_frames: int = 60
    action_help: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.fallback_action not in self.actions:
            raise ValueError(f"fallback action {self.fallback_action!r} is not in {self.actions}")

    # ------------------------------------------------------------------ schema
    def schema(self) -> dict[str, Any]:
        """The JSON schema of a directive (draft 2020-12 subset every grammar converter knows)."""
        tile = {
            "type": "object",
            "properties": {
                "x": {"type": "integer", "minimum": 0, "maximum": self.grid_w - 1},
                "y": {"type": "integer", "minimum": 0, "maximum": self.grid_h - 1},
            },
            "required": ["x", "y"],
            "additionalProperties": False,
        }
        targets: list[dict[str, Any]] = [tile]
        if self.n_options:
            targets.append(
                {
                    "type": "object",
                    "properties": {
                        "option": {"type": "integer", "minimum": 0, "maximum": self.n_options - 1}
                    },
                    "required": ["option"],
                    "additionalProperties": False,
                }
            )
        targets.append({"type": "null"})
        return {
            "title": f"{self.game}Directive",
            "type": "object",
            "properties": {
                "goal": {"type": "string", "minLength": 1, "maxLength": self.max_goal_chars},
                "reasoning": {"type": "string", "maxLength": self.max_reasoning_chars},
                "action": {"type": "string", "enum": list(self.actions)},
                "target": {"anyOf": targets},
                "duration_frames": {
                    "type": "integer",
                    "minimum": self.min_duration_frames,
                    "maximum": self.max_duration_frames,
                },
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": list(DIRECTIVE_KEYS),
            "additionalProperties": False,
        }

    def fallback(self, reason: str, frames: int | None = None) -> Directive:
        """The safe directive used when thinking failed; `reason` is logged and counted."""
        return Directive(
            goal="keep safe until the strategist answers",
            reasoning="",
            action=self.fallback_action,
            target=None,
            duration_frames=int(frames or self.fallback_frames),
            confidence=0.0,
            source="fallback",
            reason=reason,
        )

    # ------------------------------------------------------------------ validation
    def validate(self, data: Any, source: str = "model") -> Directive:
        """Strictly check a parsed object; raise `DirectiveError` naming the first problem."""
        if not isinstance(data, dict):
            raise DirectiveError(f"expected a JSON object, got {type(data).__name__}")
        missing = [k for k in DIRECTIVE_KEYS if k not in data]
        if missing:
            raise DirectiveError(f"missing field(s): {', '.join(missing)}")
        extra = sorted(set(data) - set(DIRECTIVE_KEYS))
        if extra:
            raise DirectiveError(f"unknown field(s): {', '.join(extra)}")
        goal = _text(data["goal"], "goal", self.max_goal_chars)
        if not goal:
            raise DirectiveError("goal is empty")
        reasoning = _text(data["reasoning"], "reasoning", self.max_reasoning_chars)
        action = data["action"]
        if not isinstance(action, str) or action.strip() not in self.actions:
            raise DirectiveError(f"action {action!r} is not one of {', '.join(self.actions)}")
        action = action.strip()
        target = self._target(data["target"], action)
        duration = _integer(data["duration_frames"], "duration_frames")
        if not self.min_duration_frames <= duration <= self.max_duration_frames:
            raise DirectiveError(
                f"duration_frames {duration} is out of range "
                f"{self.min_duration_frames}..{self.max_duration_frames}"
            )
        confidence = _number(data["confidence"], "confidence")
        if not 0.0 <= confidence <= 1.0:
            raise DirectiveError(f"confidence {confidence} is out of range 0..1")
        return Directive(goal, reasoning, action, target, duration, confidence, source=source)

    def _target(self, value: Any, action: str) -> dict[str, int] | None:
        if value is None or value == {}:
            if action in self.tile_actions or action in self.option_actions:
                raise DirectiveError(f"action {action!r} needs a target")
            return None
        if not isinstance(value, dict):
            raise DirectiveError(f"target must be an object or null, not {value!r}")
        if set(value) == {"option"}:
            if not self.n_options:
                raise DirectiveError(f"{self.game} has no menu options to target")
            option = _integer(value["option"], "target.option")
            if not 0 <= option < self.n_options:
                raise DirectiveError(
                    f"target.option {option} is out of range 0..{self.n_options - 1}"
                )
            if action not in self.option_actions:
                raise DirectiveError(f"action {action!r} does not take a menu option")
            return {"option": option}
        if set(value) != {"x", "y"}:
            raise DirectiveError(f"target must be {{x, y}} or {{option}}, not keys {sorted(value)}")
        x, y = _integer(value["x"], "target.x"), _integer(value["y"], "target.y")
        if not 0 <= x < self.grid_w:
            raise DirectiveError(f"target.x {x} is out of range 0..{self.grid_w - 1}")
        if not 0 <= y < self.grid_h:
            raise DirectiveError(f"target.y {y} is out of range 0..{self.grid_h - 1}")
        if action in self.option_actions:
            raise DirectiveError(f"action {action!r} needs a menu option, not a tile")
        return {"x": x, "y": y}


def extract_json_object(text: str) -> Any:
    """The first JSON object in `text`, tolerating fences, prose around it and raw control
    characters inside strings; raise `DirectiveError` when there is none.

    >>> extract_json_object('Sure! {"a": "b\\x01c"} hope it helps')
    {'a': 'b c'}
    """
    if not isinstance(text, str) or not text.strip():
        raise DirectiveError("empty answer")
    cleaned = _CONTROL.sub(" ", text)
    decoder = json.JSONDecoder(strict=False)
    start = cleaned.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(cleaned, start)
            return value
        except json.JSONDecodeError:
            start = cleaned.find("{", start + 1)
        except RecursionError as exc:  # `[[[[...` nested past the interpreter's stack
            raise DirectiveError("the answer's JSON is nested too deeply") from exc
        except ValueError as exc:  # an integer longer than Python converts (4300 digits)
            raise DirectiveError(f"the answer's JSON has an unreadable number: {exc}") from exc
    snippet = text[:80].encode("unicode_escape").decode("ascii")
    raise DirectiveError(f"no JSON object in the answer (starts {snippet!r})")


def parse_directive(text: str, spec: DirectiveSpec, source: str = "model") -> Directive:
    """Lenient parse + strict validation of a model answer (see the module docstring)."""
    return spec.validate(extract_json_object(text), source=source)


def parse_choice(text: str, choices: Sequence[Directive], source: str = "model") -> Directive:
    """The option an answer names among `choices` (its 1-based number, bare as the choice
    grammar makes it, or as `{"pick": N}`), as a directive from `source`; `DirectiveError`
    for anything else.

    >>> options = [Directive("take the key", "", "collect", {"x": 1, "y": 2}, 1200, 1.0)]
    >>> parse_choice("1", options).action, parse_choice('{"pick": 1}', options).action
    ('collect', 'collect')
    >>> parse_choice(" 2", options)
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.DirectiveError: pick 2 is not an option (1..1)
    """
    if isinstance(text, str) and re.fullmatch(r"\s*\d{1,4}\s*", text):
        pick = int(text)
    else:
        data = extract_json_object(text)
        if not isinstance(data, dict) or "pick" not in data:
            raise DirectiveError("expected the number of an option")
        extra = sorted(set(data) - {"pick"})
        if extra:
            raise DirectiveError(f"unknown field(s): {', '.join(extra)}")
        pick = _integer(data["pick"], "pick")
    if not 1 <= pick <= len(choices):
        raise DirectiveError(f"pick {pick} is not an option (1..{len(choices)})")
    return replace(choices[pick - 1], source=source, reason=None)


def parse_answer(
    text: str, spec: DirectiveSpec, choices: Sequence[Directive] = (), source: str = "model"
) -> Directive:
    """`parse_choice` when the request offered `choices`, else `parse_directive`."""
    if choices:
        return parse_choice(text, choices, source)
    return parse_directive(text, spec, source)


def pick_of(directive: Directive, choices: Sequence[Directive]) -> int | None:
    """The 1-based number of the first option with `directive`'s action and target (what a
    model should have picked to give it, e.g. the oracle's), None when no option matches.

    >>> d = Directive("key", "", "collect", {"x": 1, "y": 2}, 1200, 1.0)
    >>> pick_of(d, [replace(d, target={"x": 5, "y": 5}), d]), pick_of(d, [])
    (2, None)
    """
    for i, option in enumerate(choices, 1):
        if option.action == directive.action and option.target == directive.target:
            return i
    return None


def _text(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise DirectiveError(f"{name} must be a string, not {type(value).__name__}")
    return " ".join(_CONTROL.sub(" ", value).split())[:limit]


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise DirectiveError(f"{name} must be an integer, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,9}\s*", value):
        return int(value)
    raise DirectiveError(f"{name} must be an integer, not {value!r}")


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool):
        raise DirectiveError(f"{name} must be a number, not a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise DirectiveError(f"{name} must be a number, not {value!r}")
