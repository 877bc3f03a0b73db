"""Reward terms: small named pieces computed from game variables, never from emulator internals.

A reward is a weighted sum of terms; the env reports each term in `info["reward_terms"]` so that
training curves can show them apart.

>>> term = Delta("score", weight=0.1)
>>> term.reset({"score": 10}); term({"score": 10}, {"score": 30})
2.0
>>> seen = Novelty(("room", "x"), weight=1.0); seen.reset({"room": 1, "x": 3})
>>> seen({}, {"room": 1, "x": 4}), seen({}, {"room": 1, "x": 3})
(1.0, 0.0)
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Vars = Mapping[str, Any]

#: stable-retro's scenario operations (`op` with an optional `reference`).
OPS: dict[str, Callable[[int, int], bool]] = {
    "always": lambda a, b: True,
    "equal": operator.eq,
    "not-equal": operator.ne,
    "less-than": operator.lt,
    "greater-than": operator.gt,
    "less-or-equal": operator.le,
    "greater-or-equal": operator.ge,
    "nonzero": lambda a, b: a != 0,
    "zero": lambda a, b: a == 0,
    "positive": lambda a, b: a > 0,
    "negative": lambda a, b: a < 0,
    "sign": lambda a, b: (a > 0) - (a < 0) == ((b > 0) - (b < 0)),
}


def check_op(op: str) -> Callable[[int, int], bool]:
    try:
        return OPS[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}; valid ops: {', '.join(OPS)}") from None


class RewardTerm:
    """Base class: `reset` at episode start, then one call per env step."""

    weight: float = 1.0
    #: True: the env may lack the term's variables (the term then gives 0), e.g. a game that
    #: sends kill counts only on some builds.
    optional: bool = False

    @property
    def variables(self) -> tuple[str, ...]:
        return ()

    def reset(self, current: Vars) -> None:  # noqa: B027 - most terms keep no state
        pass

    def __call__(self, previous: Vars, current: Vars) -> float:
        raise NotImplementedError


@dataclass
class Delta(RewardTerm):
    """`weight` x the change of a variable; `only="increase"` or `"decrease"` keeps one side.

    `below`: a change of that size or more counts 0 (a clock jumping after a stall), and with
    `only="increase"` so does one of 0 or less. `when`: variables that must all be true now,
    `unless`: variables that must all be false now, else the term is 0. `optional`: 0 while the
    variable is missing.

    >>> clock = Delta("t", 2.0, only="increase", below=1.0, when=("playing",))
    >>> clock({"t": 1.0}, {"t": 1.25, "playing": 1}), clock({"t": 1.0}, {"t": 3.0, "playing": 1})
    (0.5, 0.0)
    """

    variable: str
    weight: float = 1.0
    only: str | None = None
    below: float | None = None
    when: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    optional: bool = False

    def __post_init__(self) -> None:
        if self.only not in (None, "increase", "decrease"):
            raise ValueError(f"only must be 'increase' or 'decrease', not {self.only!r}")
        self.when, self.unless = tuple(self.when), tuple(self.unless)

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.variable, *self.when, *self.unless)

    def __call__(self, previous: Vars, current: Vars) -> float:
        if self.optional and (self.variable not in previous or self.variable not in current):
            return 0.0
        for name in self.when:
            if not current[name]:
                return 0.0
        for name in self.unless:
            if current[name]:
                return 0.0
        change = float(current[self.variable]) - float(previous[self.variable])
        if self.below is not None:
            low = 0.0 if self.only == "increase" else -self.below
            return self.weight * change if low < change < self.below else 0.0
        if self.only == "increase":
            change = max(change, 0.0)
        elif self.only == "decrease":
            change = min(change, 0.0)
        return self.weight * change


@dataclass
class FractionDelta(RewardTerm):
    """`weight` x the change of `variable / of` (e.g. HP over max HP: losing a whole bar gives
    `-weight`); 0 while `of` is 0 before or after, or a `was` variable was false before the step.

    >>> FractionDelta("hp", "max_hp", 5.0)({"hp": 100, "max_hp": 100}, {"hp": 50, "max_hp": 100})
    -2.5
    """

    variable: str
    of: str
    weight: float = 1.0
    was: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.was = tuple(self.was)

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.variable, self.of, *self.was)

    def __call__(self, previous: Vars, current: Vars) -> float:
        before, now = float(previous[self.of]), float(current[self.of])
        if not (before > 0 and now > 0) or not all(previous[v] for v in self.was):
            return 0.0
        change = float(current[self.variable]) / now - float(previous[self.variable]) / before
        return self.weight * change if change == change else 0.0


@dataclass
class Penalty(RewardTerm):
    """Minus `weight` per unit a variable drops (HP lost, lives lost)."""

    variable: str
    weight: float = 1.0

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.variable,)

    def __call__(self, previous: Vars, current: Vars) -> float:
        return -self.weight * max(
            0.0, float(previous[self.variable]) - float(current[self.variable])
        )


@dataclass
class Event(RewardTerm):
    """`weight` once when `variable op reference` becomes true (edge-triggered, once per episode)."""

    variable: str
    op: str = "equal"
    reference: int = 1
    weight: float = 1.0
    once: bool = True
    _fired: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        self._test = check_op(self.op)

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.variable,)

    def reset(self, current: Vars) -> None:
        self._fired = self._test(int(current[self.variable]), self.reference)

    def __call__(self, previous: Vars, current: Vars) -> float:
        now = self._test(int(current[self.variable]), self.reference)
        before = self._test(int(previous[self.variable]), self.reference)
        if now and not before and not (self.once and self._fired):
            self._fired = True
            return self.weight
        return 0.0


@dataclass
class Survival(RewardTerm):
    """`weight` per step survived; nothing once `dead_variable` (e.g. `lost`) is set.

    In a game that pauses (menus), steps are not play time: pay a `Delta` of the game's clock
    instead (BonkArena's presets use `time_frames`), or the agent is paid for pausing."""

    weight: float = 0.01
    dead_variable: str | None = None

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.dead_variable,) if self.dead_variable else ()

    def __call__(self, previous: Vars, current: Vars) -> float:
        if self.dead_variable and current[self.dead_variable]:
            return 0.0
        return self.weight


