"""Tile classes for a game of your own: the 8x8 background tiles it shows, grouped, named, and
whether the player can walk on them.

`TileCollector.observe(machine)` reads the mode-0 backgrounds the game shows (DISPCNT, BGnCNT, the
tilemaps and tile graphics in VRAM, the palette) and notes the tile on top at every screen cell;
with the player's cell (data.json `player_x`/`player_y` in tiles) it also notes, per tile, how
often the player stepped onto it and how often a held direction left the player standing in
front of it. `finish` groups tiles that look alike (at most `SIMILAR` pixels differ, same
colours), writes a contact sheet PNG with the group ids and `tile_groups.json`; `label_tiles`
turns `ID=CLASS` names into `tiles.json` (classes by tile id, walkability by class).

>>> a = np.zeros(64, np.uint16); b = a.copy(); b[:3] = 1
>>> group_tiles({1: a, 2: b, 3: a + 5})
{1: 0, 2: 0, 3: 1}
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.errors import IntegrateError
from metabonk_gym.integrate.folder import start_state
from metabonk_gym.integrate.machine import Machine
from metabonk_gym.integrate.script import Step, parse_script
from metabonk_gym.utils import atomic_write_bytes, atomic_write_text

#: Tiles whose pixels differ in at most this many of 64 places (same colours) share a group.
SIMILAR = 6
#: A walk is "walkable" when at least this share of the tries to step onto it worked.
WALKABLE_SHARE = 0.5
#: Looks without a move after which the player is taken to be out of play.
STUCK = 8
DIRS = {"UP": (0, -1), "DOWN": (0, 1), "LEFT": (-1, 0), "RIGHT": (1, 0)}
_BITS = {"RIGHT": 4, "LEFT": 5, "UP": 6, "DOWN": 7}


def random_walk(moves: int = 200, hold: int = 8, seed: int = 0) -> list[Step]:
    """A seeded random walk: each move holds one direction for `hold` frames (the default probe
    of `integrate tiles`)."""
    rng = random.Random(seed)
    names = list(DIRS)
    return [(1 << _BITS[rng.choice(names)], hold) for _ in range(moves)]


def group_tiles(pixels: dict[int, np.ndarray]) -> dict[int, int]:
    """Tile id -> group id: greedy, in id order, a tile joins the first group whose first tile
    differs from it in at most `SIMILAR` pixels (colours compared exactly)."""
    groups: list[tuple[int, np.ndarray]] = []
    out: dict[int, int] = {}
    for tile in sorted(pixels):
        p = pixels[tile]
        for gid, (_, ref) in enumerate(groups):
            if int((ref != p).sum()) <= SIMILAR:
                out[tile] = gid
                break
        else:
            out[tile] = len(groups)
            groups.append((tile, p))
    return out


@dataclass
class TileCollector:
    """Collects the background tiles a game shows (see the module docstring).

    Args:
        player: (x, y) variables of the player's cell, as (address, type) each, or None.
    """

    player: tuple[tuple[int, str], tuple[int, str]] | None = None
    pixels: dict[int, np.ndarray] = field(default_factory=dict)  # tile id -> 64 RGB555 colours
    seen: dict[int, int] = field(default_factory=dict)  # tile id -> cells seen showing it
    onto: dict[int, int] = field(default_factory=dict)  # tile id -> steps onto it
    blocked: dict[int, int] = field(default_factory=dict)  # tile id -> held moves it stopped
    charblock: int = 0
    _last: tuple[int, int] | None = None
    _grid: np.ndarray | None = None
    _still: int = 0  # looks since the player last moved

    def screen_tiles(self, machine: Machine) -> np.ndarray:
        """The tile id on top at each of the 20x30 screen cells (-1: nothing drawn)."""
        io, pal, vram = machine.core.read_regions(
            [(0x04000000, 0x60), (0x05000000, 0x200), (0x06000000, 0x10000)]
        )
        io16 = np.frombuffer(io.tobytes(), "<u2")
        palette = np.frombuffer(pal.tobytes(), "<u2")
        dispcnt = int(io16[0])
        if dispcnt & 7 != 0:
            raise IntegrateError(
                f"the game shows video mode {dispcnt & 7}: tile classes need mode 0 (tile backgrounds)"
            )
        layers = []
        for bg in range(4):
            if not dispcnt >> (8 + bg) & 1:
                continue
            cnt = int(io16[4 + bg])
            layers.append(
                (cnt & 3, bg, cnt, int(io16[8 + 2 * bg]) & 0x1FF, int(io16[9 + 2 * bg]) & 0x1FF)
            )
        top = np.full((20, 30), -1, np.int32)
        rows, cols = np.arange(20)[:, None], np.arange(30)[None, :]
        for _, _bg, cnt, hofs, vofs in sorted(layers, reverse=True):  # lowest priority drawn first
            size = 64 if cnt & 0x80 else 32  # 256-colour tiles: a byte a pixel; else a nibble
            char_base = ((cnt >> 2) & 3) * 0x4000
            screen_base = ((cnt >> 8) & 31) * 0x800
            self.charblock = (cnt >> 2) & 3
            screen = np.frombuffer(
                vram[screen_base : screen_base + 0x800].tobytes(), "<u2"
            ).reshape(32, 32)
            entries = screen[(rows + vofs // 8) % 32, (cols + hofs // 8) % 32].astype(np.int32)
            ids = entries & 0x3FF
            chars = vram[char_base : char_base + 0x8000]
            chars = chars[: len(chars) // size * size].reshape(-1, size)
            opaque = np.zeros(1024, bool)
            opaque[: min(len(chars), 1024)] = chars[:1024].any(axis=1)
            shown = opaque[ids]
            for tile in np.unique(ids[shown]).tolist():
                if tile not in self.pixels:
                    bank = int(entries[ids == tile][0]) >> 12
                    self.pixels[tile] = _tile_colours(chars[tile], bank, palette)
            top = np.where(shown, ids, top)
        return top

    def observe(self, machine: Machine, buttons: int = 0) -> None:
        """Look at the screen now; with the player's cell, note steps and stops."""
        grid = self.screen_tiles(machine)
        for tile, n in zip(*np.unique(grid[grid >= 0], return_counts=True), strict=True):
            self.seen[int(tile)] = self.seen.get(int(tile), 0) + int(n)
        if self.player is None:
            return
        (xa, xt), (ya, yt) = self.player
        cell = (machine.read(xa, xt), machine.read(ya, yt))
        held = [name for name, bit in _BITS.items() if buttons >> bit & 1]
        last, last_grid = self._last, self._grid
        if last is not None and last_grid is not None:
            dx, dy = cell[0] - last[0], cell[1] - last[1]
            self._still = 0 if (dx, dy) != (0, 0) else self._still + 1
            if abs(dx) + abs(dy) == 1 and 0 <= cell[0] < 30 and 0 <= cell[1] < 20:
                tile = int(last_grid[cell[1], cell[0]])
                self.onto[tile] = self.onto.get(tile, 0) + 1
            elif (dx, dy) == (0, 0) and len(held) == 1 and self._still <= STUCK:
                # a player who has not moved for long is not in play (a menu, game over):
                # standing still then says nothing about the tile ahead
                ddx, ddy = DIRS[held[0]]
                tx, ty = cell[0] + ddx, cell[1] + ddy
                if 0 <= tx < 30 and 0 <= ty < 20:
                    tile = int(grid[ty, tx])
                    self.blocked[tile] = self.blocked.get(tile, 0) + 1
        self._last, self._grid = cell, grid

    def walkable(self, tile: int) -> bool | None:
        onto, stop = self.onto.get(tile, 0), self.blocked.get(tile, 0)
        if onto + stop == 0:
            return None
        return onto / (onto + stop) >= WALKABLE_SHARE

    def finish(self, folder: Path, sheet: Path | None = None) -> dict[str, Any]:
        """Group the tiles; write the contact sheet and `folder/tile_groups.json`."""
        if not self.pixels:
            raise IntegrateError(
                "no background tiles were seen: does the game show a tile mode screen?"
            )
        groups = group_tiles(self.pixels)
        table: dict[str, dict[str, Any]] = {}
        for tile, gid in sorted(groups.items()):
            entry = table.setdefault(str(gid), {"tiles": [], "onto": 0, "blocked": 0, "seen": 0})
            entry["tiles"].append(tile)
            entry["onto"] += self.onto.get(tile, 0)
            entry["blocked"] += self.blocked.get(tile, 0)
            entry["seen"] += self.seen.get(tile, 0)
        for entry in table.values():
            tries = entry["onto"] + entry["blocked"]
            entry["walkable"] = None if tries == 0 else entry["onto"] / tries >= WALKABLE_SHARE
        sheet = sheet or folder / "tiles.png"
        atomic_write_bytes(sheet, contact_sheet(self.pixels, groups))
        atomic_write_text(
            folder / "tile_groups.json",
            json.dumps({"charblock": self.charblock, "groups": table}, indent=1) + "\n",
        )
        return {"tiles": len(groups), "groups": len(table), "sheet": str(sheet), "table": table}


