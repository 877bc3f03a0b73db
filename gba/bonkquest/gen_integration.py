"""Write BonkQuest's integration files from the C sources, so the addresses cannot drift.

Reads the GameState struct in game.h (natural alignment, the types u8/u16/u32/s8/s16/s32 and
the constants #defined there) and the BG tile enum in gfx.c, then writes data.json,
metabonk.json, scenario.json, metadata.json, tiles.json and rom.sha into
metabonk_gym/games/BonkQuest/, and copies gba/build/bonkquest.gba there as rom.gba
(what `make -C gba install` does) when the build is newer. Run after building:

    make -C gba build/bonkquest.gba && python3 gba/bonkquest/gen_integration.py
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PKG = REPO / "metabonk_gym" / "games" / "BonkQuest"
EWRAM = 0x02000000
#: game.h ARG_RIDDLES: the cmd_arg bit that starts the riddle quest.
RIDDLES = 0x80

CTYPES = {
    "u8": (1, "|u1"),
    "s8": (1, "|i1"),
    "u16": (2, "<u2"),
    "s16": (2, "<i2"),
    "u32": (4, "<u4"),
    "s32": (4, "<i4"),
}
HEADER = [
    ("magic", "u32"),
    ("frame", "u32"),
    ("seed", "u32"),
    ("cmd", "u8"),
    ("cmd_arg", "u8"),
    ("cmd_ack", "u8"),
    ("cmd_count", "u8"),
]


def parse_layout(header: str) -> tuple[dict[str, dict], int]:
    """Field name -> {offset, type, shape} for GameState, and the struct size."""
    defines = {m[1]: int(m[2]) for m in re.finditer(r"#define (\w+) (\d+)\b", header)}
    body = header[header.index("typedef struct {\n    BonkHeader hdr;") :]
    body = body[: body.index("} GameState;")]
    fields: dict[str, dict] = {}
    off = 0
    for name, ctype in HEADER:
        fields[name] = {"offset": off, "ctype": ctype, "shape": []}
        off += CTYPES[ctype][0]
    for line in body.splitlines()[2:]:
        line = line.split("/*")[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"(u8|s8|u16|s16|u32|s32) (.+);", line)
        assert m, f"cannot parse: {line!r}"
        size = CTYPES[m[1]][0]
        for decl in m[2].split(","):
            decl = decl.strip()
            name = decl.split("[")[0]
            shape = [int(d) if d.isdigit() else defines[d] for d in re.findall(r"\[(\w+)\]", decl)]
            off = (off + size - 1) // size * size
            fields[name] = {"offset": off, "ctype": m[1], "shape": shape}
            n = 1
            for d in shape:
                n *= d
            off += size * n
    return fields, (off + 3) // 4 * 4


def parse_bg_tiles(gfx: str) -> dict[str, int]:
    body = gfx[gfx.index("enum {\n    G_BLANK = 0,") :]
    body = body[: body.index("};")]
    names = re.findall(r"\b(G_\w+)", body)
    return {n: i for i, n in enumerate(names)}


#: Class names of game.h's T_* tiles where the name is not the enum's in lower case (the
#: semantic class names are shared by every game: `metabonk_gym.wrappers.semantic`).
TILE_RENAMES = {"T_DOOR_OPEN": "door"}


def parse_tile_classes(header: str) -> dict[int, str]:
    """game.h's semantic tile enum (T_FLOOR = 0, ...) as id -> class name."""
    body = header[header.index("/* Semantic tile ids") :]
    body = body[: body.index("};")]
    found = {int(v): n for n, v in re.findall(r"\b(T_\w+) = (\d+)", body)}
    assert sorted(found) == list(range(len(found))), found
    return {i: TILE_RENAMES.get(n, n[2:].lower()) for i, n in sorted(found.items())}


BG_CLASS = {
    "G_BLANK": "empty",
    "G_FLOOR_A": "floor",
    "G_FLOOR_B": "floor",
    "G_WALL_FACE": "wall",
    "G_WALL_TOP": "wall",
    "G_WALL_VOID": "wall",
    "G_DOOR_LOCKED": "door_locked",
    "G_DOOR_OPEN": "door",
    "G_KEY": "key",
    "G_CHEST": "chest",
    "G_CHEST_OPEN": "chest_open",
    "G_TREASURE": "treasure",
    "G_NPC": "npc",
    "G_WATER_A": "water",
    "G_WATER_B": "water",
    "G_HEART": "heart",
    "G_HUD_HEART": "hud",
    "G_HUD_HEART_EMPTY": "hud",
    "G_HUD_KEY": "hud",
    "G_DLG_CORNER": "dialogue",
    "G_DLG_TOP": "dialogue",
    "G_DLG_LEFT": "dialogue",
    # a shared class: a new one would renumber the semantic classes of every BonkQuest model
    "G_MARK": "item",
}
SPRITES = {
    0: "player",
    1: "player",
    2: "player",
    3: "player",
    4: "player",
    5: "player",
    8: "enemy",
    9: "enemy",
    10: "enemy",
    11: "enemy",
    12: "enemy",
    13: "enemy",
}
INFO = [
    "room",
    "player_x",
    "player_y",
    "facing",
    "hp",
    "max_hp",
    "keys",
    "score",
    "chests",
    "quest_stage",
    "rooms_visited",
    "won",
    "lost",
    "dialogue_open",
    "invuln",
    "talked",
    "hits",
    "num_enemies",
    "key_x",
    "key_y",
    "exit_x",
    "exit_y",
    "npc_x",
    "npc_y",
    "visited_mask",
    "doors_open",
]
ARRAYS = [
    "room_tiles",
    "enemy_x",
    "enemy_y",
    "enemy_active",
    "enemy_type",
    "enemy_dir",
    "enemy_timer",
    "enemy_period",
    "enemy_ax",
    "enemy_ay",
    "enemy_bx",
    "enemy_by",
]


