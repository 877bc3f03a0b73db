"""A pass mark declared once, as data: `Target` is the check (`met`), and `str(target)` the
words a figure record, a printed line and the docs show, so the three never drift apart.

It sits in the lowest layer so that whoever judges a result (a bench, a learning proof in
`metabonk_gym.agents`) reads the same object the figure record is written from
(`metabonk_gym.bench.figures` re-exports it). A result judged by several marks at once (a median
and a worst seed, a time limit) joins them with `describe` and `judge`.

>>> median, worst = Target(">=", 0.8, prefix="median "), Target(">=", 0.6, prefix="worst ")
>>> describe([median, worst])
'median >= 0.8, worst >= 0.6'
>>> judge([(median, 0.84), (worst, 0.5)])
{'target': 'median >= 0.8, worst >= 0.6', 'met': False}
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}


@dataclass(frozen=True)
class Target:
    """A bench's pass mark, declared once: `met` is the check, and `str(target)` the words the
    figure record, the printed lines and the docs show.

    Args:
        op: how a value passes: `">="`, `">"`, `"<="` or `"<"`.
        value: the mark.
        unit: shown after the number (`"x"` and `"%"` without a space).
        prefix: words before the comparison (`"p95 "`).
        suffix: words after it (`" on each game"`).
        scale: the number shown is `value * scale` (100: a fraction shown as a percentage).
        fmt: the number's format spec.

    >>> speed = Target(">=", 0.85, "x")
    >>> str(speed), speed.met(0.98), speed.record(0.8)
    ('>= 0.85x', True, {'target': '>= 0.85x', 'met': False})
    >>> str(Target("<", 1.0, "ms", prefix="p95 ")), str(Target(">=", 2000))
    ('p95 < 1 ms', '>= 2,000')
    >>> str(Target(">=", 0.95, "%", scale=100)), str(Target(">=", 1.8, "x", fmt=".1f"))
    ('>= 95%', '>= 1.8x')
    """

    op: str
    value: float
    unit: str = ""
    prefix: str = ""
    suffix: str = ""
    scale: float = 1.0
    fmt: str = ",g"

    def __post_init__(self) -> None:
        if self.op not in _COMPARE:
            raise ValueError(f"a target's op is one of {', '.join(_COMPARE)}, not {self.op!r}")

    def __str__(self) -> str:
        number = format(self.value * self.scale, self.fmt)
        unit = self.unit if self.unit in ("", "x", "%") else f" {self.unit}"
        return f"{self.prefix}{self.op} {number}{unit}{self.suffix}"

    def met(self, value: float) -> bool:
        """Whether `value` reaches the mark."""
        return bool(_COMPARE[self.op](value, self.value))

    def record(self, value: float) -> dict[str, Any]:
        """The `target` and `met` keys of a figure record for a measured `value`."""
        return {"target": str(self), "met": self.met(value)}


def describe(targets: Iterable[Target]) -> str:
    """The words of several targets that must all be met, joined by commas."""
    return ", ".join(str(t) for t in targets)


def judge(pairs: Iterable[tuple[Target, float]]) -> dict[str, Any]:
    """The `target` and `met` keys of a record judged by several targets at once: each target
    with the value it checks; `met` when every one is."""
    pairs = list(pairs)
    return {"target": describe(t for t, _ in pairs), "met": all(t.met(v) for t, v in pairs)}
