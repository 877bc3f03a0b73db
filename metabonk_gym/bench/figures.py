"""Figures as data: one JSON file per benchmark group under `docs/figures/`, the one source of
every figure the docs quote (`docs/benchmarks.md` is generated from them by
:mod:`metabonk_gym.bench.report`).

A group file states what its figures share (`command`, `seeds`, `machine`, `date`) once, and a
list of figures, each of which may override any of those. Loading fills every figure from its
group, so each one carries value, target, met, command, seeds, machine and date. A figure with
no target is a reference (`met` is null); one that was not measured has a null `value`.
Unknown keys are refused, so a typo fails the docs test instead of vanishing.

>>> group = parse_group(
...     {
...         "group": "demo",
...         "title": "Demo",
...         "command": "metabonk bench env",
...         "seeds": [0, 1],
...         "machine": "2-core CPU",
...         "date": "2026-11-28",
...         "figures": [{"id": "speed", "name": "env vs raw core", "value": 0.98,
...                      "unit": "x", "target": ">= 0.85x", "met": True,
...                      "headline": "env speed"}],
...     },
...     "demo",
... )
>>> figure = group.figures[0]
>>> figure.command, figure.seeds, figure.met, figure.short_value(), figure.headline
('metabonk bench env', [0, 1], True, '0.98x', 'env speed')
>>> parse_group({"group": "demo", "title": "T", "figures": [], "colour": 1}, "demo")
Traceback (most recent call last):
...
metabonk_gym.errors.FiguresError: demo: unknown key 'colour' (known: about, command, data, date, docs, figures, group, machine, order, seeds, title)
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import sys
from dataclasses import dataclass, field
from datetime import date as _date
from pathlib import Path
from typing import Any

from metabonk_gym.errors import FiguresError as FiguresError  # re-exported
from metabonk_gym.target import Target as Target  # its home is layer 0: agents judge by it too
from metabonk_gym.utils import atomic_write_text

#: Where the figure files live, relative to the repository root.
FIGURES_DIR = Path("docs") / "figures"
#: A figure file larger than this is refused before it is parsed.
MAX_FILE_BYTES = 1 << 20
#: Keys a figure may carry (`command`, `seeds`, `machine`, `date`, `docs` default to the group's).
FIGURE_KEYS = frozenset(
    {"id", "name", "value", "unit", "text", "target", "met", "headline", "short", "note"}
    | {"command", "seeds", "machine", "date", "docs"}
)
#: Keys a group file may carry.
GROUP_KEYS = frozenset(
    {"group", "title", "order", "about", "data", "figures"}
    | {"command", "seeds", "machine", "date", "docs"}
)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class Figure:
    """One measured figure with everything needed to judge and repeat it.

    Args:
        id: a slug, unique within its group: a bench's `--figures` replaces the figure with
            the same id.
        name: what is measured, in words.
        value: the headline number (a ratio, a rate, a time), or None when not measured.
        unit: what `value` counts (`"x"`, `"ms"`, `"steps/s"`, `""`).
        text: the value as the docs show it, with its detail (per seed, baselines); defaults to
            `value` and `unit`.
        target: the pass mark in words (`">= 0.85x"`), or None for a reference figure.
        met: whether `value` reaches `target` (None: no target, or not measured).
        command: the command that measured it.
        seeds: the seeds (a list of ints, `{"first": N, "count": M}`) or None.
        machine: where it ran (cores, GPU, load).
        date: when, as YYYY-MM-DD.
        docs: a guide with the details, or None.
        headline: the figure's short name in the headline tables (the README's and the page's),
            or None when it is not a headline figure.
        short: the value as the headline tables show it (defaults to `value` and `unit`).
        note: a short remark (what the figure does not show).
    """

    id: str
    name: str
    value: float | None
    unit: str
    text: str
    target: str | None
    met: bool | None
    command: str
    seeds: Any
    machine: str
    date: str
    docs: str | None = None
    headline: str | None = None
    short: str = ""
    note: str | None = None

    def shown_value(self) -> str:
        """The value as the docs print it: `text` when given, else the number and its unit."""
        return self.text or self.number()

    def short_value(self) -> str:
        """The value as the headline tables print it: `short` when given, else the number."""
        return self.short or self.number()

    def number(self) -> str:
        """`value` with its unit (`0.98x`, `8.2 ms`), or `not measured`."""
        if self.value is None:
            return "not measured"
        number = f"{self.value:,.3g}" if isinstance(self.value, float) else f"{self.value:,}"
        return (
            f"{number}{self.unit}" if self.unit in ("x", "%") else f"{number} {self.unit}".strip()
        )


@dataclass(frozen=True)
class Group:
    """The figures of one benchmark (one JSON file).

    Args:
        group: the slug, equal to the file's name without `.json`.
        title: the heading in `docs/benchmarks.md`.
        figures: its figures, in file order.
        order: where it goes in `docs/benchmarks.md` (smaller first).
        about: one paragraph of setup: what is compared with what.
        data: a file with the raw output the figures come from, or None.
    """

    group: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    order: int = 100
    about: str = ""
    data: str | None = None


def _check_keys(raw: dict[str, Any], known: frozenset[str], where: str) -> None:
    for key in raw:
        if key not in known:
            listed = ", ".join(sorted(known))
            raise FiguresError(f"{where}: unknown key {key!r} (known: {listed})")


def _seeds(value: Any, where: str) -> Any:
    ok = value is None or (isinstance(value, list) and all(type(s) is int for s in value))
    if isinstance(value, dict):
        ok = set(value) == {"first", "count"} and all(type(v) is int for v in value.values())
    if not ok:
        raise FiguresError(f"{where}: seeds must be a list of ints, {{first, count}} or null")
    return value


def _text(raw: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise FiguresError(f"{where}: {key!r} must be a non-empty string")
    return value


def _optional_text(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise FiguresError(f"{where}: {key!r} must be a non-empty string or null")
    return value


def parse_figure(raw: Any, defaults: dict[str, Any], where: str) -> Figure:
    """One figure from its JSON object, `command`/`seeds`/`machine`/`date`/`docs` from `defaults`."""
    if not isinstance(raw, dict):
        raise FiguresError(f"{where}: a figure must be an object")
    _check_keys(raw, FIGURE_KEYS, where)
    merged = {**defaults, **raw}
    slug = _text(merged, "id", where)
    where = f"{where} ({slug})"
    if not _SLUG.match(slug):
        raise FiguresError(f"{where}: id must be lower-case letters, digits and dashes")
    value = merged.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise FiguresError(f"{where}: value must be a number or null")
    target, met = merged.get("target"), merged.get("met")
    if met is not None and not isinstance(met, bool):
        raise FiguresError(f"{where}: met must be true, false or null")
    if target is not None and not isinstance(target, str):
        raise FiguresError(f"{where}: target must be a string or null")
    if target is None and met is not None:
        raise FiguresError(f"{where}: met without a target")
    if not _DATE.match(_text(merged, "date", where)):
        raise FiguresError(f"{where}: date must be YYYY-MM-DD")
    return Figure(
        id=slug,
        name=_text(merged, "name", where),
        value=value,
        unit=_text(merged, "unit", where, required=False),
        text=_text(merged, "text", where, required=False),
        target=target,
        met=met,
        command=_text(merged, "command", where),
        seeds=_seeds(merged.get("seeds"), where),
        machine=_text(merged, "machine", where),
        date=merged["date"],
        docs=_optional_text(merged, "docs", where),
        headline=_optional_text(merged, "headline", where),
        short=_text(merged, "short", where, required=False),
        note=_optional_text(merged, "note", where),
    )


def parse_group(raw: Any, name: str) -> Group:
    """A group from its JSON object; `name` is the file's stem, which `group` must equal."""
    if not isinstance(raw, dict):
        raise FiguresError(f"{name}: a figure file must hold one object")
    _check_keys(raw, GROUP_KEYS, name)
    if raw.get("group") != name:
        raise FiguresError(f"{name}: 'group' must be the file's name without .json ({name!r})")
    figures = raw.get("figures")
    if not isinstance(figures, list):
        raise FiguresError(f"{name}: 'figures' must be a list")
    defaults = {k: raw[k] for k in ("command", "seeds", "machine", "date", "docs") if k in raw}
    parsed = [parse_figure(f, defaults, f"{name}: figure {i}") for i, f in enumerate(figures)]
    ids = [f.id for f in parsed]
    if len(set(ids)) != len(ids):
        raise FiguresError(
            f"{name}: figure ids repeat: {sorted(i for i in ids if ids.count(i) > 1)}"
        )
    order = raw.get("order", 100)
    if type(order) is not int:
        raise FiguresError(f"{name}: order must be an int")
    return Group(
        group=name,
        title=_text(raw, "title", name),
        figures=parsed,
        order=order,
        about=_text(raw, "about", name, required=False),
        data=raw.get("data"),
    )


