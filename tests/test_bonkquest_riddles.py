"""BonkQuest's riddle quest, on the real ROM: the sage's words, read from the
screen, name the chest that holds the key and the marks the garden's and the crypt's keys lie
under; a wrong chest or mark costs RIDDLE_COST HP, the named one gives the key; all of it is
seeded by the reset seed; the classic starts show no riddle.

The player is put next to a chest or mark by poking its cell (`write_variable`), then the game
runs its own rules on the buttons pressed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.think.games import adapter_for
from metabonk_gym.think.view import GameView

GAME: Any = GameData(bundled_game_folder("BonkQuest")).module()
TILE = GAME.TILE
ACTIONS = {"": 0, "UP": 1, "DOWN": 2, "LEFT": 3, "RIGHT": 4, "A": 5}
STEPS = {"UP": (0, -1), "DOWN": (0, 1), "LEFT": (-1, 0), "RIGHT": (1, 0)}
#: gfx.c: the overlay's screenblock, the font's first tile, the dialogue's first text row.
SB_HUD, FONT_BASE, TEXT_ROW = 30, 64, 15
FONT_CHARS = " ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?:-+'/%=><()*#"
#: seeds whose key chests are SOUTH, NORTH-WEST and NORTH-EAST (all three, checked below)
SEEDS = (0, 2, 3)


def ram(env: Any) -> dict[str, int]:
    return env.unwrapped.variables()


def tiles(env: Any) -> np.ndarray:
    return env.unwrapped.read_array("room_tiles")


def step(env: Any, button: str, times: int = 1) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for _ in range(times):
        _, _, _, _, info = env.step(ACTIONS[button])
    return info


def dialogue_lines(env: Any) -> list[str]:
    """The text of the dialogue box as the screen shows it (BG0's map entries in VRAM)."""
    base = 0x06000000 + SB_HUD * 0x800
    raw = np.frombuffer(env.unwrapped.read_memory(base, 0x800), "<u2").reshape(32, 32)
    lines = []
    for row in raw[TEXT_ROW : TEXT_ROW + 4]:
        glyphs = [int(e & 0x3FF) - FONT_BASE for e in row[2:28]]
        lines.append("".join(FONT_CHARS[g] if 0 <= g < len(FONT_CHARS) else " " for g in glyphs))
    return [line.strip() for line in lines]


def stand_next_to(env: Any, target: tuple[int, int]) -> str:
    """Put the player on a floor cell next to `target`; returns the direction towards it."""
    grid = tiles(env)
    for name, (dx, dy) in STEPS.items():
        x, y = target[0] - dx, target[1] - dy
        if 0 <= y < grid.shape[0] and 0 <= x < grid.shape[1] and grid[y, x] == TILE["floor"]:
            env.unwrapped.write_variable("player_x", x)
            env.unwrapped.write_variable("player_y", y)
            step(env, "", 3)  # the move cooldown runs out
            return name
    raise AssertionError(f"no floor next to {target}")


def hear_the_sage(env: Any) -> list[str]:
    """Talk to the sage of room 2; his words as on screen (the box closed again after)."""
    v = ram(env)
    stand_next_to(env, (v["npc_x"], v["npc_y"]))
    step(env, "A")
    assert ram(env)["dialogue_open"] == 1
    words = dialogue_lines(env)
    step(env, "")
    step(env, "A")
    assert ram(env)["dialogue_open"] == 0
    return words


def said(words: list[str], place: str) -> str:
    """The sage's label for `place` (HALL, GARDEN, CRYPT)."""
    line = next(w for w in words if w.startswith(place + " - "))
    return line.split(" - ", 1)[1]


def open_chest(env: Any, cell: tuple[int, int]) -> tuple[int, int, int]:
    """Open the chest at `cell`: (HP lost, keys gained, hits added) on the step it opened."""
    stand_next_to(env, cell)
    before = ram(env)
    step(env, "A")
    after = ram(env)
    assert tiles(env)[cell[1], cell[0]] == TILE["chest_open"]
    return (
        before["hp"] - after["hp"],
        after["keys"] - before["keys"],
        after["hits"] - before["hits"],
    )


def step_onto(env: Any, cell: tuple[int, int]) -> tuple[int, int, int]:
    """Step onto the mark at `cell`: (HP lost, keys gained, hits added)."""
    towards = stand_next_to(env, cell)
    before = ram(env)
    step(env, towards)
    after = ram(env)
    assert (after["player_x"], after["player_y"]) == cell
    return (
        before["hp"] - after["hp"],
        after["keys"] - before["keys"],
        after["hits"] - before["hits"],
    )


def cells(grid: np.ndarray, *names: str) -> list[tuple[int, int]]:
    """(x, y) of every tile of these classes, in reading order."""
    ids = [TILE[n] for n in names]
    return [(int(x), int(y)) for y, x in np.argwhere(np.isin(grid, ids))]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_sage_names_the_key_chest_and_a_wrong_chest_costs(make_env, seed: int) -> None:
    env = make_env(state="riddles_room2")
    env.reset(seed=seed)
    assert ram(env)["quest_mode"] == 1
    words = hear_the_sage(env)
    assert words[0].startswith("SAGE")
    named = said(words, "HALL")
    chests = cells(tiles(env), "chest")
    labels = dict(zip(GAME.CHEST_LABELS, chests))
    assert len(chests) == 3 and named in labels
    # the adapter tells a model what the screen said
    view = GameView.capture(env, None, 0)
    assert named in adapter_for(env).state(view)["sage_said"]
    wrong = next(cell for label, cell in labels.items() if label != named)
    assert open_chest(env, wrong) == (GAME.RIDDLE_COST, 0, 1)
    assert open_chest(env, labels[named]) == (0, 1, 0)
    # the riddle solved, the last chest holds gold, not a trap
    last = next(c for c in labels.values() if tiles(env)[c[1], c[0]] == TILE["chest"])
    assert open_chest(env, last) == (0, 0, 0)


@pytest.mark.parametrize("room, place", [(3, "GARDEN"), (4, "CRYPT")])
def test_the_key_lies_under_the_mark_the_sage_names(make_env, room: int, place: str) -> None:
    env = make_env(state="riddles_room2")
    for seed in SEEDS:
        env.reset(seed=seed)
        named = said(hear_the_sage(env), place)
        env.reset(seed=seed, options={"state": f"riddles_room{room}"})
        marks = cells(tiles(env), "mark")
        assert len(marks) == 4 and not cells(tiles(env), "key")
        by_label = {GAME.mark_label(x, y): (x, y) for x, y in marks}
        assert sorted(by_label) == sorted(["NORTH-WEST", "NORTH-EAST", "SOUTH-WEST", "SOUTH-EAST"])
        view = GameView.capture(env, None, 0)
        assert named in adapter_for(env).state(view)["sage_said"]
        wrong = next(cell for label, cell in by_label.items() if label != named)
        assert step_onto(env, wrong) == (GAME.RIDDLE_COST, 0, 1)
        assert tiles(env)[wrong[1], wrong[0]] == TILE["floor"]  # the trap is sprung
        assert ram(env)["marks_sprung"] != 0
        assert step_onto(env, by_label[named]) == (0, 1, 0)
        assert not cells(tiles(env), "mark")  # the riddle solved, the other marks go


def test_the_riddles_are_seeded(make_env) -> None:
    env = make_env(state="riddles_room4")
    picks = []
    for seed in range(20):
        env.reset(seed=seed)
        v = ram(env)
        picks.append((v["key_chest"], GAME.mark_label(v["key_x"], v["key_y"])))
    env.reset(seed=7)
    v = ram(env)
    assert (v["key_chest"], GAME.mark_label(v["key_x"], v["key_y"])) == picks[7]
    assert {c for c, _ in picks} == {0, 1, 2}
    assert len({m for _, m in picks}) == 4
    assert {picks[s][0] for s in SEEDS} == {0, 1, 2}  # SEEDS cover every key chest


def test_the_classic_starts_have_no_riddle(make_env) -> None:
    env = make_env(state="room3")
    env.reset(seed=3)
    assert ram(env)["quest_mode"] == 0
    assert not cells(tiles(env), "mark") and len(cells(tiles(env), "key")) == 1
    env.reset(seed=3, options={"state": "room2"})
    chests = cells(tiles(env), "chest")
    wrong = chests[(ram(env)["key_chest"] + 1) % 3]
    assert open_chest(env, wrong) == (0, 0, 0)  # a wrong chest holds gold in the classic quest


def test_the_python_side_names_marks_and_costs_as_the_c_source() -> None:
    source = Path(__file__).resolve().parent.parent / "gba" / "bonkquest"
    header = (source / "game.h").read_text()
    cost = re.search(r"#define RIDDLE_COST (\d+)", header)
    assert cost is not None and int(cost[1]) == GAME.RIDDLE_COST
    rooms = re.split(r"\n    \[(\d)\] = \{", (source / "rooms.c").read_text())[1:]
    riddle_spots = {}
    for number, body in zip(rooms[::2], rooms[1::2]):
        found = re.search(r"\.spots = \{(.*?)\}\},", body, re.S)
        if ".riddle = 1" in body and found is not None:
            riddle_spots[int(number)] = re.findall(r'\{(\d+), (\d+), "([A-Z-]+)"', found[1])
    assert sorted(riddle_spots) == [3, 4]  # the garden and the crypt; the hall's are chests
    for spots in riddle_spots.values():
        assert len(spots) == 4
        for x, y, label in spots:  # what the sage says is what the adapter tells a model
            assert GAME.mark_label(int(x), int(y)) == label
