"""Write BonkArena's integration files from the state struct in game.h and the tiles in art.h.

    python3 gba/bonkarena/gen_json.py   # writes metabonk_gym/games/BonkArena/*.json

The struct layout is read from game.h itself (fields, C alignment rules) and checked against
the /* 0x... */ offset comments there; the C side pins the same offsets with _Static_assert.
Scalars go to data.json; menu_options[] and upgrades[] also appear as one scalar per element
(menu_option0.., upg_damage..); the other arrays go to metabonk.json "arrays". The upgrade enum
(game.h UPG_*) and the menu's upgrade texts (gfx.c upgrade_names) go to metabonk.json "upgrades"
(tests/test_game_constants.py checks them against the C source). The tile numbers below must
match art.h. rom.gba comes from `make -C gba install`; rom.sha is written here from
it when it exists.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
OUT = REPO / "metabonk_gym" / "games" / "BonkArena"
BASE = 0x02000000

CTYPES = {"u8": "|u1", "s8": "|i1", "u16": "<u2", "s16": "<i2", "u32": "<u4", "s32": "<i4"}
HEADER = [
    ("magic", 0x0, "<u4"),
    ("frame", 0x4, "<u4"),
    ("seed", 0x8, "<u4"),
    ("cmd", 0xC, "|u1"),
    ("cmd_arg", 0xD, "|u1"),
    ("cmd_ack", 0xE, "|u1"),
    ("cmd_count", 0xF, "|u1"),
]  # BonkHeader, gba/common/gba.h


def parse_upgrades(header: Path, gfx: Path) -> list[dict]:
    """game.h's UPG_* enum with gfx.c's menu text of each: [{"id", "name", "label", "text"}].

    `name` is the enum name in lower case (damage, firerate, ...), `text` the menu's words
    ("FIRE RATE +"), `label` those words without the amount, in lower case ("fire rate").
    """
    enum = header.read_text()
    enum = enum[enum.index("/* Upgrade ids") :]
    enum = enum[: enum.index("};")]
    ids = [(int(v), n.lower()) for n, v in re.findall(r"\bUPG_(\w+) = (\d+)", enum)]
    table = re.search(r"upgrade_names\[NUM_UPGRADES\] = \{(.*?)\};", gfx.read_text(), re.S)
    if table is None:
        raise SystemExit("gfx.c: cannot find upgrade_names[NUM_UPGRADES]")
    texts = re.findall(r'"([^"]*)"', table.group(1))
    if sorted(i for i, _ in ids) != list(range(len(texts))):
        raise SystemExit(f"game.h UPG_* ids {ids} do not match gfx.c's {len(texts)} upgrade names")
    return [
        {
            "id": i,
            "name": name,
            "label": re.sub(r"\s*(\+\d*|\d+%)$", "", texts[i]).lower(),
            "text": texts[i],
        }
        for i, name in sorted(ids)
    ]


UPGRADES = parse_upgrades(HERE / "game.h", HERE / "gfx.c")
UPGRADE_NAMES = [u["name"] for u in UPGRADES]


def parse_state(header: Path) -> tuple[list, list, int]:
    """(scalars, arrays, size) of GameState: [(name, offset, type)], [(name, offset, type, n)]."""
    text = header.read_text()
    body = text[text.index("typedef struct {", text.index("#define MAX_GEMS")) :]
    body = body[: body.index("} GameState;")]
    consts = {m[0]: int(m[1]) for m in re.findall(r"#define (\w+) (\d+)\b", text)}
    scalars, arrays, off = list(HEADER), [], 0x10
    for line in body.splitlines()[2:]:  # after "typedef struct {" and the BonkHeader line
        m = re.match(r"\s*(\w+) (\w+)(?:\[(\w+)\])?;\s*/\* (0x[0-9A-Fa-f]+)", line)
        if not m:
            if line.strip():
                raise SystemExit(f"game.h: cannot read struct line {line!r}")
            continue
        ctype, name, count, comment = m.groups()
        size = int(CTYPES[ctype][-1])
        off = (off + size - 1) // size * size  # natural alignment
        if off != int(comment, 16):
            raise SystemExit(f"game.h: {name} is at {off:#x}, its comment says {comment}")
        if count is None:
            if not name.startswith("pad"):
                scalars.append((name, off, CTYPES[ctype]))
            off += size
            continue
        n = int(consts.get(count, count))
        arrays.append((name, off, CTYPES[ctype], n))
        if name == "menu_options":
            scalars += [(f"menu_option{i}", off + i, "|u1") for i in range(n)]
        if name == "upgrades":
            scalars += [(f"upg_{u}", off + i, "|u1") for i, u in enumerate(UPGRADE_NAMES)]
        off += size * n
    total = int(re.search(r"sizeof\(GameState\) == (0x[0-9A-Fa-f]+)", text).group(1), 16)
    if (off + 3) // 4 * 4 != total:
        raise SystemExit(f"game.h: struct ends at {off:#x}, the size check says {total:#x}")
    return scalars, arrays, total


SCALARS, ARRAYS, STATE_SIZE = parse_state(HERE / "game.h")

INFO = [
    "hp",
    "max_hp",
    "xp",
    "xp_next",
    "level",
    "kills",
    "time_s",
    "time_frames",
    "enemies",
    "menu_open",
    "menu_cursor",
    "won",
    "lost",
    "wave",
    "player_x",
    "player_y",
    "invuln",
    "gems",
]

ACTIONS = [
    [],
    ["UP"],
    ["DOWN"],
    ["LEFT"],
    ["RIGHT"],
    ["UP", "LEFT"],
    ["UP", "RIGHT"],
    ["DOWN", "LEFT"],
    ["DOWN", "RIGHT"],
    ["A"],
]

# art.h: background tiles in char block 0 (both backgrounds use it)
BG_TILES = {0: "empty", 1: "floor", 2: "floor", 3: "floor", 4: "floor", 5: "floor"}
BG_TILES.update({6: "wall", 7: "wall", 8: "wall", 9: "hud"})
BG_TILES.update({t: "hud" for t in range(10, 19)})  # XP bar, 0..8 columns filled
BG_TILES.update({19: "floor", 20: "floor", 21: "floor"})  # 16x16 floor slabs, other quarters
BG_TILES.update({t: "text" for t in range(32, 32 + 54)})  # font, transparent
BG_TILES.update({t: "text" for t in range(96, 96 + 54)})  # font on the HUD colour
OBJ_TILES = {}
for base, cls in ((0, "player"), (8, "enemy"), (16, "enemy"), (24, "enemy")):
    OBJ_TILES.update({t: cls for t in range(base, base + 8)})
OBJ_TILES.update({32: "projectile", 33: "gem", 34: "gem"})


# The state vector (`obs_type="state"`): the player, the level-up menu and the nearest entities.
STATE_VECTOR = {
    "origin": ["player_x", "player_y"],
    "variables": [
        {"name": "player_x", "offset": 120, "scale": 120},
        {"name": "player_y", "offset": 80, "scale": 80},
        {"name": "hp", "scale": "max_hp"},
        {"name": "menu_open"},
        {"name": "menu_cursor", "one_hot": 3},
    ],
    "entities": [
        {
            "name": "enemies",
            "x": "enemy_x",
            "y": "enemy_y",
            "present": "enemy_active",
            "nearest": 8,
            "scale": 64,
            "extras": [{"array": "enemy_kind", "equals": 2}],
        },
        {
            "name": "gems",
            "x": "gem_x",
            "y": "gem_y",
            "present": "gem_value",
            "nearest": 2,
            "scale": 64,
        },
    ],
}


def build() -> dict[str, object]:
    """The JSON files, by name, as this script writes them (tests compare them with the package)."""
    files: dict[str, object] = {}

    def dump(name: str, obj: object) -> None:
        files[name] = obj

    dump("data.json", {"info": {n: {"address": BASE + off, "type": t} for n, off, t in SCALARS}})
    dump(
        "scenario.json",
        {
            "done": {
                "condition": "any",
                "variables": {
                    "won": {"op": "equal", "reference": 1},
                    "lost": {"op": "equal", "reference": 1},
                },
            },
            # per frame survived 1/60 (1 per second), 1 per kill, -0.1 per HP lost
            "reward": {
                "variables": {
                    "time_frames": {"reward": 1 / 60},
                    "kills": {"reward": 1.0},
                    "hp": {"reward": 0.1},
                }
            },
        },
    )
    dump(
        "metadata.json",
        {
            "default_state": "start",
            "default_player_state": ["start"],
            "description": "BonkArena: a survivor arena for the GBA, written for metabonk-gym. Dodge "
            "five waves of enemies for 5:00 while the weapon fires by itself; XP gems "
            "give level-ups with a menu of 3 upgrades.",
        },
    )
    scal = {n: (off, t) for n, off, t in SCALARS}
    dump(
        "metabonk.json",
        {
            "name": "BonkArena",
            "discrete_actions": ACTIONS,
            "info": INFO,
            "arrays": {
                n: {"address": BASE + off, "type": t, "shape": [k]} for n, off, t, k in ARRAYS
            },
            "starts": {
                "start": {"cmd": "new_game"},
                **{f"wave{n}": {"cmd": "warp", "arg": n} for n in range(1, 6)},
            },
            "won": "won",
            "lost": "lost",
            "player": ["player_x", "player_y"],
            "screen": {"width": 240, "height": 160, "arena": [8, 16, 232, 152], "scroll": [0, 0]},
            "state_struct": {"address": BASE, "size": STATE_SIZE},
            "state_vector": STATE_VECTOR,
            "upgrades": UPGRADES,
        },
    )
    assert all(n in scal for n in INFO)
    dump(
        "tiles.json",
        {
            "charblock": 0,
            # BG1: the arena (rows 1..18), the HUD (row 0) and the XP bar (row 19), always on.
            # BG0: the level-up menu and the end box, on only while shown (menu_open/won/lost).
            "backgrounds": {
                "arena": {"bg": 1, "screenblock": 29, "rows": [0, 20], "cols": [0, 30]},
                "box": {"bg": 0, "screenblock": 28, "rows": [5, 16], "cols": [3, 27]},
            },
            "tile_px": 8,
            "empty": "empty",
            "classes": {str(k): v for k, v in sorted(BG_TILES.items())},
            "sprites": {str(k): v for k, v in sorted(OBJ_TILES.items())},
            "sprite_sizes": {"player": 16, "enemy": 16, "projectile": 8, "gem": 8},
            "enemy_kinds": {"8": "slime", "16": "bat", "24": "brute"},
            # OAM slots: 0 player, 1..16 projectiles, 17..40 enemies, 41..72 gems
            "oam": {"player": [0, 1], "projectile": [1, 17], "enemy": [17, 41], "gem": [41, 73]},
        },
    )
    return files


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, obj in build().items():
        (OUT / name).write_text(json.dumps(obj, indent=2) + "\n")
    rom = OUT / "rom.gba"
    if rom.exists():
        (OUT / "rom.sha").write_text(hashlib.sha1(rom.read_bytes()).hexdigest() + "\n")


if __name__ == "__main__":
    main()
