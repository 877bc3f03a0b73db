"""What was silently accepted (issue 36, item 4), now a one-line error or a warning: one run
spelled three ways in a ladder, a ladder over an existing one, a strategist that never answered
ranked like any agent, a ROM title's control bytes, a start state or a session folder
overwritten, a bogus backend stored, a variable named `won` or `lost` added without a word."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from metabonk_gym.cli.main import app
from one_line import one_line_error as _error
from typer.testing import CliRunner

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


# ------------------------------------------------------------------ ladder
def test_one_run_spelled_three_ways_is_one_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`./runs/x`, `runs/x/` and its absolute path were ranked as three agents."""
    from metabonk_gym.training.ppo import train_ppo

    monkeypatch.chdir(tmp_path)
    tiny = {"n_envs": 2, "n_steps": 16, "batch_size": 32, "n_epochs": 1, "downscale": 8}
    tiny |= {"frame_stack": 2, "features_dim": 32, "max_episode_steps": 30, "video_every": 0}
    train_ppo(QUEST, tmp_path / "runs" / "x", overrides={**tiny, "total_steps": 64})
    spelled = f"./runs/x,runs/x/,{tmp_path / 'runs' / 'x'}"
    assert _error(["ladder", QUEST, "--agents", f"random,{spelled}", "--out", "lad"]) == (
        f"error: --agents names one agent as ./runs/x, runs/x/, {tmp_path / 'runs' / 'x'} "
        "more than once"
    )
    assert not (tmp_path / "lad").exists()


def test_a_ladder_is_not_replaced_without_force(tmp_path: Path) -> None:
    out = tmp_path / "lad"
    out.mkdir()
    (out / "ladder.json").write_text('{"mine": true}')
    args = ["ladder", QUEST, "--agents", "random", "--episodes", "1", "--max-steps", "5"]
    args += ["--no-video", "--out", str(out)]
    assert _error(args) == (
        f"error: --out {out} already holds a ladder (ladder.json): pass --force to replace it, "
        "or choose another --out"
    )
    assert (out / "ladder.json").read_text() == '{"mine": true}'
    result = runner.invoke(app, [*args, "--force"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "ladder.json").read_text())["cells"][0]["agent"] == "random"