def _read_json(path: Path) -> Any:
    with path.open("rb") as handle:
        blob = handle.read(MAX_FILE_BYTES + 1)
    if len(blob) > MAX_FILE_BYTES:
        raise FiguresError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    try:
        return json.loads(blob)
    except ValueError as exc:
        raise FiguresError(f"{path}: not JSON ({exc})") from exc


def load_group(path: Path) -> Group:
    """Read and check one figure file (at most :data:`MAX_FILE_BYTES`)."""
    return parse_group(_read_json(path), path.stem)


def load_groups(folder: Path) -> list[Group]:
    """Every `*.json` directly in `folder` (raw data in subfolders is not read), in `order`."""
    groups = [load_group(p) for p in sorted(folder.glob("*.json"))]
    return sorted(groups, key=lambda g: (g.order, g.group))


def machine_description() -> str:
    """This machine in one line: CPU cores, OS, Python, torch's version (when installed) and the
    1-minute load average now (other work on the machine skews every figure)."""
    parts = [f"{os.cpu_count() or 1}-core CPU", f"{platform.system()} {platform.machine()}"]
    parts.append(f"Python {platform.python_version()}")
    try:
        from importlib.metadata import version

        parts.append(f"torch {version('torch')}")
    except Exception:  # torch not installed: say nothing of it
        pass
    if hasattr(os, "getloadavg"):
        parts.append(f"load {os.getloadavg()[0]:.1f}")
    return ", ".join(parts)


