"""TextMap and GridOverlay: the views a (vision-)language model reads."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from metabonk_gym.wrappers import GridOverlay, TextMap, ascii_map, describe, draw_overlay


def _check(env) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True, skip_close_check=True)


def test_text_map_matches_the_game_state(make_env) -> None:
    env = TextMap(make_env("MetaBonk/BonkQuest-v0", state="room1"))
    obs, info = env.reset(seed=0)
    for action in (4, 4, 2):
        obs, _, _, _, info = env.step(action)
    px, py = info["player_x"], info["player_y"]
    lines = info["text_map"].splitlines()
    assert lines[0].startswith("BonkQuest: room=1")
    grid = [line.split("|")[1] for line in lines if "|" in line]
    assert len(grid) == 20 and all(len(row) == 30 for row in grid)
    assert grid[py][px] == "@" and chr(obs["ascii"][py, px]) == "@"
    assert grid[info["key_y"]][info["key_x"]] == "k"
    assert "Legend: @ player" in info["text_map"] and "# wall" in info["text_map"]
    spatial = info["spatial"].splitlines()
    assert spatial[0] == f"Player at ({px}, {py})."
    key_line = next(line for line in spatial if line.startswith("Nearest key"))
    assert f"at ({info['key_x']}, {info['key_y']})" in key_line
    assert any(line.startswith("Nearest enemy") for line in spatial)
    assert env.text_map == info["text_map"] and env.player == (px, py)


def test_text_map_open_directions_follow_walls(make_env) -> None:
    env = TextMap(make_env("MetaBonk/BonkQuest-v0", state="room1"))
    _, info = env.reset(seed=0)
    for _ in range(30):  # walk up into the wall
        _, _, _, _, info = env.step(1)
    assert "Blocked: up (wall)" in info["spatial"]


def test_text_map_checker_and_arena(make_env) -> None:
    quest = make_env("MetaBonk/BonkQuest-v0")
    _check(TextMap(quest))
    quest.close()  # one emulator per process
    env = TextMap(make_env("MetaBonk/BonkArena-v0"))
    _, info = env.reset(seed=0)
    assert info["text_map"].startswith("BonkArena:") and "@" in info["text_map"]


def test_text_map_needs_semantic_classes(make_env, tmp_path) -> None:
    import json
    import shutil

    from metabonk_gym.gba.integration import games_dir

    folder = tmp_path / "Quest"
    shutil.copytree(games_dir() / "BonkQuest", folder)
    (folder / "tiles.json").unlink()
    env = make_env("MetaBonk/GBA-v0", integration=str(folder))
    with pytest.raises(ValueError, match="tiles.json"):
        TextMap(env)
    assert json.loads((games_dir() / "BonkQuest" / "tiles.json").read_text())


def test_pure_text_functions() -> None:
    names = ["none", "empty", "floor", "wall", "water", "door"]
    classes = np.full((3, 4), 2)
    classes[0] = 3
    classes[2, 3] = 5
    text = ascii_map(classes, names, player=(1, 1))
    assert text.splitlines()[3].endswith("|#@..|") or "|.@..|" in text
    assert "D door" in text
    assert "Nearest door at (3, 2): 2 right, 1 down (distance 3)." in describe(
        classes, names, (1, 1)
    )
    assert describe(classes, names, None) == "Player not visible."


def test_grid_overlay(make_env) -> None:
    env = GridOverlay(make_env("MetaBonk/BonkQuest-v0"), scale=2, every=5)
    obs, info = env.reset(seed=0)
    image = obs["overlay"]
    assert image.shape == (320, 480, 3) and image.dtype == np.uint8
    assert (image[80, :] == 255).all()  # the line of row 5 (5 cells * 8 px * scale 2)
    # the player's cell is outlined in magenta
    px, py = info["player_x"] * 16, info["player_y"] * 16
    assert (image[py - 1, px + 4] == (255, 0, 255)).all()
    _check(env)


def test_draw_overlay_on_any_frame() -> None:
    frame = np.full((40, 64, 3), 100, np.uint8)
    image = draw_overlay(frame, scale=3, every=2)
    assert image.shape == (120, 192, 3)
    gray = draw_overlay(frame[..., :1], scale=1)
    assert gray.shape == (40, 64, 3)
