"""What a memory database holds, for people: a summary (areas, quests, counts) and a map picture.

What: `memory_path(run_dir)` finds a run's database (`RUN_DIR/memory.lbdb`, or the file itself);
`summary(graph)` reads the areas, the quests with their objectives and the counts with Cypher;
`render_map(graph)` draws every remembered area from its `grid` (coloured by `TileClass.kind`:
walkable, wall, door, locked) with its entities as coloured squares and the player's last cell,
areas side by side per world. Why: `metabonk memory show RUN_DIR` prints and saves these.

>>> from metabonk_gym.memory.graph import KnowledgeGraph
>>> g = KnowledgeGraph(None)
>>> g.upsert("Area", {"id": "0:1", "world": "0", "number": 1, "grid": "01/10"}); g.flush()
>>> render_map(g, cell=2).shape
(12, 12, 3)
>>> summary(g)["areas"][0]["known_cells"]
4
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.memory.graph import KnowledgeGraph
from metabonk_gym.memory.store import MemoryStoreError, is_server_url
from metabonk_gym.memory.world import GRID_CHARS, decode_grid
from metabonk_gym.utils import atomic_write_bytes

#: The database file a run keeps its memory in (`Memory(path=RUN_DIR / MEMORY_FILE)`).
MEMORY_FILE = "memory.lbdb"
KIND_COLOURS: dict[str, tuple[int, int, int]] = {
    "walkable": (200, 200, 190),
    "wall": (60, 60, 70),
    "door": (150, 100, 40),
    "locked": (220, 40, 40),
    "unknown": (0, 0, 0),
}
ENTITY_COLOURS: dict[str, tuple[int, int, int]] = {
    "item": (250, 210, 30),
    "chest": (170, 110, 20),
    "npc": (40, 180, 60),
    "enemy": (150, 40, 200),
    "door": (230, 90, 90),
}


def memory_path(where: str | Path) -> str | Path:
    """The database of a run folder (`RUN_DIR/memory.lbdb`), a database file, or a server URL;
    `MemoryStoreError` when there is none.

    >>> memory_path("bolt://127.0.0.1:7687")
    'bolt://127.0.0.1:7687'
    """
    if isinstance(where, str) and is_server_url(where):
        return where
    path = Path(where).expanduser()
    if path.is_dir() and (path / MEMORY_FILE).exists():
        return path / MEMORY_FILE
    if path.is_file():
        return path
    raise MemoryStoreError(
        f"no memory database at {path}: give a run folder holding {MEMORY_FILE} (written by "
        f"the Memory wrapper with path=RUN_DIR/{MEMORY_FILE}) or the database file"
    )


def summary(graph: KnowledgeGraph) -> dict[str, Any]:
    """Areas (with known cells, entities, doors), quests with objectives, and counts."""
    areas = graph.query(
        "MATCH (a:Area) RETURN a.id AS id, a.world AS world, a.number AS number, "
        "a.visits AS visits, a.grid AS grid ORDER BY a.world, a.number"
    )
    entities: dict[str, dict[str, int]] = {}
    for row in graph.query(
        "MATCH (e:Entity) RETURN e.area AS area, e.kind AS kind, count(e) AS n ORDER BY kind"
    ):
        entities.setdefault(row["area"], {})[row["kind"]] = int(row["n"])
    links: dict[str, list[int]] = {}
    for row in graph.query(
        "MATCH (a:Area)-[:CONNECTS]->(b:Area) RETURN a.id AS src, b.number AS dst ORDER BY dst"
    ):
        links.setdefault(row["src"], []).append(int(row["dst"]))
    out_areas = []
    for row in areas:
        grid = row.pop("grid") or ""
        row["known_cells"] = sum(c not in " /" for c in grid)
        row["entities"] = entities.get(row["id"], {})
        row["leads_to"] = links.get(row["id"], [])
        out_areas.append(row)
    quests = graph.query(
        "MATCH (q:Quest) RETURN q.id AS id, q.title AS title, q.kind AS kind, "
        "q.priority AS priority, q.status AS status ORDER BY q.priority DESC, q.id"
    )
    for quest in quests:
        quest["objectives"] = graph.query(
            "MATCH (q:Quest {id: $id})-[:HAS_OBJECTIVE]->(o:Objective) RETURN o.id AS id, "
            "o.text AS text, o.status AS status ORDER BY o.id",
            {"id": quest["id"]},
        )
    return {"areas": out_areas, "quests": quests, "counts": graph.counts()}


def render_map(graph: KnowledgeGraph, cell: int = 4, gap: int = 2) -> np.ndarray:
    """Every remembered area as an RGB picture: one row of areas per world (see the module
    docstring); `cell` pixels per tile, `gap` tiles between areas."""
    kinds = {
        r["code"]: r["kind"]
        for r in graph.query("MATCH (t:TileClass) RETURN t.code AS code, t.kind AS kind")
    }
    areas = graph.query(
        "MATCH (a:Area) RETURN a.id AS id, a.world AS world, a.grid AS grid "
        "ORDER BY a.world, a.number"
    )
    ents: dict[str, list[tuple[int, int, str]]] = {}
    for row in graph.query(
        "MATCH (e:Entity) WHERE e.state <> 'gone' RETURN e.area AS a, e.x AS x, e.y AS y, e.kind AS k"
    ):
        ents.setdefault(row["a"], []).append((int(row["x"]), int(row["y"]), str(row["k"])))
    player = graph.query("MATCH (p:Player) RETURN p.area AS a, p.x AS x, p.y AS y")
    worlds: dict[str, list[tuple[str, np.ndarray]]] = {}
    for row in areas:
        grid = decode_grid(row["grid"]) if row["grid"] else np.full((1, 1), -1, np.int16)
        worlds.setdefault(str(row["world"]), []).append((row["id"], grid))
    if not worlds:
        return np.zeros((cell, cell, 3), np.uint8)
    height = max(g.shape[0] for rows in worlds.values() for _, g in rows) + gap  # in tiles
    width = max(sum(g.shape[1] + gap for _, g in rows) for rows in worlds.values()) + gap
    image = np.zeros(((len(worlds) * height + gap) * cell, width * cell, 3), np.uint8)
    for w, rows in enumerate(worlds.values()):
        x0 = gap
        y0 = gap + w * height
        for area, grid in rows:
            for y in range(grid.shape[0]):
                for x in range(grid.shape[1]):
                    code = GRID_CHARS[grid[y, x]] if grid[y, x] >= 0 else " "
                    colour = KIND_COLOURS.get(kinds.get(code, "unknown" if code == " " else "wall"))
                    _fill(image, x0 + x, y0 + y, cell, colour or KIND_COLOURS["wall"])
            for x, y, kind in ents.get(area, []):
                _fill(image, x0 + x, y0 + y, cell, ENTITY_COLOURS.get(kind, (255, 255, 255)), 1)
            for p in player:
                if p["a"] == area:
                    _fill(image, x0 + int(p["x"]), y0 + int(p["y"]), cell, (40, 120, 255))
            x0 += grid.shape[1] + gap
    return image


def _fill(
    image: np.ndarray, x: int, y: int, cell: int, colour: tuple[int, int, int], inset: int = 0
) -> None:
    top, left = y * cell + inset, x * cell + inset
    image[top : (y + 1) * cell - inset, left : (x + 1) * cell - inset] = colour


def write_map_png(graph: KnowledgeGraph, path: str | Path, cell: int = 4) -> Path:
    """`render_map` as a PNG file (written atomically)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(render_map(graph, cell)).save(buffer, format="PNG")
    atomic_write_bytes(Path(path), buffer.getvalue())
    return Path(path)