@dataclass
class TimePenalty(RewardTerm):
    """Minus `weight` every step: pushes agents to finish sooner."""

    weight: float = 0.001

    def __call__(self, previous: Vars, current: Vars) -> float:
        return -self.weight


@dataclass
class Novelty(RewardTerm):
    """`weight` for each new cell visited this episode, a cell being a tuple of variables
    (e.g. room, x, y) each divided by `cell_size` (PokemonRedExperiments-style exploration)."""

    keys: tuple[str, ...] = ("room", "player_x", "player_y")
    weight: float = 0.01
    cell_size: int = 1
    _seen: set[tuple[int, ...]] = field(default_factory=set, repr=False)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(self.keys)

    def _cell(self, current: Vars) -> tuple[int, ...]:
        return tuple(int(current[k]) // self.cell_size for k in self.keys)

    def reset(self, current: Vars) -> None:
        self._seen = {self._cell(current)}

    def __call__(self, previous: Vars, current: Vars) -> float:
        cell = self._cell(current)
        if cell in self._seen:
            return 0.0
        self._seen.add(cell)
        return self.weight


@dataclass
class ScenarioVariable(RewardTerm):
    """One variable of a stable-retro `scenario.json` reward: `reward` x a positive change,
    `penalty` x a negative change (both signed as stable-retro does), optionally after `op`."""

    variable: str
    reward: float = 0.0
    penalty: float = 0.0
    op: str | None = None
    reference: int = 0
    measurement: str = "delta"

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.variable,)

    def __call__(self, previous: Vars, current: Vars) -> float:
        value = float(current[self.variable])
        if self.measurement == "delta":
            value -= float(previous[self.variable])
        if self.op is not None:
            value = 1.0 if check_op(self.op)(int(value), self.reference) else 0.0
        return value * self.reward if value > 0 else value * self.penalty


@dataclass
class Learned(RewardTerm):
    """`weight` x the change of a learned progress score of the screen (`model`: a reward model
    of `metabonk train reward`). The env's screen and the model are bound by
    `metabonk_gym.learned.bind.bind_learned_terms(env)`; the first step of an episode gives 0.

    >>> Learned("reward_model").bind(lambda: 0, lambda frame: 2.0)({}, {})
    0.0
    """

    model: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        self._screen: Callable[[], Any] | None = None
        self._score: Callable[[Any], float] | None = None
        self._last: float | None = None

    def bind(self, screen: Callable[[], Any], score: Callable[[Any], float]) -> Learned:
        """Where the current screen comes from, and the model's score of a screen."""
        self._screen, self._score = screen, score
        return self

    def reset(self, current: Vars) -> None:
        self._last = None

    def __call__(self, previous: Vars, current: Vars) -> float:
        if self._screen is None or self._score is None:
            raise RuntimeError(
                f"reward term 'learned' ({self.model}) has no screen: call "
                "metabonk_gym.learned.bind.bind_learned_terms(env) after making the env"
            )
        now = float(self._score(self._screen()))
        last, self._last = self._last, now
        return 0.0 if last is None else self.weight * (now - last)


TERM_TYPES: dict[str, type[RewardTerm]] = {
    "delta": Delta,
    "fraction_delta": FractionDelta,
    "penalty": Penalty,
    "event": Event,
    "survival": Survival,
    "time_penalty": TimePenalty,
    "novelty": Novelty,
    "scenario": ScenarioVariable,
    "learned": Learned,
}
