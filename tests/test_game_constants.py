"""Every number, name and enum the bundled GBA games define is declared once: in their C source.

The Python side reads them from the game folders' data (metabonk.json "tile_classes" and
"upgrades", data.json addresses), which `gba/bonkquest/gen_integration.py` and
`gba/bonkarena/gen_json.py` generate from the C; the few constants the game code keeps as Python
literals (`game.py`) are checked here against the headers, parsed with regular expressions
independently of the generators.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.think.games import CELL, GRID_H, GRID_W

ROOT = Path(__file__).resolve().parent.parent
QUEST_C = ROOT / "gba" / "bonkquest"
ARENA_C = ROOT / "gba" / "bonkarena"
QUEST = GameData(bundled_game_folder("BonkQuest"))
ARENA = GameData(bundled_game_folder("BonkArena"))


def defines(header: Path) -> dict[str, int]:
    """`#define NAME number` (decimal, hex, with an optional `u`) of a C file."""
    text = header.read_text()
    return {
        m[1]: int(m[2], 0) for m in re.finditer(r"#define (\w+) (0x[0-9A-Fa-f]+|\d+)u?\b", text)
    }


def enum_members(header: Path, prefix: str) -> dict[str, int]:
    """`PREFIX_NAME = value` members of the C enums in a file (explicit values only)."""
    found = re.findall(rf"\b({prefix}\w+) = (\d+)", header.read_text())
    return {name: int(value) for name, value in found}


def c_strings(source: Path, array: str) -> list[str]:
    """The string literals of a C array initialiser `array[...] = { "...", ... };`."""
    match = re.search(rf"\b{array}\[\w*\] = \{{(.*?)\}};", source.read_text(), re.S)
    assert match is not None, f"{source}: no array {array}"
    return re.findall(r'"([^"]*)"', match.group(1))


def load_script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_gen_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------- BonkQuest
def test_quest_tile_classes_are_game_h_tile_enum() -> None:
    enum = enum_members(QUEST_C / "game.h", "T_")
    classes = QUEST.tile_classes()
    assert classes and len(classes) == len(enum)
    for name, tile in classes.items():
        c_name = "T_DOOR_OPEN" if name == "door" else f"T_{name.upper()}"
        assert enum[c_name] == tile, f"{name}: metabonk.json says {tile}, game.h {enum[c_name]}"


def test_quest_game_code_constants_match_the_c_source() -> None:
    game = QUEST.module()
    assert game is not None
    header = defines(QUEST_C / "game.h")
    assert header["NONE"] == game.NONE
    assert (header["ROOM_W"], header["ROOM_H"]) == (GRID_W, GRID_H)
    assert QUEST.manifest["arrays"]["room_tiles"]["shape"] == [GRID_H, GRID_W]
    dirs = enum_members(QUEST_C / "game.h", "DIR_")
    assert {value: name[4:] for name, value in dirs.items()} == game.FACING
    assert list(game.CHEST_LABELS) == c_strings(QUEST_C / "rooms.c", "CHEST_LABELS")
    # every tile class has a map character (text_map.yaml), and only those
    assert sorted(game.CHARS) == sorted(QUEST.tile_classes().values())


# ---------------------------------------------------------------------- BonkArena
def test_arena_upgrades_are_game_h_enum_and_the_menu_texts() -> None:
    enum = enum_members(ARENA_C / "game.h", "UPG_")
    texts = c_strings(ARENA_C / "gfx.c", "upgrade_names")
    upgrades = ARENA.manifest["upgrades"]
    assert len(upgrades) == len(enum) == len(texts) == defines(ARENA_C / "game.h")["NUM_UPGRADES"]
    for upgrade in upgrades:
        assert enum[f"UPG_{upgrade['name'].upper()}"] == upgrade["id"], upgrade
        assert texts[upgrade["id"]] == upgrade["text"], upgrade
        assert upgrade["text"].lower().startswith(upgrade["label"]), upgrade
    # data.json's per-upgrade level variables follow the enum: upgrades[id] is upg_<name>
    info = json.loads((ARENA.folder / "data.json").read_text())["info"]
    base = json.loads((ARENA.folder / "metabonk.json").read_text())["arrays"]["upgrades"]["address"]
    for upgrade in upgrades:
        assert info[f"upg_{upgrade['name']}"]["address"] == base + upgrade["id"]


def test_arena_game_code_constants_match_the_c_source() -> None:
    game = ARENA.module()
    assert game is not None
    header = defines(ARENA_C / "game.h")
    assert enum_members(ARENA_C / "game.h", "EK_")["EK_BRUTE"] == game.BRUTE
    assert header["MENU_DELAY"] == game.MENU_DELAY
    assert (
        tuple(
            float(header[k]) for k in ("PLAYER_XMIN", "PLAYER_YMIN", "PLAYER_XMAX", "PLAYER_YMAX")
        )
        == game.PLAYER_AREA
    )
    assert re.search(rf"u8 menu_options\[{game.MENU_OPTIONS}\];", (ARENA_C / "game.h").read_text())
    assert ARENA.manifest["arrays"]["menu_options"]["shape"] == [game.MENU_OPTIONS]
    assert game.Adapter.spec.n_options == game.MENU_OPTIONS
    names = {u["name"] for u in ARENA.manifest["upgrades"]}
    assert set(game.UPGRADE) == names and len(game.PRIORITY) == len(names)
    assert CELL == 8


# ---------------------------------------------------------------------- generated files
@pytest.mark.parametrize(
    "script, game",
    [(QUEST_C / "gen_integration.py", QUEST), (ARENA_C / "gen_json.py", ARENA)],
    ids=["BonkQuest", "BonkArena"],
)
def test_the_game_folders_json_is_what_the_generator_makes_from_the_c(
    script: Path, game: GameData
) -> None:
    """data.json (RAM addresses), metabonk.json, tiles.json, ...: regenerated from the C
    source, they are what the package ships (run the generator after changing the C)."""
    files: dict[str, Any] = load_script(script).build()
    assert {"data.json", "metabonk.json", "scenario.json", "tiles.json"} <= set(files)
    for name, content in files.items():
        shipped = json.loads((game.folder / name).read_text())
        assert shipped == json.loads(json.dumps(content)), (
            f"{game.folder / name} differs from what {script.relative_to(ROOT)} generates: "
            "run it after changing the C source"
        )
