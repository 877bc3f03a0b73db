"""Live values of a few addresses while the game plays: what `metabonk ram watch` shows.

A watch is a list of `Watched` (a data.json name or `ADDR:TYPE`); `Watcher.sample(machine)` reads
them all and keeps, per value, the last value, how often it changed and its range, which the CLI
draws as a rich table (live while a window plays, or after each step of an input script).

>>> w = Watcher([Watched("hp", 0x02000000, "|u1")])
>>> w.update([5]); w.update([4]); w.update([4])
>>> w.rows()[0]["value"], w.rows()[0]["changes"], w.rows()[0]["min"]
(4, 1, 4)
>>> parse_watch("0x02000010:u16", {}).type
'<u2'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from metabonk_gym.errors import IntegrateError
from metabonk_gym.integrate.machine import Machine, check_ram_address
from metabonk_gym.integrate.scan import view_type


@dataclass(frozen=True)
class Watched:
    """One watched value: its name, bus address and type."""

    name: str
    address: int
    type: str


def folder_variables(folder: str | Path) -> dict[str, Watched]:
    """The variables of `folder/data.json` as `Watched` (empty when there is none)."""
    path = Path(folder) / "data.json"
    if not path.is_file():
        return {}
    info = json.loads(path.read_text()).get("info") or {}
    return {
        name: Watched(name, int(spec["address"]), str(spec["type"])) for name, spec in info.items()
    }


def parse_watch(text: str, variables: dict[str, Watched]) -> Watched:
    """A data.json variable name, or `ADDR[:TYPE]` (type default u8); checked."""
    if text in variables:
        return variables[text]
    where, _, type_text = text.partition(":")
    try:
        address = int(where, 0)
    except ValueError:
        raise IntegrateError(
            f"{text!r} is neither a variable of data.json ({', '.join(variables) or 'none yet'}) "
            "nor an address such as 0x02000010:u16"
        ) from None
    type_ = view_type(type_text or "u8")
    check_ram_address(address, type_)
    return Watched(text, address, type_)


@dataclass
class _Track:
    value: int | None = None
    changes: int = 0
    low: int | None = None
    high: int | None = None


@dataclass
class Watcher:
    """Values of `watched`, updated by `sample`; `rows()` and `table()` show them.

    Args:
        watched: what to watch.
    """

    watched: list[Watched]
    tracks: list[_Track] = field(default_factory=list)
    samples: int = 0

    def __post_init__(self) -> None:
        self.tracks = [_Track() for _ in self.watched]

    def update(self, values: list[int]) -> None:
        for track, value in zip(self.tracks, values, strict=True):
            if track.value is not None and value != track.value:
                track.changes += 1
            track.value = value
            track.low = value if track.low is None else min(track.low, value)
            track.high = value if track.high is None else max(track.high, value)
        self.samples += 1

    def sample(self, machine: Machine) -> list[int]:
        values = [machine.read(w.address, w.type) for w in self.watched]
        self.update(values)
        return values

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "name": w.name,
                "address": f"0x{w.address:08X}",
                "type": w.type,
                "value": t.value,
                "changes": t.changes,
                "min": t.low,
                "max": t.high,
            }
            for w, t in zip(self.watched, self.tracks, strict=True)
        ]

    def table(self, title: str = "ram watch") -> Table:
        table = Table(title=title)
        for column in ("name", "address", "type", "value", "changes", "min", "max"):
            table.add_column(
                column, justify="right" if column in ("value", "changes", "min", "max") else "left"
            )
        for row in self.rows():
            table.add_row(
                *(
                    str(row[c])
                    for c in ("name", "address", "type", "value", "changes", "min", "max")
                )
            )
        return table
