"""Vectorised RAM-search filters: every value type and byte order over a whole snapshot at once.

A search keeps one boolean mask per value type (`VIEWS`: stable-retro's type strings, u8 to s32
and BCD, little and big endian) over the aligned slots of the snapshot; a filter compares the
new snapshot with the last one (or with a value) for all of them in a few numpy operations, so a
step over EWRAM + IWRAM (288 KiB) takes milliseconds (`metabonk bench integrate` measures it
against a per-address Python loop). Variables are taken aligned to their size, as a C compiler
lays them out.

>>> old = np.array([5, 0, 7, 0], np.uint8); new = np.array([4, 0, 7, 0], np.uint8)
>>> masks = full_masks(4, ["|u1", "<u2"])
>>> masks = apply_filter(masks, old, new, parse_filter("decreased"))
>>> [int(i) for i in np.flatnonzero(masks["|u1"])], [int(i) for i in np.flatnonzero(masks["<u2"])]
([0], [0])
>>> decode(new, "<u2").tolist(), decode(np.array([0x12, 0x34], np.uint8), "<n2").tolist()
([4, 7], [3412])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from metabonk_gym.errors import IntegrateError
from metabonk_gym.gba.backends.base import decode_value

#: Every value type a search tracks (stable-retro's type strings): size from the last digit.
VIEWS: tuple[str, ...] = (
    "|u1",
    "|i1",
    "<u2",
    ">u2",
    "<i2",
    ">i2",
    "<u4",
    ">u4",
    "<i4",
    ">i4",
    "|n1",
    "<n2",
    ">n2",
    "<n4",
    ">n4",
)

#: Friendly names the CLI takes -> type strings (`u16` is little endian, as on the GBA).
ALIASES: dict[str, str] = {
    "u8": "|u1",
    "s8": "|i1",
    "i8": "|i1",
    "u16": "<u2",
    "s16": "<i2",
    "i16": "<i2",
    "u32": "<u4",
    "s32": "<i4",
    "i32": "<i4",
    "u16be": ">u2",
    "s16be": ">i2",
    "u32be": ">u4",
    "s32be": ">i4",
    "bcd8": "|n1",
    "bcd16": "<n2",
    "bcd32": "<n4",
    "bcd16be": ">n2",
    "bcd32be": ">n4",
    "u1": "|u1",
    "i1": "|i1",
    "n1": "|n1",
}

#: Filters and how many numbers each takes.
FILTERS: dict[str, int] = {
    "changed": 0,
    "unchanged": 0,
    "increased": 0,
    "decreased": 0,
    "eq": 1,
    "ne": 1,
    "lt": 1,
    "gt": 1,
    "range": 2,
    "delta": 1,
    "kept": 0,
    "shown": 0,
}
_SYMBOLS = {"==": "eq", "!=": "ne", "<": "lt", ">": "gt"}
#: `kept` writes into each candidate and keeps those whose write lasts (the game's own variable,
#: not a copy it rewrites every frame); `shown` keeps those whose write changes the picture (a
#: value the game draws, as a HUD number). The session runs them in the emulator.
POKE_FILTERS = frozenset({"kept", "shown"})
#: Filters that compare two snapshots (the others look at the new one only).
CHANGE_FILTERS = frozenset({"changed", "unchanged", "increased", "decreased", "delta"})


def view_type(name: str) -> str:
    """The type string of a type name (`u16`, `s8be`, `bcd16`, `<u2`...); one-line error else.

    >>> view_type("u16"), view_type(">i4"), view_type("BCD8")
    ('<u2', '>i4', '|n1')
    """
    key = name.strip().lower()
    if name.strip() in VIEWS:
        return name.strip()
    if key in ALIASES:
        return ALIASES[key]
    raise IntegrateError(
        f"unknown value type {name!r}: give one of u8 s8 u16 s16 u32 s32 bcd8 bcd16 bcd32 "
        "(add 'be' for big endian: u16be), or a stable-retro type such as <u2 or >n4"
    )


def view_size(type_: str) -> int:
    return int(type_[2])


@dataclass(frozen=True)
class Filter:
    """One search filter: `op` (a `FILTERS` key) and its numbers."""

    op: str
    args: tuple[int, ...] = ()

    def __str__(self) -> str:
        return " ".join([self.op, *map(str, self.args)])


def parse_filter(op: str, args: Sequence[str | int] = ()) -> Filter:
    """A `Filter` from its words (`decreased`, `eq 5`, `== 5`, `range 1 9`, `delta -1`).

    >>> parse_filter("==", ["0x10"]), str(parse_filter("range", ["1", "9"]))
    (Filter(op='eq', args=(16,)), 'range 1 9')
    """
    name = _SYMBOLS.get(op, op.lower())
    if name not in FILTERS:
        raise IntegrateError(
            f"unknown filter {op!r}: give one of {', '.join(FILTERS)} (or ==, !=, <, >)"
        )
    if len(args) != FILTERS[name]:
        raise IntegrateError(f"filter {name} takes {FILTERS[name]} number(s), got {len(args)}")
    try:
        numbers = tuple(a if isinstance(a, int) else int(str(a), 0) for a in args)
    except ValueError:
        raise IntegrateError(
            f"filter {name}: {' '.join(map(str, args))!r} is not a number"
        ) from None
    return Filter(name, numbers)


def slots(nbytes: int, type_: str) -> int:
    """How many aligned slots of `type_` an `nbytes` snapshot has."""
    return nbytes // view_size(type_)


def full_masks(nbytes: int, types: Sequence[str]) -> dict[str, np.ndarray]:
    """Every aligned slot of each type a candidate (the start of a search); BCD slots whose bytes
    are not BCD digits are dropped at the first snapshot by `valid`."""
    return {t: np.ones(slots(nbytes, t), bool) for t in types}


#: Byte -> its two BCD digits as a number (0-99), or -1 when a nibble is not a decimal digit.
_BCD = np.array(
    [(b >> 4) * 10 + (b & 0xF) if (b >> 4) < 10 and (b & 0xF) < 10 else -1 for b in range(256)],
    np.int16,
)


def _bcd(
    snapshot: np.ndarray, type_: str, digits: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """BCD values of every aligned slot and which slots hold only decimal digits (a table lookup
    per byte, `digits` when already done; a slot's digit checks are read as one wider word)."""
    size = view_size(type_)
    if digits is None:
        digits = _BCD[snapshot]
    digits = digits[: len(digits) // size * size]
    if size == 1:
        return digits, digits >= 0
    ok = (digits >= 0).view(np.uint8).view(f"<u{size}") == int.from_bytes(b"\x01" * size, "little")
    pairs = digits.astype(np.int32).reshape(-1, size)
    if type_[0] == "<":
        pairs = pairs[:, ::-1]
    value = pairs[:, 0] * 100 + pairs[:, 1]
    if size == 4:
        value = value * 10000 + pairs[:, 2] * 100 + pairs[:, 3]
    return value, ok


def decode(snapshot: np.ndarray, type_: str) -> np.ndarray:
    """The values of every aligned slot of `type_` in `snapshot` (uint8): a view for the integer
    types (no copy), the numbers of the digits for BCD."""
    size = view_size(type_)
    if type_[1] != "n":
        return snapshot[: len(snapshot) // size * size].view(np.dtype(type_.replace("|", "")))
    return _bcd(snapshot, type_)[0]


def valid(snapshot: np.ndarray, type_: str) -> np.ndarray | None:
    """For BCD, which slots hold only decimal digits (None for the integer types: all valid)."""
    if type_[1] != "n":
        return None
    return _bcd(snapshot, type_)[1]


def _condition(flt: Filter, old: np.ndarray | None, new: np.ndarray) -> np.ndarray:
    op, args = flt.op, flt.args
    if op in CHANGE_FILTERS:
        assert old is not None
        if op == "changed":
            return old != new
        if op == "unchanged":
            return old == new
        if op == "increased":
            return new > old
        if op == "decreased":
            return new < old
        return (new.astype(np.int64) - old.astype(np.int64)) == args[0]
    if op == "range":
        low, high = min(args), max(args)
        return (new >= low) & (new <= high)
    value = args[0]
    info = np.iinfo(new.dtype)
    if op in ("eq", "ne") and not info.min <= value <= info.max:  # no slot of this type can hold it
        return np.full(new.shape, op == "ne")
    if op == "eq":
        return new == value
    if op == "ne":
        return new != value
    if op == "lt":
        return new < value if value <= info.max else np.ones(new.shape, bool)
    return new > value if value >= info.min else np.ones(new.shape, bool)


def apply_filter(
    masks: Mapping[str, np.ndarray], old: np.ndarray | None, new: np.ndarray, flt: Filter
) -> dict[str, np.ndarray]:
    """New masks: the candidates of `masks` for which `flt` holds between snapshots `old` and
    `new` (uint8 arrays of the same regions); `old` may be None for value filters."""
    if flt.op in CHANGE_FILTERS and old is None:
        raise IntegrateError(f"filter {flt.op} compares two snapshots, but there is only one")
    if flt.op in POKE_FILTERS:
        raise IntegrateError(
            f"filter {flt.op} writes into the emulator: run it through a RamSearch"
        )
    out: dict[str, np.ndarray] = {}
    digits: dict[int, np.ndarray] = {}  # one table lookup per snapshot for every BCD type
    for type_, mask in masks.items():
        if not mask.any():
            out[type_] = mask.copy()
            continue
        if type_[1] == "n":
            if not digits:
                digits[0] = _BCD[new]
                if old is not None:
                    digits[1] = _BCD[old]
            new_v, ok = _bcd(new, type_, digits[0])
            keep = mask & ok
            old_v = None
            if old is not None:
                old_v, old_ok = _bcd(old, type_, digits[1])
                keep &= old_ok
        else:
            new_v, old_v = decode(new, type_), decode(old, type_) if old is not None else None
            keep = mask
        out[type_] = keep & _condition(flt, old_v, new_v)
    return out


def count(masks: Mapping[str, np.ndarray]) -> int:
    """Candidates left over every type."""
    return int(sum(int(m.sum()) for m in masks.values()))


def naive_filter(
    masks: Mapping[str, np.ndarray], old: np.ndarray, new: np.ndarray, flt: Filter
) -> dict[str, np.ndarray]:
    """The same filter as `apply_filter`, one address at a time in plain Python: the baseline
    `metabonk bench integrate` measures against (and a cross-check of the vectorised one)."""

    old_b, new_b = old.tobytes(), new.tobytes()
    out: dict[str, np.ndarray] = {}
    for type_, mask in masks.items():
        size = view_size(type_)
        keep = np.zeros_like(mask)
        for slot in np.flatnonzero(mask).tolist():
            at = slot * size
            o_raw, n_raw = old_b[at : at + size], new_b[at : at + size]
            if type_[1] == "n" and not all((b >> 4) < 10 and (b & 0xF) < 10 for b in o_raw + n_raw):
                continue
            o, n = decode_value(o_raw, type_), decode_value(n_raw, type_)
            op, args = flt.op, flt.args
            keep[slot] = {
                "changed": o != n,
                "unchanged": o == n,
                "increased": n > o,
                "decreased": n < o,
                "delta": n - o == (args[0] if args else 0),
                "eq": n == (args[0] if args else 0),
                "ne": n != (args[0] if args else 0),
                "lt": n < (args[0] if args else 0),
                "gt": n > (args[0] if args else 0),
                "range": len(args) == 2 and min(args) <= n <= max(args),
            }[op]
        out[type_] = keep
    return out
