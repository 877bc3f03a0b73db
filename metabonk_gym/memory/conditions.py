"""Conditions over game variables, as a game folder writes them in its `quests.yaml`.

What: `Condition.parse(data)` reads `{variable, op, reference}` (stable-retro's ops, as reward
terms use them), `{variable, bit}` (a flag of a bit mask, `bit` may be a variable's name),
`{seen: tile_class}` (that tile class is on the current area's map), `{all: [...]}`,
`{any: [...]}`, `{not: ...}` or `true`; `holds(vars, seen)` evaluates it. Why: quests and todos
are data in the game folder, and a condition names the variables it reads, so the quest log is
re-evaluated only when one of them changed.

>>> c = Condition.parse({"all": [{"variable": "keys_taken", "bit": 1}, {"seen": "door_locked"}]})
>>> c.holds({"keys_taken": 2}, {"door_locked"}), c.holds({"keys_taken": 1}, {"door_locked"})
(True, False)
>>> sorted(c.variables)
['keys_taken']
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from metabonk_gym.errors import ConditionError as ConditionError  # re-exported
from metabonk_gym.rewards.terms import OPS
from metabonk_gym.utils import did_you_mean


def check_keys(raw: Mapping[str, Any], allowed: Collection[str], at: str) -> None:
    """Refuse keys of a quests.yaml entry that nothing reads (a typo would silently do nothing),
    naming the nearest valid key.

    >>> check_keys({"id": "a", "titel": "x"}, ("id", "title"), "quests[0]")
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.ConditionError: quests[0]: unknown key 'titel' (did you mean \
'title'?); valid: id, title
    """
    for key in raw:
        if key not in allowed:
            hint = did_you_mean(key, allowed)
            raise ConditionError(f"{at}: unknown key {key!r}{hint}; valid: {', '.join(allowed)}")


@dataclass(frozen=True)
class Condition:
    """One parsed condition (see the module docstring); `kind` is var, bit, seen, all, any, not,
    true or none (never holds)."""

    kind: str
    variable: str = ""
    op: str = "nonzero"
    reference: int | str = 0
    parts: tuple[Condition, ...] = ()
    variables: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def parse(cls, data: Any, where: str = "condition") -> Condition:
        """A condition from its YAML form; `ConditionError` names `where` on bad input."""
        if data is True or data == "always" or data is None:
            return cls("true")
        if not isinstance(data, Mapping):
            raise ConditionError(f"{where}: a condition is a mapping or true, not {data!r}")
        for combo in ("all", "any"):
            if combo in data:
                items = data[combo]
                if not isinstance(items, list) or not items:
                    raise ConditionError(f"{where}: {combo!r} takes a non-empty list")
                parts = tuple(cls.parse(d, f"{where}.{combo}[{i}]") for i, d in enumerate(items))
                return cls(combo, parts=parts, variables=_union(parts))
        if "not" in data:
            inner = cls.parse(data["not"], f"{where}.not")
            return cls("not", parts=(inner,), variables=inner.variables)
        if "seen" in data:
            return cls("seen", reference=str(data["seen"]))
        name = data.get("variable")
        if not isinstance(name, str):
            raise ConditionError(
                f"{where}: needs 'variable' (with 'op' or 'bit'), 'seen', 'all', 'any' or 'not', "
                f"got {dict(data)!r}"
            )
        if "bit" in data:
            bit = data["bit"]
            if not isinstance(bit, (int, str)):
                raise ConditionError(f"{where}: 'bit' is a number or a variable's name")
            names = {name} | ({bit} if isinstance(bit, str) else set())
            return cls("bit", variable=name, reference=bit, variables=frozenset(names))
        op = str(data.get("op", "nonzero"))
        if op not in OPS:
            raise ConditionError(f"{where}: unknown op {op!r}; valid ops: {', '.join(OPS)}")
        ref = data.get("reference", 0)
        if not isinstance(ref, (int, str)):
            raise ConditionError(f"{where}: 'reference' is a number or a variable's name")
        names = {name} | ({ref} if isinstance(ref, str) else set())
        return cls("var", variable=name, op=op, reference=ref, variables=frozenset(names))

    def holds(self, values: Mapping[str, int], seen: Collection[str] = ()) -> bool:
        """Whether the condition holds for these variables and tile classes in view."""
        kind = self.kind
        if kind == "true":
            return True
        if kind == "none":  # no condition: never holds by itself
            return False
        if kind == "all":
            return all(p.holds(values, seen) for p in self.parts)
        if kind == "any":
            return any(p.holds(values, seen) for p in self.parts)
        if kind == "not":
            return not self.parts[0].holds(values, seen)
        if kind == "seen":
            return self.reference in seen
        value = int(values.get(self.variable, 0))
        ref = self.reference
        ref_value = int(values.get(ref, 0)) if isinstance(ref, str) else int(ref)
        if kind == "bit":
            return bool((value >> ref_value) & 1)
        return bool(OPS[self.op](value, ref_value))

    @property
    def uses_tiles(self) -> bool:
        """Whether the condition reads the tile classes in view (`seen`)."""
        return self.kind == "seen" or any(p.uses_tiles for p in self.parts)


def _union(parts: tuple[Condition, ...]) -> frozenset[str]:
    out: set[str] = set()
    for p in parts:
        out |= p.variables
    return frozenset(out)
