"""Bring your own ROM (metabonk_gym.integrate, `metabonk integrate|ram|tiles`): the vectorised
filters agree with a per-address loop, sessions save and undo, watches and start states work
headless, and bad input is one line and exit code 2 with the session untouched.

The whole docs/new-game.md walkthrough on a relaid ROM (SkyEmu search included) runs in
tests/test_user_game.py; the figures come from `metabonk bench integrate`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.gamedata import bundled_game_folder
from metabonk_gym.gba.statefile import read_state
from metabonk_gym.integrate import IntegrateError, RamSearch, new_game_folder, parse_script
from metabonk_gym.integrate.scan import (
    FILTERS,
    VIEWS,
    apply_filter,
    full_masks,
    naive_filter,
    parse_filter,
)

runner = CliRunner()
QUEST = bundled_game_folder("BonkQuest")
PLAYER_X = json.loads((QUEST / "data.json").read_text())["info"]["player_x"]["address"]


def cli(*args: object) -> object:
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under `folder` -> its SHA-1 (to prove a failed command changed nothing)."""
    return {
        str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def game(tmp_path: Path) -> Path:
    """A folder made by `integrate new` from the bundled BonkQuest ROM."""
    out = cli("integrate", "new", QUEST / "rom.gba", tmp_path / "Mine", "--name", "Mine")
    assert out.exit_code == 0, out.output
    return tmp_path / "Mine"


@pytest.mark.parametrize("op", [op for op in FILTERS if op not in ("kept", "shown")])
def test_vectorised_filters_match_a_per_address_loop(op: str) -> None:
    rng = np.random.default_rng(len(op))
    old = rng.integers(0, 256, 512, dtype=np.uint8)
    old[::3] = 0x12  # BCD digits and repeated values, so every filter keeps something
    new = old.copy()
    new[::5] += 1
    new[::7] -= 1
    masks = full_masks(len(new), VIEWS)
    flt = parse_filter(op, ["0x12", "0x40"][: FILTERS[op]] if op != "delta" else ["1"])
    fast, slow = apply_filter(masks, old, new, flt), naive_filter(masks, old, new, flt)
    for t in VIEWS:
        assert np.array_equal(fast[t], slow[t]), (op, t)
    assert sum(int(m.sum()) for m in fast.values()) > 0


def test_input_scripts_parse_and_refuse_typos() -> None:
    assert parse_script("wait 2; RIGHT+a 3\n# comment\nstart 1") == [(0, 2), (17, 3), (8, 1)]
    for bad in ("jump 3", "RIGHT", "wait x", "wait -1", "wait 999999999"):
        with pytest.raises(IntegrateError):
            parse_script(bad)


def test_integrate_new_makes_a_folder_the_env_runs(game: Path) -> None:
    assert (game / "rom.sha").read_text().strip() == hashlib.sha1(
        (QUEST / "rom.gba").read_bytes()
    ).hexdigest()
    extension = json.loads((game / "metabonk.json").read_text())
    assert (extension["name"], extension["rom_title"], extension["rom_code"]) == (
        "Mine",
        "BONKQUEST",
        "BQST",
    )
    out = cli(
        "play",
        "MetaBonk/GBA-v0",
        "--integration",
        game,
        "--agent",
        "random",
        "--episodes",
        "1",
        "--max-steps",
        "5",
    )
    assert out.exit_code == 0, out.output


def test_search_session_filters_undoes_and_reloads(game: Path) -> None:
    assert cli("ram", "search", "start", game, "--inputs", "wait 30", "--type", "u8").exit_code == 0
    out = cli("ram", "filter", game, "increased", "--inputs", "RIGHT 16")
    assert out.exit_code == 0, out.output
    after_right = RamSearch.load(game).left
    out = cli("ram", "filter", game, "decreased", "--inputs", "LEFT 8")
    assert out.exit_code == 0, out.output
    search = RamSearch.load(game)
    assert search.left < after_right and PLAYER_X in {c.address for c in search.candidates(None)}
    assert search.value_history(PLAYER_X, "|u1") == [9, 13, 11]
    with zipfile.ZipFile(next((game / "ram-session").glob("arrays-*.npz"))) as archive:
        assert all(name.endswith(".npy") for name in archive.namelist())  # plain arrays, no pickle
    assert cli("ram", "undo", game).exit_code == 0
    search = RamSearch.load(game)
    assert (search.left, len(search.snapshots), len(search.steps)) == (after_right, 2, 1)
    # the undo put the emulator back too: the same filter again gives the same result
    assert cli("ram", "filter", game, "decreased", "--inputs", "LEFT 8").exit_code == 0
    assert RamSearch.load(game).value_history(PLAYER_X, "|u1") == [9, 13, 11]


def test_kept_drops_the_copies_the_game_rewrites(game: Path) -> None:
    search = RamSearch.start(game, inputs="wait 30", types=["u8"])
    search.filter(parse_filter("eq", ["5"]))
    search.filter(parse_filter("unchanged"), inputs="RIGHT 16; UP 4; RIGHT 20")
    search.filter(parse_filter("decreased"), inputs="wait 40")
    hp = json.loads((QUEST / "data.json").read_text())["info"]["hp"]["address"]
    before = {c.address for c in search.candidates(None)}
    assert hp in before and len(before) > 1  # hp and the HUD's copy of it
    search.filter(parse_filter("kept"))
    assert [c.address for c in search.candidates(None)] == [hp]
    out = cli("ram", "add", game, "hp")
    assert out.exit_code == 0 and json.loads((game / "data.json").read_text())["info"]["hp"] == {
        "address": hp,
        "type": "|u1",
    }


def test_watch_plays_a_script_headless_and_logs_values(game: Path, tmp_path: Path) -> None:
    assert cli("ram", "add", game, "player_x", hex(PLAYER_X), "u8").exit_code == 0
    log, svg = tmp_path / "w.jsonl", tmp_path / "w.svg"
    out = cli(
        "ram",
        "watch",
        game,
        "player_x",
        "--inputs",
        "wait 60; RIGHT 16",
        "--every",
        "4",
        "--log",
        log,
        "--svg",
        svg,
    )
    assert out.exit_code == 0, out.output
    samples = [json.loads(line) for line in log.read_text().splitlines()]
    xs = [s["values"]["player_x"] for s in samples]
    assert xs[14] == 9 and xs[-1] == 13 and len(samples) == 19  # a step each 4 frames of RIGHT
    assert "player_x" in out.output and "<svg" in svg.read_text()


def test_suggest_finds_x_and_y_and_state_saves_a_start(game: Path) -> None:
    out = cli(
        "ram", "suggest", game, "--inputs", "wait 30", "--add", "x=player_x", "--add", "y=player_y"
    )
    assert out.exit_code == 0, out.output
    info = json.loads((game / "data.json").read_text())["info"]
    truth = json.loads((QUEST / "data.json").read_text())["info"]
    assert info["player_x"]["address"] == truth["player_x"]["address"]
    assert info["player_y"]["address"] == truth["player_y"]["address"]
    out = cli(
        "integrate", "state", game, "keyroom", "--inputs", "wait 30; RIGHT 16; UP 4", "--default"
    )
    assert out.exit_code == 0, out.output
    assert read_state(game / "keyroom.state", 2**24).verified  # checksummed
    assert json.loads((game / "metadata.json").read_text())["default_state"] == "keyroom"
    search = RamSearch.start(game, state_file=game / "keyroom.state", types=["u8"])
    assert search.value_history(truth["keys"]["address"], "|u1") == [1]  # the key was taken


def test_tiles_group_label_and_walkability(game: Path) -> None:
    for name in ("player_x", "player_y"):
        spec = json.loads((QUEST / "data.json").read_text())["info"][name]
        assert cli("ram", "add", game, name, hex(spec["address"]), "u8").exit_code == 0
    out = cli(
        "integrate",
        "tiles",
        game,
        "--inputs",
        "wait 30; " + "; ".join(["RIGHT 8", "UP 8", "LEFT 8", "DOWN 8"] * 8),
    )
    assert out.exit_code == 0, out.output
    groups = json.loads((game / "tile_groups.json").read_text())["groups"]
    floor = next(g for g, e in groups.items() if 1 in e["tiles"])
    wall = next(g for g, e in groups.items() if 3 in e["tiles"] or 4 in e["tiles"])
    assert groups[floor]["walkable"] is True
    assert cli("tiles", "label", game, f"{floor}=floor", f"{wall}=wall").exit_code == 0
    tiles = json.loads((game / "tiles.json").read_text())
    assert tiles["classes"]["1"] == "floor" and tiles["walkable"]["floor"] is True
    assert (game / "tiles.png").read_bytes().startswith(b"\x89PNG")
    bad = cli("tiles", "label", game, "999=lava")
    assert bad.exit_code == 2 and "group id" in bad.output


def test_bad_input_is_one_line_and_leaves_the_session_alone(game: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.gba"
    notes.write_text("not a rom\n" * 100)
    out = cli("integrate", "new", notes, tmp_path / "Other")
    assert (
        out.exit_code == 2
        and "is not a GBA ROM" in out.output
        and not (tmp_path / "Other").exists()
    )
    assert len(out.output.strip().splitlines()) == 1

    assert cli("ram", "search", "start", game, "--inputs", "wait 30", "--type", "u8").exit_code == 0
    assert cli("ram", "filter", game, "eq", "300").exit_code == 0  # no u8 holds 300: none left
    before = fingerprint(game)
    cases = [
        (("ram", "filter", game, "eq", "1"), "no candidates left"),
        (("ram", "add", game, "lives", "0x09000000", "u8"), "outside RAM"),
        (("ram", "add", game, "lives", "0x02000000", "f32"), "unknown value type 'f32'"),
        (("ram", "search", "start", game, "--type", "f32"), "unknown value type 'f32'"),
        (("ram", "filter", game, "range", "1"), "takes 2 number(s)"),
        (("ram", "filter", game, "bigger"), "unknown filter 'bigger'"),
        (("ram", "add", game, "hp"), "not one"),
        (("ram", "filter", game, "changed", "--play"), "needs a window you can see"),
        (("ram", "watch", game, "0x09000000:u8", "--inputs", "wait 1"), "outside RAM"),
    ]
    for args, message in cases:
        out = cli(*args)
        assert out.exit_code == 2, (args, out.output)
        assert message in out.output and len(out.output.strip().splitlines()) == 1, out.output
        assert fingerprint(game) == before, args

    other = new_game_folder(bundled_game_folder("BonkArena") / "rom.gba", tmp_path / "Arena")
    shutil.copytree(game / "ram-session", other / "ram-session")
    session_before = fingerprint(other)
    out = cli("ram", "filter", other, "changed", "--inputs", "wait 1")
    assert out.exit_code == 2 and "made on another ROM" in out.output
    assert fingerprint(other) == session_before


@pytest.mark.net
def test_watch_a_skyemu_someone_plays(game: Path, tmp_path: Path) -> None:
    """The watch reads a running SkyEmu (the project's test peer) without restarting it."""
    from metabonk_gym.gba.skyemu_peer import PeerProcess
    from metabonk_gym.integrate.machine import SkyEmuLive

    assert cli("ram", "add", game, "player_x", hex(PLAYER_X), "u8").exit_code == 0
    with PeerProcess(game / "rom.gba") as peer:
        you = SkyEmuLive(peer.url, (game / "rom.gba").read_bytes())
        you.step(60, 0)
        you.step(16, 1 << 4)  # RIGHT, as a player in SkyEmu's window
        log = tmp_path / "sky.jsonl"
        out = cli(
            "ram",
            "watch",
            game,
            "--backend",
            "skyemu",
            "--skyemu-url",
            peer.url,
            "--seconds",
            "0.3",
            "--log",
            log,
        )
        assert out.exit_code == 0, out.output
        values = [json.loads(line)["values"]["player_x"] for line in log.read_text().splitlines()]
        assert values and set(values) == {13}  # where the player stands; nothing was restarted
        you.step(0, 0)
        you.close()
        other = new_game_folder(bundled_game_folder("BonkArena") / "rom.gba", tmp_path / "Arena")
        out = cli("ram", "search", "start", other, "--backend", "skyemu", "--skyemu-url", peer.url)
        assert out.exit_code == 2 and "runs another ROM" in out.output


class ScriptedWindow:
    """Stands in for the pygame window (no display here): holds RIGHT for 16 frames after 60,
    then closes, as a player would; records what the window was shown."""

    def __init__(self, title: str = "", fps: float = 60.0) -> None:
        self.frames, self.closed, self.status = 0, False, ""

    def pump(self) -> None:
        self.frames += 1
        self.closed = self.frames > 76

    def buttons(self) -> set[str]:
        return {"RIGHT"} if self.frames > 60 else set()

    def show(self, frame: np.ndarray, status: str = "") -> None:
        assert frame.shape == (160, 240, 3)
        self.status = status


def test_play_in_a_window_drives_watch_filter_and_tiles(
    game: Path, tmp_path: Path, monkeypatch
) -> None:
    import metabonk_gym.cli.integrate as integrate_cli

    monkeypatch.setattr(integrate_cli, "display_problem", lambda: None)
    monkeypatch.setattr(integrate_cli, "PlayWindow", ScriptedWindow)
    assert cli("ram", "add", game, "player_x", hex(PLAYER_X), "u8").exit_code == 0
    log = tmp_path / "play.jsonl"
    out = cli("ram", "watch", game, "player_x", "--play", "--every", "4", "--log", log)
    assert out.exit_code == 0, out.output
    xs = [json.loads(line)["values"]["player_x"] for line in log.read_text().splitlines()]
    assert xs[-1] == 13 and 9 in xs  # walked four tiles right in the window
    assert cli("ram", "search", "start", game, "--inputs", "wait 30", "--type", "u8").exit_code == 0
    assert cli("ram", "filter", game, "increased", "--play").exit_code == 0
    assert PLAYER_X in {c.address for c in RamSearch.load(game).candidates(None)}
    assert cli("integrate", "tiles", game, "--play").exit_code == 0
    assert (game / "tile_groups.json").is_file()