@pytest.mark.net
def test_a_strategist_that_never_answered_is_not_ranked(tmp_path: Path) -> None:
    """A think agent whose server never answered played on fallback directives and was ranked
    like any agent; now it has no rank, a note, and the command says so."""
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = f"think:http://127.0.0.1:{port}/v1"
    out = tmp_path / "lad"
    result = runner.invoke(
        app,
        ["ladder", QUEST, "--agents", f"random,{agent}", "--episodes", "1", "--max-steps", "30"]
        + ["--no-video", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    cells = {c["agent"]: c for c in json.loads((out / "ladder.json").read_text())["cells"]}
    assert cells["random"]["rank"] == 1
    think = cells[agent]
    assert think["rank"] is None and think["think"]["answered"] == 0
    assert think["note"].startswith("the strategist never answered (")
    assert "is not ranked: the strategist never answered" in " ".join(result.output.split())
    assert "| - | think:" in (out / "ladder.md").read_text()


# ------------------------------------------------------------------ bring your own ROM
def _rom(tmp_path: Path, title: bytes = b"") -> Path:
    """BonkQuest's ROM with `title` in its cartridge header (12 bytes, zero-padded)."""
    from metabonk_gym.gamedata import bundled_game_folder

    data = bytearray((bundled_game_folder("BonkQuest") / "rom.gba").read_bytes())
    data[0xA0:0xAC] = title.ljust(12, b"\0")[:12]
    path = tmp_path / "game.gba"
    path.write_bytes(bytes(data))
    return path


def test_control_bytes_of_a_rom_title_never_reach_the_terminal(tmp_path: Path) -> None:
    """An ESC sequence in the header title was echoed raw (it cleared the screen here) and
    stored in metabonk.json and metadata.json as it was."""
    rom = _rom(tmp_path, b"AB\x1b[2JCD\x07")
    result = runner.invoke(app, ["integrate", "new", str(rom), str(tmp_path / "Game")])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "AB?[2JCD?" in result.output
    extension = json.loads((tmp_path / "Game" / "metabonk.json").read_text())
    assert extension["rom_title"] == "AB?[2JCD?"
    assert "\x1b" not in (tmp_path / "Game" / "metadata.json").read_text()


@pytest.fixture
def game_folder(tmp_path: Path) -> Path:
    from metabonk_gym.gamedata import bundled_game_folder
    from metabonk_gym.integrate import new_game_folder

    return new_game_folder(bundled_game_folder("BonkQuest") / "rom.gba", tmp_path / "Mine")


def test_a_bogus_backend_is_refused_not_stored(game_folder: Path) -> None:
    """`--backend bogus` ran the embedded core and stored "bogus" in the session."""
    assert _error(["ram", "search", "start", str(game_folder), "--backend", "bogus"]) == (
        "error: --backend must be embedded or skyemu, not 'bogus'"
    )
    assert not (game_folder / "ram-session").exists()


def test_a_session_folder_of_other_files_is_refused(game_folder: Path, tmp_path: Path) -> None:
    """`--session DIR` on a folder of the user's deleted its arrays-*.npz files."""
    mine = tmp_path / "work"
    mine.mkdir()
    (mine / "arrays-results.npz").write_bytes(b"my arrays")
    (mine / "notes.txt").write_text("notes")
    args = ["ram", "search", "start", str(game_folder), "--inputs", "wait 10"]
    assert _error([*args, "--session", str(mine)]) == (
        f"error: --session {mine} already holds files (arrays-results.npz, notes.txt) and no "
        "RAM search session; choose a new or empty folder"
    )
    assert sorted(p.name for p in mine.iterdir()) == ["arrays-results.npz", "notes.txt"]


def test_a_session_removes_only_its_own_arrays_files(game_folder: Path) -> None:
    start = ["ram", "search", "start", str(game_folder), "--inputs", "wait 10"]
    assert runner.invoke(app, start).exit_code == 0
    keep = game_folder / "ram-session" / "arrays-backup.npz"
    keep.write_bytes(b"kept")
    result = runner.invoke(
        app, ["ram", "filter", str(game_folder), "increased", "--inputs", "wait 10"]
    )
    assert result.exit_code == 0, result.output
    assert keep.read_bytes() == b"kept"
    assert len(list((game_folder / "ram-session").glob("arrays-*.npz"))) == 2


@pytest.mark.parametrize("name", ["won", "lost"])
def test_a_variable_named_won_or_lost_needs_contract(game_folder: Path, name: str) -> None:
    """`ram add won ADDR` made every episode won at step 1 (a counter there is not 0) without
    a word; the name is what the env reports as the episode's result."""
    before = (game_folder / "data.json").read_text()
    line = _error(["ram", "add", str(game_folder), name, "0x02000010", "u8"])
    assert line.startswith(f"error: variable name {name!r} is what the env reports as info[")
    assert "Pass --contract if this address holds exactly that" in line
    assert (game_folder / "data.json").read_text() == before
    result = runner.invoke(
        app, ["ram", "add", str(game_folder), name, "0x02000010", "u8", "--contract"]
    )
    assert result.exit_code == 0, result.output
    assert name in json.loads((game_folder / "data.json").read_text())["info"]


def test_integrate_state_does_not_replace_a_start_without_force(game_folder: Path) -> None:
    """`integrate state FOLDER NAME` overwrote an existing NAME.state without a word."""
    args = ["integrate", "state", str(game_folder), "level1", "--inputs", "wait 10"]
    assert runner.invoke(app, args).exit_code == 0
    state = game_folder / "level1.state"
    first = state.read_bytes()
    line = _error([*args[:4], "--inputs", "wait 200"])
    assert line == (
        f"error: {state} exists: pass --force to replace that start state, or choose another name"
    )
    assert state.read_bytes() == first
    result = runner.invoke(app, [*args[:4], "--inputs", "wait 200", "--force"])
    assert result.exit_code == 0, result.output
    assert state.read_bytes() != first