def _tile_colours(raw: np.ndarray, bank: int, palette: np.ndarray) -> np.ndarray:
    """A tile's 64 RGB555 colours from its VRAM bytes: 32 bytes of 4-bit indices into palette
    bank `bank`, or 64 bytes of 8-bit indices into the whole palette; index 0 is transparent
    (0xFFFF).

    >>> palette = np.arange(256, dtype=np.uint16)
    >>> four = _tile_colours(np.full(32, 0x21, np.uint8), 1, palette)
    >>> int(four[0]), int(four[1])
    (17, 18)
    >>> eight = _tile_colours(np.zeros(64, np.uint8), 0, palette)
    >>> int(eight[0])
    65535
    """
    if len(raw) == 64:
        index = raw.astype(np.int64)
    else:
        index = np.stack([raw & 0xF, raw >> 4], axis=1).reshape(64).astype(np.int64)
        index = np.where(index == 0, 0, bank * 16 + index)
    return np.where(index == 0, 0xFFFF, palette[index]).astype(np.uint16)


def _rgb(colours: np.ndarray) -> np.ndarray:
    c = colours.astype(np.int64)
    rgb = np.stack([(c & 31) << 3, (c >> 5 & 31) << 3, (c >> 10 & 31) << 3], axis=-1)
    rgb[colours == 0xFFFF] = (255, 0, 255)  # transparent pixels in magenta
    return rgb.astype(np.uint8)


