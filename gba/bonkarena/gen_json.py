"""Write BonkArena's integration files from the state layout in game.h and the tiles in art.h.

    python3 gba/bonkarena/gen_json.py   # writes metabonk_gym/games/BonkArena-GbAdvance/*.json

The offsets below must match game.h (its _Static_asserts pin the same numbers), and the tile
numbers must match art.h. rom.gba comes from `make -C gba install`; rom.sha is written here
from it when it exists.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "metabonk_gym" / "games" / "BonkArena-GbAdvance"
BASE = 0x02000000

# name, offset in GameState, type
SCALARS = [
    ("magic", 0x00, "<u4"),
    ("frame", 0x04, "<u4"),
    ("seed", 0x08, "<u4"),
    ("cmd", 0x0C, "|u1"),
    ("cmd_arg", 0x0D, "|u1"),
    ("cmd_ack", 0x0E, "|u1"),
    ("cmd_count", 0x0F, "|u1"),
    ("hp", 0x10, "<u2"),
    ("max_hp", 0x12, "<u2"),
    ("xp", 0x14, "<u2"),
    ("xp_next", 0x16, "<u2"),
    ("level", 0x18, "<u2"),
    ("kills", 0x1A, "<u2"),
    ("time_frames", 0x1C, "<u4"),
    ("time_s", 0x20, "<u2"),
    ("wave", 0x22, "|u1"),
    ("enemies", 0x23, "|u1"),
    ("menu_open", 0x24, "|u1"),
    ("menu_cursor", 0x25, "|u1"),
    ("menu_option0", 0x26, "|u1"),
    ("menu_option1", 0x27, "|u1"),
    ("menu_option2", 0x28, "|u1"),
    ("won", 0x29, "|u1"),
    ("lost", 0x2A, "|u1"),
    ("invuln", 0x2B, "|u1"),
    ("player_x", 0x2C, "<i2"),
    ("player_y", 0x2E, "<i2"),
    ("player_fx", 0x30, "|u1"),
    ("player_fy", 0x31, "|u1"),
    ("player_facing", 0x32, "|u1"),
    ("player_moving", 0x33, "|u1"),
    ("rng", 0x34, "<u4"),
    ("spawn_timer", 0x38, "<u2"),
    ("fire_timer", 0x3A, "<u2"),
    ("menu_timer", 0x3C, "<u2"),
    ("sec_frames", 0x3E, "|u1"),
    ("gems", 0x3F, "|u1"),
    ("upg_damage", 0x40, "|u1"),
    ("upg_firerate", 0x41, "|u1"),
    ("upg_speed", 0x42, "|u1"),
    ("upg_maxhp", 0x43, "|u1"),
    ("upg_heal", 0x44, "|u1"),
    ("upg_magnet", 0x45, "|u1"),
    ("upg_multi", 0x46, "|u1"),
    ("upg_armor", 0x47, "|u1"),
    ("damage", 0x48, "<u2"),
    ("fire_cooldown", 0x4A, "<u2"),
    ("player_speed", 0x4C, "<u2"),
    ("pickup_radius", 0x4E, "<u2"),
    ("proj_count", 0x50, "|u1"),
    ("armor", 0x51, "|u1"),
    ("damage_taken", 0x52, "<u2"),
    ("shots", 0x54, "<u2"),
    ("projectiles", 0x56, "|u1"),
]

# name, offset, element type, length
ARRAYS = [
    ("enemy_x", 0x058, "<i2", 24),
    ("enemy_y", 0x088, "<i2", 24),
    ("enemy_hp", 0x0B8, "<i2", 24),
    ("enemy_active", 0x0E8, "|u1", 24),
    ("enemy_kind", 0x100, "|u1", 24),
    ("enemy_flash", 0x148, "|u1", 24),
    ("proj_x", 0x160, "<i2", 16),
    ("proj_y", 0x180, "<i2", 16),
    ("proj_life", 0x200, "|u1", 16),
    ("gem_x", 0x210, "<i2", 32),
    ("gem_y", 0x250, "<i2", 32),
    ("gem_value", 0x290, "|u1", 32),
    ("upgrades", 0x040, "|u1", 8),
    ("menu_options", 0x026, "|u1", 3),
]

INFO = ["hp", "max_hp", "xp", "xp_next", "level", "kills", "time_s", "time_frames", "enemies",
        "menu_open", "menu_cursor", "won", "lost", "wave", "player_x", "player_y", "invuln",
        "gems"]

ACTIONS = [[], ["UP"], ["DOWN"], ["LEFT"], ["RIGHT"], ["UP", "LEFT"], ["UP", "RIGHT"],
           ["DOWN", "LEFT"], ["DOWN", "RIGHT"], ["A"]]

# art.h
BG_TILES = {0: "empty", 1: "floor", 2: "floor", 3: "floor", 4: "floor", 5: "floor", 6: "wall",
            7: "wall", 8: "wall", 9: "hud"}
BG_TILES.update({t: "hud" for t in range(10, 19)})          # XP bar
BG_TILES.update({t: "text" for t in range(32, 32 + 54)})    # font
BG_TILES.update({t: "text" for t in range(96, 96 + 54)})    # font on the HUD colour
OBJ_TILES = {}
for base, cls in ((0, "player"), (8, "enemy"), (16, "enemy"), (24, "enemy")):
    OBJ_TILES.update({t: cls for t in range(base, base + 8)})
OBJ_TILES.update({32: "projectile", 33: "gem", 34: "gem"})


def dump(name: str, obj) -> None:
    (OUT / name).write_text(json.dumps(obj, indent=2) + "\n")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    dump("data.json", {"info": {n: {"address": BASE + off, "type": t} for n, off, t in SCALARS}})
    dump("scenario.json", {
        "done": {"condition": "any", "variables": {
            "won": {"op": "equal", "reference": 1},
            "lost": {"op": "equal", "reference": 1}}},
        # per frame survived 1/60 (1 per second), 1 per kill, -0.1 per HP lost
        "reward": {"variables": {
            "time_frames": {"reward": 1 / 60},
            "kills": {"reward": 1.0},
            "hp": {"reward": 0.1}}},
    })
    dump("metadata.json", {
        "default_state": "start",
        "default_player_state": ["start"],
        "description": "BonkArena: a survivor arena for the GBA, written for metabonk-gym. Dodge "
                       "five waves of enemies for 5:00 while the weapon fires by itself; XP gems "
                       "give level-ups with a menu of 3 upgrades.",
    })
    scal = {n: (off, t) for n, off, t in SCALARS}
    dump("metabonk.json", {
        "name": "BonkArena",
        "discrete_actions": ACTIONS,
        "info": INFO,
        "arrays": {n: {"address": BASE + off, "type": t, "shape": [k]} for n, off, t, k in ARRAYS},
        "starts": {"start": {"cmd": "new_game"},
                   **{f"wave{n}": {"cmd": "warp", "arg": n} for n in range(1, 6)}},
        "won": "won",
        "lost": "lost",
        "player": ["player_x", "player_y"],
        "screen": {"width": 240, "height": 160, "arena": [8, 16, 232, 152], "scroll": [0, 0]},
        "state_struct": {"address": BASE, "size": 0x2B0},
    })
    assert all(n in scal for n in INFO)
    dump("tiles.json", {
        "charblock": 0,
        "backgrounds": {"arena": {"bg": 1, "screenblock": 29}, "hud": {"bg": 0, "screenblock": 28}},
        "classes": {str(k): v for k, v in sorted(BG_TILES.items())},
        "sprites": {str(k): v for k, v in sorted(OBJ_TILES.items())},
        "sprite_sizes": {"player": 16, "enemy": 16, "projectile": 8, "gem": 8},
        "enemy_kinds": {"8": "slime", "16": "bat", "24": "brute"},
    })
    rom = OUT / "rom.gba"
    if rom.exists():
        (OUT / "rom.sha").write_text(hashlib.sha1(rom.read_bytes()).hexdigest() + "\n")


if __name__ == "__main__":
    main()