def build() -> dict[str, object]:
    """The JSON files, by name, as this script writes them (tests compare them with the package)."""
    header = (HERE / "game.h").read_text()
    fields, size = parse_layout(header)
    assert size == 0x314, hex(size)  # game.h static-asserts the same size
    assert fields["room_tiles"]["offset"] == 0xBC and fields["enemy_x"]["offset"] == 0x64
    return {
        "data.json": data_json(fields),
        "metabonk.json": metabonk_json(fields, header),
        "scenario.json": SCENARIO,
        "metadata.json": METADATA,
        "tiles.json": tiles_json(),
    }


def data_json(fields: dict[str, dict]) -> dict[str, object]:
    """data.json: every scalar field of GameState (no arrays, no padding) as a RAM variable."""
    variables = {}
    for name, f in fields.items():
        if f["shape"] or name.startswith("pad"):
            continue
        variables[name] = {"address": EWRAM + f["offset"], "type": CTYPES[f["ctype"]][1]}
    return {"info": variables}


def metabonk_json(fields: dict[str, dict], header: str) -> dict[str, object]:
    """metabonk.json: actions, info names, RAM arrays, named starts, the contract's variables
    and the semantic tile classes."""
    arrays = {
        n: {
            "address": EWRAM + fields[n]["offset"],
            "type": CTYPES[fields[n]["ctype"]][1],
            "shape": fields[n]["shape"],
        }
        for n in ARRAYS
    }
    return {
        "name": "BonkQuest",
        "discrete_actions": [[], ["UP"], ["DOWN"], ["LEFT"], ["RIGHT"], ["A"]],
        "info": INFO,
        "arrays": arrays,
        "starts": {
            "start": {"cmd": "new_game", "arg": 0},
            **{f"room{n}": {"cmd": "warp", "arg": n} for n in range(1, 6)},
            # the riddle quest (game.h ARG_RIDDLES): the same starts with the mode bit set
            "riddles": {"cmd": "new_game", "arg": RIDDLES},
            **{f"riddles_room{n}": {"cmd": "warp", "arg": RIDDLES | n} for n in range(1, 6)},
        },
        "won": "won",
        "lost": "lost",
        "player": ["player_x", "player_y"],
        "tile_classes": {str(k): v for k, v in parse_tile_classes(header).items()},
    }


#: scenario.json: the episode ends on a win or a loss; the default reward.
SCENARIO = {
    "done": {
        "condition": "any",
        "variables": {
            "won": {"op": "equal", "reference": 1},
            "lost": {"op": "equal", "reference": 1},
        },
    },
    "reward": {
        "variables": {
            "score": {"reward": 0.01},
            "rooms_visited": {"reward": 0.5},
            "hp": {"reward": 0.1, "penalty": 0.1},
            "won": {"reward": 5.0},
            "lost": {"reward": -1.0},
        }
    },
}
METADATA = {
    "default_state": "room1",
    "default_player_state": ["room1"],
    "description": "BonkQuest: a top-down adventure on a tile grid. Find keys, open locked "
    "doors, hear the sage's hint, open chests, dodge patrolling enemies and "
    "reach the golden treasure in room 5. Bundled with metabonk-gym.",
}


def _define(source: str, name: str) -> int:
    """The number `#define NAME N` gives in `source`."""
    found = re.search(rf"#define {name} (\d+)", source)
    assert found, f"no #define {name}"
    return int(found[1])


def tiles_json() -> dict[str, object]:
    """tiles.json: the BG layers, each BG tile's class (gfx.c's enum, the font as text) and the
    sprites'."""
    gfx = (HERE / "gfx.c").read_text()
    g = parse_bg_tiles(gfx)
    font_base = _define(gfx, "FONT_BASE")
    glyphs = _define((REPO / "gba" / "common" / "font.h").read_text(), "FONT_GLYPHS")
    classes = {str(i): BG_CLASS[n] for n, i in g.items()}
    classes.update({str(font_base + i): "text" for i in range(glyphs)})
    return {
        "charblock": 0,
        "bg": {
            "room": {"bg": 1, "screenblock": 31, "priority": 1},
            "overlay": {
                "bg": 0,
                "screenblock": 30,
                "priority": 0,
                "rows": "0: HUD bar; 14-19: dialogue box when open",
            },
        },
        "font_base": font_base,
        "classes": classes,
        "obj_charblock": 4,
        "obj_mapping": "1d",
        "sprites": {str(k): v for k, v in SPRITES.items()},
        "oam": {"0": "player", "1-8": "enemies (slot i+1 = enemy_x[i])"},
        "notes": "Keys, chests, the sage, hearts and the treasure are BG tiles of the room "
        "layer; the player and the enemies are 8x8 OBJ sprites.",
    }


def main() -> None:
    for name, obj in build().items():
        (PKG / name).write_text(json.dumps(obj, indent=2) + "\n")
    built, installed = REPO / "gba" / "build" / "bonkquest.gba", PKG / "rom.gba"
    if built.exists() and (not installed.exists() or built.read_bytes() != installed.read_bytes()):
        shutil.copyfile(built, installed)
    rom = installed.read_bytes()
    (PKG / "rom.sha").write_text(hashlib.sha1(rom).hexdigest() + "\n")
    print(f"wrote {PKG.relative_to(REPO)}: {len(build())} JSON files")


if __name__ == "__main__":
    main()
