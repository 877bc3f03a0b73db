"""Semantic classes of screen cells (floor, wall, door, key, enemy, player, ...) from an
integration's `tiles.json`.

Why: a token says "this picture"; a class says what it means for play. Integrations author
`tiles.json` with `charblock` (the BG char block the classes refer to), `classes` (BG tile
number -> class name) and `sprites` (OBJ tile number -> class name); both bundled games have
them. Class ids are shared across games: the names in `CLASS_NAMES` keep their ids everywhere,
other names follow in sorted order; id 0 is "none" (nothing known about the cell).

>>> sem = SemanticClasses.from_tiles_json({"charblock": 0, "classes": {"1": "floor", "3": "wall"},
...                                        "sprites": {"0": "player"}})
>>> sem.name(sem.bg[3]), sem.name(sem.obj[0]), sem.name(sem.bg[2])
('wall', 'player', 'none')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from metabonk_gym.contract import HasRam
from metabonk_gym.errors import IntegrationError

#: Classes with fixed ids in every game (index = id).
CLASS_NAMES: tuple[str, ...] = (
    "none",
    "empty",
    "floor",
    "wall",
    "water",
    "door",
    "door_locked",
    "key",
    "chest",
    "chest_open",
    "treasure",
    "heart",
    "item",
    "gem",
    "npc",
    "enemy",
    "player",
    "projectile",
    "hud",
    "text",
    "dialogue",
)

#: Classes the player can walk onto (used for "open directions" and path hints).
PASSABLE: frozenset[str] = frozenset(
    {"empty", "floor", "door", "key", "heart", "treasure", "item", "gem"}
)

#: Characters of the ASCII map, by class; unknown classes use their first letter.
CHARS: dict[str, str] = {
    "none": " ",
    "empty": " ",
    "floor": ".",
    "wall": "#",
    "water": "~",
    "door": "D",
    "door_locked": "L",
    "key": "k",
    "chest": "c",
    "chest_open": "o",
    "treasure": "T",
    "heart": "h",
    "item": "i",
    "gem": "*",
    "npc": "N",
    "enemy": "E",
    "player": "@",
    "projectile": "-",
    "hud": "=",
    "text": "=",
    "dialogue": "=",
}


@dataclass(frozen=True)
class SemanticClasses:
    """Lookup tables: BG tile number -> class id (`bg`, for `charblock`), OBJ tile -> class id."""

    names: tuple[str, ...]
    charblock: int
    bg: np.ndarray  # int32 (1024,)
    obj: np.ndarray  # int32 (1024,)

    @classmethod
    def from_tiles_json(cls, tiles: Mapping[str, Any]) -> SemanticClasses:
        """The tables of a `tiles.json` ({"classes": {"tile": "name"}, "sprites": ..., "charblock":
        0..3}); one of another structure is an `IntegrationError` saying what it needs."""
        try:
            classes = {int(k): str(v) for k, v in (tiles.get("classes") or {}).items()}
            sprites = {int(k): str(v) for k, v in (tiles.get("sprites") or {}).items()}
            charblock = int(tiles.get("charblock", 0))
        except (AttributeError, TypeError, ValueError) as exc:
            raise IntegrationError(
                f'tiles.json: {exc}; it needs "classes" (and "sprites") mapping tile numbers '
                'to class names, e.g. {"classes": {"3": "wall"}}, and a whole-number "charblock"'
            ) from None
        extra = sorted(set(classes.values()) | set(sprites.values()) - set(CLASS_NAMES))
        names = CLASS_NAMES + tuple(n for n in extra if n not in CLASS_NAMES)
        index = {n: i for i, n in enumerate(names)}
        bg = np.zeros(1024, np.int32)
        obj = np.zeros(1024, np.int32)
        for table, mapping, what in ((bg, classes, "classes"), (obj, sprites, "sprites")):
            for tile, name in mapping.items():
                if not 0 <= tile < 1024:
                    raise IntegrationError(
                        f"tiles.json {what}: tile number {tile} is outside 0..1023"
                    )
                table[tile] = index[name]
        return cls(names, charblock, bg, obj)

    @classmethod
    def for_env(cls, env: Any) -> SemanticClasses | None:
        """The classes of a GBA env's integration, or None when it has no `tiles.json`."""
        base = env.unwrapped
        tiles = base.integration.tiles() if isinstance(base, HasRam) else None
        return cls.from_tiles_json(tiles) if tiles else None

    @property
    def bg_lut(self) -> np.ndarray:
        """`bg` with a leading 0, indexed by tile number + 1 (so -1, no tile, maps to "none")."""
        lut = self.__dict__.get("_bg_lut")
        if lut is None:
            lut = np.concatenate([[0], self.bg]).astype(np.int32)
            object.__setattr__(self, "_bg_lut", lut)
        return lut

    def id(self, name: str) -> int:
        """The id of a class name (0 when this game does not use it)."""
        try:
            return self.names.index(name)
        except ValueError:
            return 0

    def name(self, class_id: int) -> str:
        return self.names[int(class_id)] if 0 <= int(class_id) < len(self.names) else "none"

    def cells(
        self,
        tile_index: np.ndarray,
        charblock: np.ndarray,
        sprites: np.ndarray | None = None,
        sprite_cells: np.ndarray | None = None,
    ) -> np.ndarray:
        """Class ids (rows, cols) int32 of decoded cells (`vram.ScreenTiles` fields); with
        `sprites` and `sprite_cells`, sprites of a known class cover the background."""
        bg = self.bg_lut[tile_index + 1]  # tile_index -1 (nothing) -> 0
        if (charblock != self.charblock).any():
            bg = np.where(charblock == self.charblock, bg, 0)
        out = bg
        if sprites is not None and sprite_cells is not None and len(sprites):
            sprite_class = np.concatenate([[0], self.obj[sprites[:, 5] & 0x3FF]]).astype(np.int32)
            over = sprite_class[sprite_cells + 1]
            out = np.where(over != 0, over, bg)
        return out
