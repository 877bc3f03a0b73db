"""`metabonk bench`'s commands come from one table, `metabonk_gym.cli.bench.BENCHES`: every row
names a function that exists and is registered under its name, and no other module registers
a bench command itself."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer
from metabonk_gym.cli.bench import BENCHES
from metabonk_gym.cli.main import app

ROOT = Path(__file__).resolve().parent.parent


def test_every_bench_command_is_one_row_of_the_table() -> None:
    root: Any = typer.main.get_command(app)
    group: Any = root.commands["bench"]
    assert list(group.commands) == list(BENCHES)
    for name, where in BENCHES.items():
        module, function = where.split(":")
        callback = group.commands[name].callback
        assert getattr(callback, "__wrapped__", callback).__name__ == function, name


def test_no_module_registers_a_bench_command_itself() -> None:
    pattern = re.compile(r"bench_app\.command\(")
    found = [
        path.name
        for path in sorted((ROOT / "cli").glob("*.py"))
        if path.name != "bench.py" and pattern.search(path.read_text())
    ]
    assert found == []
