"""The memory's part of the strategist's prompt: the quest log's head and facts, within a budget.

What: `memory_text(memory, budget_tokens)` writes a "## Memory" section: the top of the quest
log (open objectives and dynamic todos, most urgent first) and facts read with Cypher queries
(`FACT_QUERIES`: the nearest unopened chest, the doors still locked, the NPCs not talked to,
items seen and not taken, the doors between areas), each remembered place off screen with the
door to take now (`navigate.waypoint`). Lines are added in order of importance until the next one
would pass the budget (`estimate_tokens`: a byte-level bound, 1 token per 3 bytes at most for
the usual BPE vocabularies). Why: the model sees what it has learnt, never more than it can
afford.

>>> import numpy as np
>>> from metabonk_gym.gamedata import GameData, bundled_game_folder
>>> from metabonk_gym.memory.world import WorldMemory
>>> memory = WorldMemory(GameData(bundled_game_folder("BonkQuest")), None)
>>> tiles = np.zeros((20, 30), np.uint8); tiles[5, 7] = 5
>>> memory.reset({"room": 2, "seed": 0, "player_x": 3, "player_y": 4, "hp": 5},
...              {"room_tiles": tiles})
>>> print(memory_text(memory, budget_tokens=60))
## Memory (what you found before)
Quest log, most urgent first:
- [10] open the chest that holds the key of room 2
- [5] open the unopened chest at x=7, y=5 (area 2)
>>> memory.close()
"""

from __future__ import annotations

import logging
from typing import Any

from metabonk_gym.memory.navigate import waypoint
from metabonk_gym.memory.store import MemoryStoreError
from metabonk_gym.memory.world import WorldMemory

logger = logging.getLogger("metabonk_gym.memory")

#: The fact queries (Cypher, the same on both backends): name -> (query, line template).
#: Parameters: $world (the world's id prefix), $area, $x, $y (the player).
FACT_QUERIES: dict[str, tuple[str, str]] = {
    "nearest unopened chest": (
        "MATCH (e:Entity)-[:FOUND_IN]->(a:Area) WHERE a.world = $world AND e.kind = 'chest' "
        "AND e.state = 'closed' RETURN e.area AS area, a.number AS number, e.x AS x, e.y AS y "
        "ORDER BY CASE WHEN e.area = $area THEN 0 ELSE 1 END, abs(e.x - $x) + abs(e.y - $y) "
        "LIMIT 1",
        "nearest unopened chest: {where}",
    ),
    "locked doors": (
        "MATCH (t:Tile)-[:IN_AREA]->(a:Area) WHERE a.world = $world AND t.kind STARTS WITH "
        "'locked' RETURN t.area AS area, a.number AS number, t.x AS x, t.y AS y "
        "ORDER BY a.number, t.y, t.x LIMIT 4",
        "locked door: {where}",
    ),
    "NPCs not talked to": (
        "MATCH (e:Entity)-[:FOUND_IN]->(a:Area) WHERE a.world = $world AND e.kind = 'npc' "
        "AND e.state <> 'talked' RETURN e.area AS area, a.number AS number, e.x AS x, e.y AS y, "
        "e.name AS name LIMIT 3",
        "not talked to yet: {name} {where}",
    ),
    "items not taken": (
        "MATCH (e:Entity)-[:FOUND_IN]->(a:Area) WHERE a.world = $world AND e.kind = 'item' "
        "AND e.state <> 'gone' RETURN e.area AS area, a.number AS number, e.x AS x, e.y AS y, "
        "e.name AS name ORDER BY CASE WHEN e.area = $area THEN 0 ELSE 1 END LIMIT 4",
        "{name} seen {where}",
    ),
    "what you were told": (
        "MATCH (:Player)-[:DID]->(e:Event)-[:HAPPENED_IN]->(a:Area) WHERE a.world = $world "
        "AND e.kind = 'talked' AND e.note <> '' RETURN e.area AS area, a.number AS number, "
        "e.x AS x, e.y AS y, e.what AS what, e.note AS note ORDER BY e.step DESC LIMIT 2",
        "{what} told you {note} (area {number})",
    ),
    "doors between areas": (
        "MATCH (a:Area)-[c:CONNECTS]->(b:Area) WHERE a.world = $world RETURN a.id AS area, "
        "a.number AS number, b.number AS to, c.x AS x, c.y AS y ORDER BY a.number, b.number "
        "LIMIT 8",
        "the door {where} leads to area {to}",
    ),
}


def estimate_tokens(text: str) -> int:
    """An upper bound on a prompt's tokens: one per 3 UTF-8 bytes, rounded up (real BPE
    vocabularies average 3.5 to 4.5 bytes per token on English and maps).

    >>> estimate_tokens("abcdef"), estimate_tokens("")
    (2, 0)
    """
    return -(-len(text.encode()) // 3)


def fact_lines(memory: WorldMemory) -> list[str]:
    """One line per fact the queries find (current world), off-screen places with their door."""
    area = memory.area
    world = area.split(":")[0] if area else ""
    params: dict[str, Any] = {
        "world": world,
        "area": area,
        "x": memory.cell[0],
        "y": memory.cell[1],
    }
    lines = []
    for name, (query, template) in FACT_QUERIES.items():
        for row in memory.graph.query(query, params):
            where = _where(memory, row, route=name != "doors between areas")
            lines.append(template.format(where=where, **row))
    return lines


def _where(memory: WorldMemory, row: dict[str, Any], route: bool = True) -> str:
    text = f"at x={row['x']}, y={row['y']} (area {row['number']})"
    if not route:
        return text
    if row["area"] == memory.area:
        return text + " here"
    way = waypoint(memory.connections, memory.area, row["area"], (row["x"], row["y"]))
    if way is None:
        return text + ", no remembered way there"
    (x, y), doors = way
    return text + f", {doors} door(s) away: go_to x={x}, y={y} first"


def memory_text(memory: WorldMemory, budget_tokens: int = 250, top: int = 6) -> str:
    """The prompt section (see the module docstring); "" when the budget allows no fact."""
    memory.flush_quietly()
    todos = memory.log.top(top, memory.values, memory.entities())
    candidates = ["Quest log, most urgent first:"] if todos else []
    candidates += [f"- [{t.priority}] {t.text}" for t in todos]
    try:
        facts = fact_lines(memory)
    except MemoryStoreError as exc:  # the quest log (kept in Python) still goes in
        logger.warning("memory facts left out of the prompt: %s", exc)
        facts = []
    if facts:
        candidates.append("Remembered:")
        candidates += [f"- {f}" for f in facts]
    lines = ["## Memory (what you found before)"]
    used = estimate_tokens(lines[0])
    for line in candidates:
        cost = estimate_tokens("\n" + line)
        if used + cost > budget_tokens:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines) if len(lines) > 1 else ""
