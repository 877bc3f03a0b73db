"""The long-term memory's graph on the real embedded `ladybug` database: batched writes and
Cypher, persistence across processes, the Cypher export loading back into a fresh database, a
locked or corrupt database (a clear `MemoryStoreError`, the file left untouched, the run goes
on), and the Neo4j path's handling of a server that is not there."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from metabonk_gym.memory import KnowledgeGraph, MemoryStoreError, open_store
from metabonk_gym.memory.graph import _literal
from metabonk_gym.memory.store import is_server_url
from metabonk_gym.process import ChildProcess, free_port

AREA = {"world": "7", "first_step": 0, "last_step": 0, "visits": 1}


def fill(graph: KnowledgeGraph) -> None:
    for n in (1, 2, 3):
        graph.upsert("Area", {"id": f"7:{n}", "number": n, "name": f"room {n}", **AREA})
    graph.relate("CONNECTS", "7:1", "7:2", x=29, y=10)
    graph.relate("CONNECTS", "7:2", "7:3", x=28, y=4)
    graph.upsert("Tile", {"id": "7:1:29:10", "area": "7:1", "x": 29, "y": 10, "kind": "locked"})
    graph.relate("IN_AREA", "7:1:29:10", "7:1")
    chest = {"area": "7:2", "kind": "chest", "name": "chest", "state": "closed", "episode": 0}
    graph.upsert("Entity", {"id": "c1", "x": 3, "y": 4, **chest})
    graph.upsert("Entity", {"id": "c2", "x": 20, "y": 15, **chest})
    graph.relate("FOUND_IN", "c1", "7:2")
    graph.relate("FOUND_IN", "c2", "7:2")
    graph.upsert("Quest", {"id": "q", "title": 'it\'s the "main" one\nreally', "priority": 10})
    graph.upsert("Objective", {"id": "q/a", "quest": "q", "text": "a", "status": "open"})
    graph.relate("HAS_OBJECTIVE", "q", "q/a")
    graph.upsert("Player", {"id": "player", "area": "7:1", "x": 1, "y": 1})


def test_batched_writes_and_cypher(tmp_path: Path) -> None:
    graph = KnowledgeGraph(tmp_path / "g.lbdb")
    fill(graph)
    assert graph.query("MATCH (n:Area) RETURN count(n) AS c") == [{"c": 0}]  # nothing before flush
    pending = graph.pending
    graph.flush()
    assert graph.pending == 0 and graph.rows_written == pending and graph.flushes == 1
    counts = graph.counts()
    assert counts["Area"] == 3 and counts["CONNECTS"] == 2 and counts["LOCATED_IN"] == 1
    rows = graph.query("MATCH (p:Player)-[:LOCATED_IN]->(a:Area) RETURN a.number AS n")
    assert rows == [{"n": 1}]
    nearest = graph.query(
        "MATCH (e:Entity {kind: 'chest', state: 'closed'}) RETURN e.id AS id "
        "ORDER BY abs(e.x - $x) + abs(e.y - $y) LIMIT 1",
        {"x": 19, "y": 14},
    )
    assert nearest == [{"id": "c2"}]
    # The player moves: LOCATED_IN follows its area (one relationship, the last).
    graph.upsert("Player", {"id": "player", "area": "7:2", "x": 1, "y": 1})
    graph.flush()
    rows = graph.query("MATCH (p:Player)-[:LOCATED_IN]->(a:Area) RETURN a.number AS n")
    assert rows == [{"n": 2}]
    # A second flush of the same ids updates, never duplicates.
    graph.upsert("Entity", {"id": "c2", "area": "7:2", "kind": "chest", "state": "opened"})
    graph.relate("FOUND_IN", "c2", "7:2")
    graph.flush()
    assert graph.counts()["Entity"] == 2 and graph.counts()["FOUND_IN"] == 2
    assert graph.query("MATCH (e:Entity {id: 'c2'}) RETURN e.state AS s") == [{"s": "opened"}]
    graph.close()


def test_export_round_trip(tmp_path: Path) -> None:
    graph = KnowledgeGraph(tmp_path / "a.lbdb")
    fill(graph)
    script = tmp_path / "graph.cypher"
    n = graph.export_cypher(script)
    before = graph.counts()
    assert n == sum(before.values()) and n > 10
    fresh = KnowledgeGraph(tmp_path / "b.lbdb")
    assert fresh.load_cypher(script) == n
    assert fresh.counts() == before
    title = fresh.query("MATCH (q:Quest) RETURN q.title AS t")[0]["t"]
    assert title == 'it\'s the "main" one\nreally'  # quotes and newlines survive
    graph.close()
    fresh.close()


def test_literal_escapes() -> None:
    assert _literal("a'b\\c") == "'a\\'b\\\\c'"
    assert _literal(False) == "false" and _literal(-3) == "-3"


CHILD = textwrap.dedent(
    """
    import sys, gymnasium as gym, metabonk_gym
    from metabonk_gym.wrappers.memory import Memory
    env = Memory(gym.make("MetaBonk/BonkQuest-v0", state="start"), path=sys.argv[1])
    env.reset(seed=5)
    for _ in range(int(sys.argv[2])):
        env.step(4)
    print("episode", env.memory.episode, "areas", len(env.memory.areas), flush=True)
    if len(sys.argv) > 3:  # write, then hold the database open until killed
        env.memory.flush()
        print("holding", flush=True)
        import time; time.sleep(120)
    env.close()
    """
)


def run_child(path: Path, steps: int) -> str:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(steps)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_persists_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "memory.lbdb"
    assert "episode 0 areas 1" in run_child(path, 10)
    assert "episode 1 areas 1" in run_child(path, 10)  # the episode count goes on
    graph = KnowledgeGraph(path)
    assert graph.counts()["Area"] == 1
    (player,) = graph.query("MATCH (p:Player) RETURN p.episode AS e, p.step AS s")
    assert player == {"e": 1, "s": 10}
    graph.close()


def test_locked_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "memory.lbdb"
    log = tmp_path / "child.log"
    child = ChildProcess.start(
        [sys.executable, "-c", CHILD, str(path), "3", "hold"], name="memory-holder", log_path=log
    )
    try:
        child.wait_ready(lambda: "holding" in (log.read_text() if log.exists() else ""), 120)
        with pytest.raises(MemoryStoreError, match="locked by another process"):
            KnowledgeGraph(path)
    finally:
        child.stop()
    graph = KnowledgeGraph(path)  # free again, and what was written survived the kill
    assert graph.counts()["Area"] == 1
    graph.close()


def test_corrupt_database_is_a_clear_error_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "memory.lbdb"
    path.write_bytes(b"not a graph at all " * 500)
    before = path.read_bytes()
    with pytest.raises(MemoryStoreError, match="corrupt or not a ladybug database"):
        open_store(path)
    assert path.read_bytes() == before


def test_failed_flush_keeps_the_run_and_the_rows(tmp_path: Path) -> None:
    from metabonk_gym.gamedata import GameData, bundled_game_folder
    from metabonk_gym.memory.world import WorldMemory

    memory = WorldMemory(GameData(bundled_game_folder("BonkQuest")), None, flush_every=1)
    values = {"room": 1, "seed": 0, "player_x": 3, "player_y": 4, "hp": 5}
    memory.reset(values, {})
    real = memory.graph.store.write

    def refuse(statements: object) -> None:
        raise MemoryStoreError("disk full")

    memory.graph.store.write = refuse  # type: ignore[method-assign]
    memory.observe({**values, "room": 2})  # flushes every step: fails, quietly
    assert memory.flush_errors >= 1 and "disk full" in memory.last_error
    assert memory.graph.pending > 0  # rows kept for the next try
    memory.graph.store.write = real  # type: ignore[method-assign]
    memory.observe({**values, "room": 2, "player_x": 4})
    assert memory.graph.pending == 0 and memory.graph.counts()["Area"] == 2
    memory.close()


def test_neo4j_url_unreachable_is_a_clear_error() -> None:
    port = free_port()  # nothing listens there
    start = time.monotonic()
    with pytest.raises(MemoryStoreError, match="cannot reach the Neo4j server at bolt://"):
        open_store(f"bolt://127.0.0.1:{port}", timeout_s=2.0)
    assert time.monotonic() - start < 30
    with pytest.raises(MemoryStoreError, match="unknown memory URL"):
        open_store("http://127.0.0.1:7474")
    assert is_server_url("neo4j://localhost") and not is_server_url(Path("neo4j:/x"))


def test_the_prompt_keeps_the_quest_log_when_the_database_fails() -> None:
    from metabonk_gym.gamedata import GameData, bundled_game_folder
    from metabonk_gym.memory import memory_text
    from metabonk_gym.memory.world import WorldMemory

    quest = GameData(bundled_game_folder("BonkQuest"))
    memory = WorldMemory(quest, None)
    tiles = np.zeros((20, 30), np.uint8)
    tiles[10, 29] = quest.tile_classes()["door_locked"]
    memory.reset(
        {"room": 1, "seed": 0, "player_x": 3, "player_y": 4, "hp": 5}, {"room_tiles": tiles}
    )
    assert "locked door: at x=29, y=10 (area 1) here" in memory_text(memory)

    def broken(cypher: str, params: object = None) -> list:
        raise MemoryStoreError("connection lost")

    memory.graph.store.query = broken  # type: ignore[method-assign]
    text = memory_text(memory)
    assert "pick up the key of room 1" in text and "Remembered:" not in text
    del memory.graph.store.query  # the real method again
    memory.close()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"variable": "hp", "op": "bigger"}, "unknown op 'bigger'"),
        ({"all": []}, "'all' takes a non-empty list"),
        ({"vriable": "hp"}, "needs 'variable'"),
        ("often", "a condition is a mapping or true"),
    ],
)
def test_bad_conditions_are_one_line_errors(data: object, message: str) -> None:
    from metabonk_gym.memory.conditions import Condition, ConditionError

    with pytest.raises(ConditionError, match=message):
        Condition.parse(data, "quests.yaml: quests[0].done")


def test_bad_quest_files_name_the_entry() -> None:
    from metabonk_gym.memory.conditions import ConditionError
    from metabonk_gym.memory.quests import QuestLog
    from metabonk_gym.memory.spec import WorldSpec

    with pytest.raises(
        ConditionError, match=r"quests\[0\].objectives\[0\] needs an 'id' and 'done'"
    ):
        QuestLog.from_data({"quests": [{"id": "q", "objectives": [{"id": "a"}]}]})
    with pytest.raises(ConditionError, match="world.walkable names unknown tile classes"):
        WorldSpec.parse({"walkable": ["lava"]}, {"floor": 0})
