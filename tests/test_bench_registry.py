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
from typer.testing import CliRunner

from metabonk_gym.bench.explore_speed import EXPLORE_VS_RAW_TARGET
from metabonk_gym.bench.figures import load_group

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


def test_every_bench_command_writes_figure_records() -> None:
    """Results are data: each bench puts its figures into a record file with `--figures`
    (`bench report` reads that folder of records)."""
    root: Any = typer.main.get_command(app)
    group: Any = root.commands["bench"]
    #: `bench integrate`'s `--figures` is a switch (the relaid-ROM searches), so its record file
    #: is `--figures-file` (CHANGELOG).
    names = {"--figures", "--figures-file"}
    without = [
        name
        for name, command in group.commands.items()
        if not any(names & set(p.opts) and not p.is_flag for p in command.params)
    ]
    assert without == []


def test_bench_explore_writes_its_record(tmp_path: Path) -> None:
    """`bench explore --figures FILE`: the record is judged by `EXPLORE_VS_RAW_TARGET` and says
    the command that measured it."""
    record_file = tmp_path / "explore.json"
    args = ["bench", "explore", "--steps", "100", "--rounds", "1", "--envs", "1", "--warmup", "0"]
    result = CliRunner().invoke(app, [*args, "--figures", str(record_file)])
    assert result.exit_code == 0, result.output
    (figure,) = load_group(record_file).figures
    assert figure.id == "explore-vs-raw" and figure.unit == "x" and figure.value
    assert figure.target == str(EXPLORE_VS_RAW_TARGET)
    assert figure.met is EXPLORE_VS_RAW_TARGET.met(figure.value)
    assert figure.command.startswith("metabonk bench explore MetaBonk/BonkQuest-v0 --steps 100")