def contact_sheet(
    pixels: dict[int, np.ndarray], groups: dict[int, int], scale: int = 4, columns: int = 4
) -> bytes:
    """A PNG: a grid of groups, each its id in yellow and up to 4 of its tiles at `scale`x,
    each with its tile id under it."""
    import io

    from PIL import Image, ImageDraw

    by_group: dict[int, list[int]] = {}
    for tile, gid in groups.items():
        by_group.setdefault(gid, []).append(tile)
    cell = 8 * scale + 6
    block_w, block_h = 28 + 4 * cell, cell + 14
    rows = (len(by_group) + columns - 1) // columns
    image = Image.new("RGB", (block_w * columns, block_h * rows), (24, 24, 32))
    draw = ImageDraw.Draw(image)
    for n, (gid, tiles) in enumerate(sorted(by_group.items())):
        x0, y0 = (n % columns) * block_w, (n // columns) * block_h
        draw.text((x0 + 4, y0 + cell // 2 - 4), f"{gid}", fill=(255, 255, 0))
        for i, tile in enumerate(tiles[:4]):
            rgb = _rgb(pixels[tile]).reshape(8, 8, 3)
            picture = Image.fromarray(rgb).resize((8 * scale, 8 * scale), Image.Resampling.NEAREST)
            image.paste(picture, (x0 + 28 + i * cell, y0 + 2))
            draw.text((x0 + 28 + i * cell, y0 + 8 * scale + 3), str(tile), fill=(200, 200, 200))
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def player_cell_variables(folder: Path) -> tuple[tuple[int, str], tuple[int, str]] | None:
    """(player_x, player_y) of data.json as (address, type), if both are there."""
    path = folder / "data.json"
    info = json.loads(path.read_text()).get("info", {}) if path.is_file() else {}
    if "player_x" in info and "player_y" in info:
        return (
            (int(info["player_x"]["address"]), str(info["player_x"]["type"])),
            (int(info["player_y"]["address"]), str(info["player_y"]["type"])),
        )
    return None


def collect_tiles(
    folder: str | Path,
    inputs: str | None = None,
    start: str | None = None,
    every: int = 4,
    power_on: bool = False,
    sheet: Path | None = None,
    play: Callable[[Machine, Callable[[Machine, int], None]], None] | None = None,
) -> dict[str, Any]:
    """Play `inputs` (default: a seeded random walk, none when a human plays) from the folder's
    start state `start` (default: its default start; power-on with `power_on` or without one), then `play(machine, observe)` (a window: call `observe`
    every few frames), looking every `every` frames; then `TileCollector.finish`."""

    folder = Path(folder)
    state, _ = start_state(folder, start, power_on)
    steps = parse_script(inputs) if inputs else ([] if play is not None else random_walk())
    collector = TileCollector(player_cell_variables(folder))
    with Machine.open(folder / "rom.gba", state=state) as machine:
        collector.observe(machine)
        machine.run(steps, on_frame=collector.observe, every=every)
        if play is not None:
            play(machine, collector.observe)
    return collector.finish(folder, sheet)


def label_tiles(folder: str | Path, labels: list[str]) -> dict[str, int]:
    """Write `folder/tiles.json` from `ID=CLASS` group names (tile_groups.json's ids); the
    walkability of each class is the groups' guess."""
    folder = Path(folder)
    groups_path = folder / "tile_groups.json"
    if not groups_path.is_file():
        raise IntegrateError(f"no {groups_path}: run metabonk integrate tiles {folder} first")
    again = f"run metabonk integrate tiles {folder} again"
    found = _read_tile_json(groups_path, _groups_problem, again)
    groups = found["groups"]
    tiles_path = folder / "tiles.json"
    current = (
        _read_tile_json(tiles_path, _labels_problem, "remove it and label the groups again")
        if tiles_path.is_file()
        else {}
    )
    classes: dict[str, str] = dict(current.get("classes", {}))
    votes: dict[str, list[int]] = {k: list(v) for k, v in current.get("walk_votes", {}).items()}
    for pair in labels:
        gid, sep, name = pair.partition("=")
        if not sep or not name.strip() or gid.strip() not in groups:
            raise IntegrateError(
                f"{pair!r}: write GROUP=CLASS with a group id of the contact sheet (0-{len(groups) - 1})"
            )
        entry, name = groups[gid.strip()], name.strip()
        for tile in entry["tiles"]:
            classes[str(tile)] = name
        onto, stop = votes.setdefault(name, [0, 0])
        votes[name] = [onto + entry["onto"], stop + entry["blocked"]]
    # a class is walkable when most tries to step onto any of its tiles worked (None: never tried)
    walk = {k: (None if sum(v) == 0 else v[0] / sum(v) >= WALKABLE_SHARE) for k, v in votes.items()}
    out = {
        "charblock": found["charblock"],
        "classes": dict(sorted(classes.items(), key=lambda kv: int(kv[0]))),
        "walkable": walk,
        "walk_votes": votes,
    }
    atomic_write_text(tiles_path, json.dumps(out, indent=1) + "\n")
    return {"tiles": len(classes), "classes": len(set(classes.values()))}


#: The largest tile_groups.json / tiles.json read, and the tile numbers a GBA background has.
MAX_TILE_JSON_BYTES = 8 * 1024 * 1024
TILE_IDS = 1024


def _read_tile_json(path: Path, problem_of: Callable[[Any], str | None], fix: str) -> Any:
    """A tile file's JSON when its structure is what `integrate tiles` / `tiles label` write
    (`problem_of` says what is wrong, or None), else a one-line `IntegrateError`."""
    if path.stat().st_size > MAX_TILE_JSON_BYTES:
        problem: str | None = f"more than {MAX_TILE_JSON_BYTES} bytes"
    else:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            problem = f"not JSON: {exc}"
        else:
            problem = problem_of(data)
    if problem is not None:
        raise IntegrateError(f"{path} is damaged or not metabonk's ({problem}); {fix}")
    return data


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _groups_problem(data: Any) -> str | None:
    """What is wrong with a tile_groups.json's structure, or None.

    >>> _groups_problem({"charblock": 0, "groups": {"0": {"tiles": [5], "onto": 1, "blocked": 0}}})
    >>> _groups_problem({"charblock": 0, "groups": {"0": {"tiles": [5000], "onto": 1, "blocked": 0}}})
    'group 0: tiles must be a list of tile numbers 0-1023'
    """
    if not isinstance(data, dict) or data.get("charblock") not in (0, 1, 2, 3):
        return "charblock must be 0-3"
    groups = data.get("groups")
    if not isinstance(groups, dict) or len(groups) > TILE_IDS:
        return f"groups must be an object of at most {TILE_IDS} groups"
    for gid, entry in groups.items():
        if not isinstance(entry, dict):
            return f"group {gid} must be an object"
        tiles = entry.get("tiles")
        if not isinstance(tiles, list) or not all(_count(t) and t < TILE_IDS for t in tiles):
            return f"group {gid}: tiles must be a list of tile numbers 0-{TILE_IDS - 1}"
        if not (_count(entry.get("onto")) and _count(entry.get("blocked"))):
            return f"group {gid}: onto and blocked must be counts"
    return None


def _labels_problem(data: Any) -> str | None:
    """What is wrong with a tiles.json's classes and walk votes, or None.

    >>> _labels_problem({"classes": {"5": "wall"}, "walk_votes": {"wall": [0, 3]}})
    >>> _labels_problem({"classes": ["wall"]})
    'classes must map tile numbers to class names'
    """
    if not isinstance(data, dict):
        return "it must hold a JSON object"
    classes = data.get("classes", {})
    if not isinstance(classes, dict) or not all(
        k.isdigit() and len(k) <= 4 and int(k) < TILE_IDS and isinstance(v, str)
        for k, v in classes.items()
    ):
        return "classes must map tile numbers to class names"
    votes = data.get("walk_votes", {})
    if not isinstance(votes, dict) or not all(
        isinstance(v, list) and len(v) == 2 and all(_count(x) for x in v) for v in votes.values()
    ):
        return "walk_votes must map class names to two counts"
    return None
