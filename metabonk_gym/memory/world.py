"""`WorldMemory`: turns each step's game variables and RAM arrays into the knowledge graph.

What: per step it notes the player's area and cell, new areas and the doors between them
(`CONNECTS`, and the door tile's `leads_to`), the area's tiles when they change (walkable, door,
locked, wall), the entities the game folder declares (tile classes, enemy arrays), events from
variable changes (talked, opened, picked up, hurt: the nearest entity of the event's kind gets its
new state) and the quest log; everything is buffered and flushed every `flush_every` steps and at
an episode's end (once a quarter of that is buffered). It keeps a Python copy of what the prompt and the path finder need (areas,
entities, tile grids, connections), so reading it costs no query.
Why: one generic observer for every game folder with a `quests.yaml`; the graph persists across
episodes and runs (worlds are told apart by the folder's `world` variable, e.g. the seed).

>>> import numpy as np
>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> memory = WorldMemory(GameData(bundled_game_folder("BonkQuest")), None)
>>> tiles = np.zeros((20, 30), np.uint8); tiles[0, :] = 1; tiles[5, 7] = 5   # a wall row, a chest
>>> values = {"room": 1, "seed": 0, "player_x": 3, "player_y": 4, "hp": 5}
>>> memory.reset(values, {"room_tiles": tiles})
>>> [(e["kind"], e["state"], e["x"], e["y"]) for e in memory.entities()]
[('chest', 'closed', 7, 5)]
>>> memory.flush(); memory.graph.query("MATCH (a:Area) RETURN a.grid AS grid")[0]["grid"][:33]
'111111111111111111111111111111/00'

>>> memory.close()
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.gamedata import GameData
from metabonk_gym.memory.graph import KnowledgeGraph, safe_id
from metabonk_gym.memory.quests import Change, QuestLog
from metabonk_gym.memory.spec import WorldSpec
from metabonk_gym.memory.store import MemoryStoreError

logger = logging.getLogger("metabonk_gym.memory")
PLAYER = "player"


#: One character per tile class id in `Area.grid` (" ": not seen yet).
GRID_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def encode_grid(grid: np.ndarray) -> str:
    """A tile class grid as text: one character per cell (`GRID_CHARS`), rows split by "/".

    >>> encode_grid(np.array([[0, 1], [10, -1]]))
    '01/a '
    """
    ids = np.asarray(grid, np.int64)
    ids = np.where((ids >= 0) & (ids < len(GRID_CHARS)), ids, len(GRID_CHARS))
    rows = _GRID_BYTES[ids]
    slash = np.full((rows.shape[0], 1), ord("/"), np.uint8)
    return np.concatenate([rows, slash], axis=1).tobytes()[:-1].decode()


_GRID_BYTES = np.frombuffer((GRID_CHARS + " ").encode(), np.uint8)


def decode_grid(text: str) -> np.ndarray:
    """The inverse of `encode_grid` (-1 for cells not seen).

    >>> decode_grid("01/a ").tolist()
    [[0, 1], [10, -1]]
    """
    rows = text.split("/")
    out = np.full((len(rows), max(len(r) for r in rows)), -1, np.int16)
    for y, row in enumerate(rows):
        for x, c in enumerate(row):
            out[y, x] = GRID_CHARS.find(c)
    return out


class WorldMemory:
    """See the module docstring.

    Args:
        game: the game folder (its `quests.yaml` and tile classes).
        where: the database: a file path, a `neo4j://`/`bolt://` URL, or None (in memory).
        flush_every: steps between two batched writes; an episode's end flushes too once a
            quarter of that is buffered, and `close` always does.
        tile_every: steps between two reads of the tile array when nothing else changed (an
            area change or an event reads it at once).
        tile_nodes: "landmarks": Tile nodes for doors and locked doors only (every cell is in
            its Area's `grid`); "all": a Tile node per cell (about 100 us per new cell).
        **store_kwargs: go to the store (`auth=` for Neo4j, ...).
    """

    def __init__(
        self,
        game: GameData,
        where: str | Path | None = None,
        flush_every: int = 1024,
        tile_every: int = 8,
        tile_nodes: str = "landmarks",
        **store_kwargs: Any,
    ) -> None:
        if flush_every < 1 or tile_every < 1:
            raise ValueError("flush_every and tile_every must be >= 1")
        if tile_nodes not in ("landmarks", "all"):
            raise ValueError(f"tile_nodes must be 'landmarks' or 'all', not {tile_nodes!r}")
        self.tile_nodes = tile_nodes
        self.spec = WorldSpec.from_game(game)
        spec = self.spec
        #: variables whose change fires an event; with the area's, those that re-read the tiles
        self._event_vars = tuple(sorted({r.variable for r in spec.events}))
        self._watch = tuple(v for v in (spec.area, spec.world) if v) + self._event_vars
        self._landmark = np.zeros(256, bool)  # tile id -> is a door or a locked door
        self._landmark[[t for t in spec.doors | spec.locked if 0 <= t < 256]] = True
        self.game = game
        self.log = QuestLog.from_game(game)
        self.graph = KnowledgeGraph(where, **store_kwargs)
        self.flush_every = int(flush_every)
        self.tile_every = int(tile_every)
        self.run_id = uuid.uuid4().hex[:8]
        self.episode = self._last_episode()
        self.step = 0
        self.total_steps = 0
        self.area = ""
        self.cell: tuple[int, int] = (-1, -1)
        self._prev_cell: tuple[int, int] = (-1, -1)
        self._came_from: tuple[str, tuple[int, int]] | None = None
        self._written_player: dict[str, Any] = {}
        self._flushed_at = 0
        self.values: dict[str, int] = {}
        #: Python copies: area id -> row; entity id -> row; area id -> tile class grid;
        #: (area, area) -> door cell in the first.
        self.areas: dict[str, dict[str, Any]] = {}
        self._entities: dict[str, dict[str, Any]] = {}
        self.grids: dict[str, np.ndarray] = {}
        self.connections: dict[tuple[str, str], tuple[int, int]] = {}
        self.seen: set[str] = set()
        self.events = 0
        self.flush_errors = 0
        self.last_error = ""
        self._tiles_raw: dict[str, bytes] = {}
        self._arrays: Mapping[str, np.ndarray] = {}
        self.closed = False
        self._load()
        for name, tile in self.spec.class_ids.items():  # the legend of `Area.grid`
            code = GRID_CHARS[tile] if 0 <= tile < len(GRID_CHARS) else "?"
            self.graph.upsert(
                "TileClass",
                {
                    "id": f"{game.name}:{code}",
                    "game": game.name,
                    "code": code,
                    "name": name,
                    "kind": self.spec.kind_of(tile),
                },
            )

    # ------------------------------------------------------------------ persistence
    def _last_episode(self) -> int:
        rows = self.graph.query("MATCH (p:Player) RETURN max(p.episode) AS e")
        value = rows[0]["e"] if rows else None
        return int(value) if value is not None else -1

    def _load(self) -> None:
        """Read back what earlier runs remembered (areas, entities, tiles, connections)."""
        for row in self.graph.query(
            "MATCH (a:Area) RETURN a.id AS id, a.world AS world, a.number AS number, "
            "a.name AS name, a.first_step AS first_step, a.last_step AS last_step, "
            "a.visits AS visits, a.grid AS grid"
        ):
            self.areas[row["id"]] = row
        for row in self.graph.query(
            "MATCH (e:Entity) RETURN e.id AS id, e.area AS area, e.kind AS kind, e.name AS name, "
            "e.x AS x, e.y AS y, e.state AS state, e.last_step AS last_step, e.episode AS episode"
        ):
            row["number"] = self.areas.get(row["area"], {}).get("number", -1)
            self._entities[row["id"]] = row
        for area, row in self.areas.items():
            if row.get("grid"):
                self.grids[area] = decode_grid(row["grid"])
        for row in self.graph.query(
            "MATCH (a:Area)-[e:CONNECTS]->(b:Area) RETURN a.id AS a, b.id AS b, e.x AS x, e.y AS y"
        ):
            self.connections[(row["a"], row["b"])] = (int(row["x"]), int(row["y"]))

    # ------------------------------------------------------------------ stepping
    def reset(self, values: Mapping[str, int], arrays: Mapping[str, np.ndarray]) -> None:
        """A new episode: end the last one, pending quests again, observe the first state."""
        self.end_episode()
        self.episode += 1
        self.step = -1
        self.cell = (-1, -1)
        self.log.reset()
        self._quest_rows([])  # every quest and objective, pending ones too
        self.area = ""
        self.values = dict(values)
        self.observe(values, arrays, read_tiles=True)

    def observe(
        self,
        values: Mapping[str, int],
        arrays: Mapping[str, np.ndarray] | None = None,
        read_tiles: bool = False,
    ) -> None:
        """Note one step (`values`: every game variable; `arrays`: the RAM arrays, only needed
        when `wants_tiles()` said so or at an area change)."""
        spec = self.spec
        self.step += 1
        self.total_steps += 1
        before, self.values = self.values, dict(values)
        if arrays is not None:
            self._arrays = arrays
        area = self._area_id(values)
        self._prev_cell = self.cell
        if spec.player is not None:
            self.cell = (int(values.get(spec.player[0], -1)), int(values.get(spec.player[1], -1)))
        if area != self.area:
            self._enter(area, values)
            read_tiles = True
        fired = (
            [
                r
                for r in spec.events
                if r.fired(before.get(r.variable, 0), values.get(r.variable, 0))
            ]
            if any(before.get(v) != values.get(v) for v in self._event_vars)
            else []
        )
        if fired:
            read_tiles = True
        if read_tiles and spec.tiles and spec.tiles in self._arrays:
            self._tiles(area, self._arrays[spec.tiles])
        if self._came_from is not None:
            # A door at or next to where the player came in leads back (once the map is read).
            old, entry = self._came_from
            self._came_from = None
            door = self._door_near(area, entry)
            if door != entry and (area, old) not in self.connections:
                self._link(area, old, door)
        for rule in fired:
            note = " ".join(f"{n}={int(values.get(n, 0))}" for n in rule.note)
            self._event(rule.kind, rule.what, rule.entity, rule.state, note)
        changes = self.log.update(values, self.seen, self.step)
        if changes:
            self._quest_rows(changes)
        if self.total_steps - self._flushed_at >= self.flush_every:
            self.flush_quietly()

    def wants_tiles(self, values: Mapping[str, int]) -> bool:
        """Whether the next `observe` should get the RAM arrays (area change, event, or every
        `tile_every` steps): the caller reads them only then."""
        if (self.step + 1) % self.tile_every == 0:
            return True
        last = self.values
        return any(last.get(v) != values.get(v) for v in self._watch)

    def _area_id(self, values: Mapping[str, int]) -> str:
        world = values.get(self.spec.world, 0) if self.spec.world else 0
        area = values.get(self.spec.area, 0) if self.spec.area else 0
        return f"{int(world)}:{int(area)}"

    def _enter(self, area: str, values: Mapping[str, int]) -> None:
        old, old_cell = self.area, self._prev_cell
        row = self.areas.get(area)
        if row is None:
            world, number = area.split(":")
            row = {
                "id": area,
                "world": world,
                "number": int(number),
                "name": f"area {number}",
                "first_step": self.total_steps,
                "last_step": self.total_steps,
                "visits": 0,
            }
            self.areas[area] = row
        row["visits"] += 1
        row["last_step"] = self.total_steps
        self.graph.upsert("Area", row)
        if old and old_cell[0] >= 0:
            # The door the player left by (at or next to its last cell) leads to the new area.
            self._link(old, area, self._door_near(old, old_cell))
        self._came_from = (old, self.cell) if old else None
        self.area = area
        self._tiles_raw.pop(area, None)

    def _door_near(self, area: str, cell: tuple[int, int]) -> tuple[int, int]:
        """The door tile at `cell` or next to it in `area`'s remembered map (else `cell`)."""
        grid = self.grids.get(area)
        if grid is None:
            return cell
        doors = self.spec.doors | self.spec.locked
        x, y = cell
        for dx, dy in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
            cx, cy = x + dx, y + dy
            if 0 <= cy < grid.shape[0] and 0 <= cx < grid.shape[1] and int(grid[cy, cx]) in doors:
                return cx, cy
        return cell

    def _link(self, a: str, b: str, cell: tuple[int, int]) -> None:
        """Remember that the door at `cell` of area `a` leads to area `b`."""
        self.connections[(a, b)] = cell
        self.graph.relate("CONNECTS", a, b, x=cell[0], y=cell[1])
        grid = self.grids.get(a)
        if grid is not None and 0 <= cell[1] < grid.shape[0] and 0 <= cell[0] < grid.shape[1]:
            self._tile_row(a, cell[0], cell[1], int(grid[cell[1], cell[0]]), b)

    def _tile_row(self, area: str, x: int, y: int, tile: int, leads_to: str = "") -> None:
        name = self.spec.class_names.get(tile, str(tile))
        key = f"{area}:{x}:{y}"
        if not leads_to:
            leads_to = next(
                (b for (a, b), c in self.connections.items() if a == area and c == (x, y)), ""
            )
        self.graph.upsert(
            "Tile",
            {
                "id": key,
                "area": area,
                "x": x,
                "y": y,
                "kind": f"{self.spec.kind_of(tile)}/{name}",
                "walkable": tile in self.spec.walkable,
                "leads_to": leads_to,
            },
        )

    def _tiles(self, area: str, tiles: np.ndarray) -> None:
        raw = tiles.tobytes()
        if self._tiles_raw.get(area) == raw:
            return
        self._tiles_raw[area] = raw
        grid = tiles.astype(np.int16)
        old = self.grids.get(area)
        if old is None or old.shape != grid.shape:
            changed = np.argwhere(np.ones(grid.shape, bool))
        else:
            changed = np.argwhere(old != grid)
        self.grids[area] = grid
        row = self.areas[area]
        row["grid"] = encode_grid(grid)
        self.graph.upsert("Area", row)
        nodes = changed
        if self.tile_nodes != "all":  # landmarks only: doors and locked doors
            nodes = changed[self._landmark[grid[changed[:, 0], changed[:, 1]].clip(0, 255)]]
        for y, x in nodes:
            self._tile_row(area, int(x), int(y), int(grid[y, x]))
        names = self.spec.class_names
        self.seen = {names[int(t)] for t in np.unique(grid) if int(t) in names}
        if len(changed):
            self._tile_entities(area, grid)

    def _tile_entities(self, area: str, grid: np.ndarray) -> None:
        """The area's tile-class entities now; remembered ones no longer on the map are gone."""
        present: set[str] = set()
        for rule in self.spec.entities:
            if rule.tile is None:
                continue
            for y, x in np.argwhere(grid == rule.tile):
                eid = safe_id(f"{area}:{rule.name}:{int(x)}:{int(y)}")
                present.add(eid)
                self._entity(eid, area, rule.kind, rule.name, int(x), int(y), rule.state)
        moving = {r.kind for r in self.spec.entities if r.tile is None}
        for eid, row in self._entities.items():
            gone = row["area"] == area and row["kind"] not in moving and eid not in present
            if gone and row["state"] != "gone":
                row["state"] = "gone"
                self.graph.upsert("Entity", dict(row))

    def _entity(
        self, eid: str, area: str, kind: str, name: str, x: int, y: int, state: str
    ) -> None:
        row = self._entities.get(eid)
        number = self.areas.get(area, {}).get("number", -1)
        if row is not None and row["state"] == state and row["episode"] == self.episode:
            return
        if (
            row is not None
            and row["state"] not in ("", "new", "closed", "locked")
            and state in ("new",)
        ):
            state = row["state"]  # an NPC already talked to stays talked to
        row = {
            "id": eid,
            "area": area,
            "kind": kind,
            "name": name,
            "x": x,
            "y": y,
            "state": state,
            "last_step": self.total_steps,
            "episode": self.episode,
            "number": number,
        }
        self._entities[eid] = row
        self.graph.upsert("Entity", {k: v for k, v in row.items() if k != "number"})

    def _moving_entities(self) -> None:
        """Enemies and other array entities: their last seen cells (written at each flush)."""
        for rule in self.spec.entities:
            if rule.tile is not None or rule.x not in self._arrays or rule.y not in self._arrays:
                continue
            xs, ys = self._arrays[rule.x], self._arrays[rule.y]
            active = self._arrays.get(rule.active) if rule.active else None
            for i, (x, y) in enumerate(zip(xs, ys)):
                if active is not None and not active[i]:
                    continue
                eid = f"{self.area}:{rule.name}:{i}"
                self._entity(eid, self.area, rule.kind, rule.name, int(x), int(y), "seen")

    def _event(self, kind: str, what: str, entity_kind: str, state: str, note: str = "") -> None:
        self.events += 1
        eid = f"{self.run_id}:{self.episode}:{self.step}:{kind}:{what}"
        self.graph.upsert(
            "Event",
            {
                "id": eid,
                "kind": kind,
                "what": what,
                "area": self.area,
                "x": self.cell[0],
                "y": self.cell[1],
                "step": self.step,
                "episode": self.episode,
                "note": note,
                "player": PLAYER,
            },
        )
        self.graph.upsert("Player", self._player_row())
        if entity_kind:
            near = [
                e
                for e in self._entities.values()
                if e["area"] == self.area and e["kind"] == entity_kind
            ]
            if near:
                best = min(
                    near, key=lambda e: abs(e["x"] - self.cell[0]) + abs(e["y"] - self.cell[1])
                )
                if state:
                    best["state"] = state
                    best["episode"] = self.episode
                    self.graph.upsert("Entity", {k: v for k, v in best.items() if k != "number"})
                self.graph.upsert("Event", {**self.graph.row("Event", eid), "entity": best["id"]})

    def _quest_rows(self, changes: list[Change]) -> None:
        """Rows of the quests and objectives that changed (all of them when `changes` is [])."""
        changed = {c.id for c in changes} or {
            i for q in self.log.quests for i in (q.id, *(o.id for o in q.objectives))
        }
        for q in self.log.quests:
            if q.id in changed or any(o.id in changed for o in q.objectives):
                self.graph.upsert(
                    "Quest",
                    {
                        "id": q.id,
                        "title": q.title,
                        "kind": q.kind,
                        "priority": q.priority,
                        "status": q.status,
                    },
                )
            for o in q.objectives:
                if o.id in changed:
                    self.graph.upsert(
                        "Objective",
                        {
                            "id": o.id,
                            "quest": q.id,
                            "text": o.text,
                            "priority": o.priority,
                            "status": o.status,
                            "step": o.step,
                        },
                    )

    def _player_row(self) -> dict[str, Any]:
        return {
            "id": PLAYER,
            "area": self.area,
            "x": self.cell[0],
            "y": self.cell[1],
            "hp": int(self.values.get(self.spec.hp, 0)) if self.spec.hp else 0,
            "step": self.step,
            "episode": self.episode,
        }

    # ------------------------------------------------------------------ writing
    def flush(self) -> None:
        """Write everything buffered now (`MemoryStoreError` when the database refuses)."""
        if self.closed:
            return
        self._moving_entities()
        player = self._player_row()
        if self.area and (self.graph.pending or player != self._written_player):
            self.graph.upsert("Player", player)
        self._flushed_at = self.total_steps
        self.graph.flush()
        if self.area:
            self._written_player = player

    def end_episode(self) -> None:
        """An episode ended: flush when at least a quarter of `flush_every` steps are buffered
        (short episodes share one flush; `close` always flushes)."""
        if self.total_steps - self._flushed_at >= max(1, self.flush_every // 4):
            self.flush_quietly()

    def flush_quietly(self) -> None:
        """`flush`, but a database error is logged and counted, never raised: the run goes on
        and the rows stay buffered for the next try."""
        try:
            self.flush()
        except MemoryStoreError as exc:
            self.flush_errors += 1
            self.last_error = str(exc)
            logger.warning("memory flush failed (the run goes on): %s", exc)

    def close(self) -> None:
        """Flush and close the database (a second call does nothing)."""
        if self.closed:
            return
        self.flush_quietly()
        self.closed = True
        self.graph.close()

    # ------------------------------------------------------------------ reading
    def entities(self, area: str | None = None) -> list[dict[str, Any]]:
        """Remembered entities (of one area), each a row with `number` (the area's number)."""
        return [e for e in self._entities.values() if area is None or e["area"] == area]

    def stats(self) -> dict[str, int]:
        """Counters for `info["memory"]` and TensorBoard: areas discovered, quests done, ..."""
        counts = self.log.counts()
        return {
            "areas": len(self.areas),
            "entities": len(self._entities),
            "events": self.events,
            "quests_done": counts["quests_done"],
            "objectives_done": counts["objectives_done"],
            "flush_errors": self.flush_errors,
            "pending_rows": self.graph.pending,
        }
