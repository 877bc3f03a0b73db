"""An explorer's archive on the dashboard's world map: each cell coloured by how often it was seen.

Why: `metabonk explore` remembers cells (`metabonk_gym.training.explore_archive`); where they
lie and which were visited most shows at a glance how far the exploration got and where it
spends its frames. The archive is read with its own checks (data only, checksummed, whole) and
never unpickled; nothing it names is opened (its game folder comes from the env id's bundled
game, never from a path in the file).

Cells from RAM variables that include the game's world-map variables (`world_map.yaml`: area,
x, y) are drawn where they lie, each over its bucket's squares; any other cells (the screen's,
a game with no world map, or variables whose key order is unknown) go on a grid in the order
they were found.

>>> spec = MapSpec(area="room", x="px", y="py", width=30, height=20, columns=2)
>>> sorted(bucket_squares(spec, {"room": 1, "px": 3, "py": 3}, (0, 1, 2)))
[(3, 6), (3, 7), (3, 8), (4, 6), (4, 7), (4, 8), (5, 6), (5, 7), (5, 8)]
>>> bucket_squares(spec, {"room": 1, "keys": 1}, (0, 1)) is None
True
>>> grid_spec(10).width
4
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from metabonk_gym.configfile import ConfigFileError, find_file, load_config_file
from metabonk_gym.errors import MetabonkError
from metabonk_gym.gamedata import bundled_game_folder
from metabonk_gym.registration import env_traits
from metabonk_gym.training.explore_archive import Archive, ArchiveError
from metabonk_gym.watch.replays import TooLargeError, inside_file, read_head
from metabonk_gym.watch.worldmap import MapSpec, load_map_spec

#: The largest archive the dashboard reads (the explorer's own cap is larger).
MAX_MAP_ARCHIVE_BYTES = 512 * 1024 * 1024
#: Squares one cell's bucket may cover on the map (a larger bucket is drawn at its corner).
MAX_BUCKET_SQUARES = 256


def bucket_squares(
    spec: MapSpec, variables: Mapping[str, int], key: Sequence[int]
) -> set[tuple[int, int]] | None:
    """The map squares a RAM cell covers: its bucket of x and y values in its area; None when
    the cells lack the map's variables."""
    names = list(variables)
    wanted = [spec.x, spec.y] + ([spec.area] if spec.area else [])
    if len(key) != len(names) or not all(name in names for name in wanted):
        return None
    low = {name: int(key[i]) * int(variables[name]) for i, name in enumerate(names)}
    bx, by = int(variables[spec.x]), int(variables[spec.y])
    if bx * by > MAX_BUCKET_SQUARES:
        bx = by = 1
    squares = set()
    for dx in range(bx):
        for dy in range(by):
            info = {**low, spec.x: low[spec.x] + dx, spec.y: low[spec.y] + dy}
            square = spec.place(info)
            if square is not None:
                squares.add(square)
    return squares


def grid_spec(cells: int) -> MapSpec:
    """A one-area map for cells with no place of their own: a near-square grid."""
    width = max(1, math.ceil(math.sqrt(cells * 1.5)))
    height = max(1, math.ceil(cells / width))
    return MapSpec(x="x", y="y", width=width, height=height, name="cells in the order found")


def game_folder(env_id: str) -> Path | None:
    """The bundled game folder of `env_id` (None: another env)."""
    try:
        game = env_traits(env_id).game
    except MetabonkError:
        return None
    return bundled_game_folder(game) if game else None


def key_order(cells: Mapping[str, Any], folder: Path | None) -> dict[str, int] | None:
    """The cell variables and buckets in the order of a key's numbers. The archive's header
    holds them as a mapping whose order JSON may have sorted: a list of [name, bucket] pairs
    or `names` give the order; else the game folder's cells file, when it names the same
    variables.

    >>> key_order({"variables": [["room", 1], ["player_x", 3]]}, None)
    {'room': 1, 'player_x': 3}
    >>> key_order({"variables": {"b": 1, "a": 2}, "names": ["b", "a"]}, None)
    {'b': 1, 'a': 2}
    """
    raw = cells.get("variables")
    try:
        if isinstance(raw, list):
            return {str(name): int(bucket) for name, bucket in raw}
        if not isinstance(raw, Mapping):
            return None
        variables = {str(k): int(v) for k, v in raw.items()}
    except (TypeError, ValueError):
        return None
    names = cells.get("names")
    if isinstance(names, list) and set(map(str, names)) == set(variables):
        return {str(n): variables[str(n)] for n in names}
    declared = _folder_cells(folder)
    if declared is not None and set(declared) == set(variables):
        return {name: variables[name] for name in declared}
    return None if len(variables) > 1 else variables


