"""Go-Explore cells that keep builds apart (issue 34): BonkArena's cells key the attack upgrades
taken at its level-up menus and favour stronger builds; `favour` weighs the explorer's choice
on the real core; a cells file naming an unknown upgrade, a `favour` of no cell variable or a bad
factor is one line and writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from metabonk_gym.cli.errors import guard_commands
from metabonk_gym.cli.explore import register
from typer.testing import CliRunner

from metabonk_gym.training.explore import ExploreSettings, run_explore
from metabonk_gym.training.explore_archive import Archive

ARENA = "MetaBonk/BonkArena-v0"
QUEST = "MetaBonk/BonkQuest-v0"
UPGRADES = ("upg_damage", "upg_multi", "upg_firerate")


def run_cli(*args: str) -> Any:
    """`metabonk explore ...` as the CLI runs it (errors guarded: one line, exit code 2)."""
    app = typer.Typer()
    register(app)
    guard_commands(app)
    return CliRunner().invoke(app, list(args))


def one_line_error(result: Any, *words: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for word in words:
        assert word in lines[0], result.output


def test_arena_cells_keep_the_upgrades_taken_apart(tmp_path: Path) -> None:
    out = tmp_path / "arena"
    result = run_explore(ARENA, out, ExploreSettings(n_envs=2, max_frames=24_000, seed=0))
    archive = Archive.load(out / "archive.npz")
    cells = archive.meta["cells"]
    names = list(cells["variables"])
    assert set(UPGRADES) <= set(names) and set(cells["favour"]) == set(UPGRADES), cells
    columns = [names.index(name) for name in UPGRADES]
    builds = {tuple(key[c] for c in columns) for key in archive.keys}
    # level-ups within the first 40 s of play: cells of one clock slice and HP, other builds
    assert any(any(build) for build in builds) and len(builds) >= 3, (result, builds)


def test_favour_weighs_the_choice_of_cells(tmp_path: Path) -> None:
    """A factor of 10 per room: room 2, found in the first round, gets most of the returns
    (without `favour`: 1 of 40, seed 0), though room 1 has most of the cells."""
    cells = tmp_path / "cells.yaml"
    cells.write_text(
        "variables: {room: 1, player_x: 3, player_y: 3, keys: 1}\nscore: score\n"
        "repeat_prob: 0.75\nfavour: {room: 10}\n"
    )
    out = tmp_path / "quest"
    settings = ExploreSettings(n_envs=2, max_frames=16_000, seed=0, cells_file=str(cells))
    run_explore(QUEST, out, settings)
    archive = Archive.load(out / "archive.npz")
    found = [f for key, f in zip(archive.keys, archive.found_frame) if key[0] >= 2]
    assert found and min(found) <= 3_200, archive.keys  # room 2 in the first of 5 rounds
    assert archive.meta["cells"]["favour"] == {"room": 10}
    chosen = {room: 0 for room in (1, 2)}
    for key, count in zip(archive.keys, archive.chosen):
        chosen[min(key[0], 2)] += count
    rooms = [min(key[0], 2) for key in archive.keys]
    assert chosen[2] > chosen[1] and rooms.count(1) > rooms.count(2), (chosen, rooms)


def test_bad_upgrade_cells_are_one_line_errors_and_write_nothing(tmp_path: Path) -> None:
    cells = tmp_path / "cells.yaml"
    out = tmp_path / "out"
    cells.write_text("variables: {time_s: 10, upg_multy: 1}\n")
    result = run_cli("explore", ARENA, "--out", str(out), "--frames", "400", "--cells", str(cells))
    one_line_error(result, "upg_multy", "not a RAM variable", "upg_multi")  # the nearest name
    cells.write_text("variables: {time_s: 10, upg_multi: 1}\nfavour: {upg_damage: 2}\n")
    result = run_cli("explore", ARENA, "--out", str(out), "--frames", "400", "--cells", str(cells))
    one_line_error(result, "favour 'upg_damage'", "one of the cell variables")
    cells.write_text("variables: {time_s: 10, upg_multi: 1}\nfavour: {upg_multi: 0}\n")
    result = run_cli("explore", ARENA, "--out", str(out), "--frames", "400", "--cells", str(cells))
    one_line_error(result, "favour factor of 'upg_multi'", "(0, 10]")
    assert not out.exists()