def invoked_command(program: str = "metabonk") -> str:
    """The command line this process was started with, as `program` and its arguments (the
    `command` a bench stamps on its figures; paths stay as the user typed them)."""
    return shlex.join([program, *sys.argv[1:]])


def put_figures(
    path: Path, figures: list[dict[str, Any]], *, command: str, title: str = "", seeds: Any = None
) -> Group:
    """Put a bench's measured figures into a record file, each replacing the one with its `id`.

    Each figure gets `command`, `seeds` (unless it names its own), this machine and today's
    date; the file's other figures stay as they are. A missing file is created (its group named
    after the file, `title` its heading). The result is checked before anything is written; returns the parsed group.
    """
    path = Path(path)
    if path.exists():
        raw = _read_json(path)
        if not isinstance(raw, dict) or not isinstance(raw.get("figures"), list):
            raise FiguresError(f"{path}: not a figure record file")
    else:
        raw = {"group": path.stem, "title": title or path.stem, "figures": []}
    stamp = {"command": command, "seeds": seeds, "machine": machine_description()}
    stamp["date"] = _date.today().isoformat()
    for figure in figures:
        ids = [f.get("id") if isinstance(f, dict) else None for f in raw["figures"]]
        new = {**figure, **stamp} | ({"seeds": figure["seeds"]} if "seeds" in figure else {})
        if figure.get("id") in ids:
            raw["figures"][ids.index(figure["id"])] = new
        else:
            raw["figures"].append(new)
    parsed = parse_group(raw, path.stem)
    atomic_write_text(path, json.dumps(raw, indent=2, ensure_ascii=False) + "\n")
    return parsed