def _folder_cells(folder: Path | None) -> list[str] | None:
    """The variable names of a game folder's cells file, in its order."""
    path = find_file(folder, "cells") if folder is not None else None
    if path is None:
        return None
    try:
        data = load_config_file(path)
    except ConfigFileError:
        return None
    variables = data.get("variables") if isinstance(data, Mapping) else None
    return [str(k) for k in variables] if isinstance(variables, Mapping) else None


def read_archive(root: Path, rel: str) -> Archive:
    """The archive `rel` under `root` (a file, or a folder holding `archive.npz`): read once
    through a descriptor that follows no link, then checked as the explorer checks it.
    `FileNotFoundError` outside `root` or missing, `TooLargeError` above
    `MAX_MAP_ARCHIVE_BYTES`, `ArchiveError` (naming `rel`) when it is no whole archive."""
    path = inside_file(root, rel) or inside_file(root, f"{rel.rstrip('/')}/archive.npz")
    if path is None:
        raise FileNotFoundError(rel)
    data = read_head(path, MAX_MAP_ARCHIVE_BYTES)
    if data is None or len(data) > MAX_MAP_ARCHIVE_BYTES:
        raise TooLargeError(f"{rel[:200]}: larger than {MAX_MAP_ARCHIVE_BYTES} bytes")
    with tempfile.TemporaryDirectory(prefix="metabonk-archive-") as folder:
        copy = Path(folder) / "archive.npz"
        copy.write_bytes(data)
        try:
            return Archive.load(copy)
        except ArchiveError as exc:
            raise ArchiveError(str(exc).replace(str(copy), rel[:200])) from None


def archive_map(root: Path, rel: str) -> dict[str, Any]:
    """The archive `rel` under `root` (`read_archive`) as the page's map: `spec`, `heat`
    ([x, y, times seen]), the best cell's squares, the won cells', and what the archive is
    (env, cells, frames)."""
    archive = read_archive(root, rel)
    cells = archive.meta.get("cells") or {}
    env_id = str(archive.meta.get("env_id", ""))
    folder = game_folder(env_id) if cells.get("kind") == "ram" else None
    spec = load_map_spec(folder) if folder is not None else None
    variables = key_order(cells, folder) if spec is not None else None
    places: list[set[tuple[int, int]]] | None = None
    if spec is not None and variables:
        places = [bucket_squares(spec, variables, key) or set() for key in archive.keys]
        if not any(places):
            places = None
    placed = "world map" if places is not None else "grid"
    if places is None:
        spec = grid_spec(len(archive))
        places = [{(i % spec.width, i // spec.width)} for i in range(len(archive))]
    heat: dict[tuple[int, int], int] = {}
    for squares, seen in zip(places, archive.seen):
        for square in squares:
            heat[square] = heat.get(square, 0) + int(seen)
    best = archive.best() if len(archive) else None
    assert spec is not None
    return {
        "env_id": env_id,
        "cells": len(archive),
        "kind": str(cells.get("kind", "")),
        "placed": placed,
        "frames": int(archive.meta.get("frames", 0)),
        "best_score": archive.best_score() if len(archive) else None,
        "spec": spec.to_dict(),
        "heat": [[x, y, n] for (x, y), n in sorted(heat.items())],
        "best": sorted(places[best]) if best is not None else [],
        "won": sorted({s for squares, won in zip(places, archive.won) if won for s in squares}),
    }


__all__ = ["archive_map", "bucket_squares", "grid_spec", "read_archive"]
