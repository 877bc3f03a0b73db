"""The memory on BonkQuest for real: the scripted expert plays the whole game under the `Memory`
wrapper; the quest log follows it (a key picked up closes its objective, a locked door seen opens
one), the graph holds the rooms, doors, events and entities, dynamic todos come and go, the
prompt section stays within its token budget, and `PauseToThink` over the wrapper shows it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from metabonk_gym.wrappers.memory import Memory

from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.games.BonkQuest.game import BonkQuestExpert
from metabonk_gym.memory import WorldMemory, estimate_tokens, memory_text
from metabonk_gym.memory.navigate import remembered_path, waypoint
from metabonk_gym.think.pause_to_think import PauseToThink
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.think.view import GameView

QUEST = GameData(bundled_game_folder("BonkQuest"))


@dataclass
class Playthrough:
    env: Memory
    #: per step: (info, {objective id: status})
    steps: list[tuple[dict[str, Any], dict[str, str]]] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)


def statuses(memory: WorldMemory) -> dict[str, str]:
    return {o.id: o.status for q in memory.log.quests for o in q.objectives} | {
        q.id: q.status for q in memory.log.quests
    }


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Playthrough]:
    path = tmp_path_factory.mktemp("memory") / "quest.lbdb"
    env = Memory(gym.make("MetaBonk/BonkQuest-v0", state="start"), path=path, flush_every=64)
    obs, info = env.reset(seed=3)
    run = Playthrough(env, [(info, statuses(env.memory))])
    expert = BonkQuestExpert(env)
    for _ in range(2000):
        obs, _, terminated, truncated, info = env.step(expert.act(obs, info))
        run.steps.append((info, statuses(env.memory)))
        if info["room"] == 3 and not run.prompts:
            run.prompts.append(env.prompt_section())
        if terminated or truncated:
            break
    env.env.close()  # the emulator (one per process); the memory stays open for the tests
    yield run
    env.memory.close()


def first(run: Playthrough, pred: Any) -> int:
    return next(i for i, (info, _) in enumerate(run.steps) if pred(info))


def test_the_expert_wins_and_every_quest_closes(played: Playthrough) -> None:
    info, final = played.steps[-1]
    assert info["won"] == 1
    assert final["treasure"] == final["sage"] == final["rooms"] == "done"
    assert all(s == "done" for k, s in final.items() if k.startswith("treasure/"))
    assert info["memory"]["quests_done"] == 3 and info["memory"]["areas"] == 5


def test_a_key_picked_up_closes_its_objective(played: Playthrough) -> None:
    for room in (1, 3, 4):
        taken = first(played, lambda i, r=room: i["room"] == r and i["keys"] == 1)
        assert played.steps[taken - 1][1][f"treasure/key{room}"] == "open"
        assert played.steps[taken][1][f"treasure/key{room}"] == "done"


def test_a_locked_door_opens_an_objective(played: Playthrough) -> None:
    for room in (2, 3, 4):
        enter = first(played, lambda i, r=room: i["room"] == r)
        assert played.steps[enter - 1][1][f"treasure/door{room}"] == "pending"
        assert played.steps[enter][1][f"treasure/door{room}"] == "open"  # its locked door seen
        opened = first(played, lambda i, r=room: (i["doors_open"] >> r) & 1)
        assert played.steps[opened][1][f"treasure/door{room}"] == "done"


def test_the_graph_holds_rooms_doors_events_and_entities(played: Playthrough) -> None:
    memory = played.env.memory
    memory.flush()
    graph = memory.graph
    links = graph.query(
        "MATCH (a:Area)-[c:CONNECTS]->(b:Area) RETURN a.number AS src, b.number AS dst "
        "ORDER BY src, dst"
    )
    forward = [(1, 2), (2, 3), (3, 4), (4, 5)]
    assert sorted((r["src"], r["dst"]) for r in links) == sorted(
        forward + [(b, a) for a, b in forward]
    )
    kinds = {
        (r["k"], r["w"])
        for r in graph.query("MATCH (:Player)-[:DID]->(e:Event) RETURN e.kind AS k, e.what AS w")
    }
    assert {("picked_up", "key"), ("opened", "door"), ("talked", "sage"), ("won", "treasure")} <= (
        kinds
    )
    sage = graph.query("MATCH (e:Entity {kind: 'npc'}) RETURN e.state AS s")
    assert sage == [{"s": "talked"}]
    chests = graph.query(
        "MATCH (e:Entity {kind: 'chest'})-[:FOUND_IN]->(a:Area) RETURN a.number AS n, "
        "e.state AS s ORDER BY n"
    )
    assert sum(r["n"] == 2 for r in chests) == 3  # the sage's hall has three
    assert [r["n"] for r in chests if r["s"] == "opened"] == [2]  # the expert opens the key's
    keys_gone = graph.query(
        "MATCH (e:Entity {name: 'key'}) WHERE e.state = 'gone' RETURN count(e) AS c"
    )
    assert keys_gone == [{"c": 3}]  # rooms 1, 3 and 4 (room 2's key is in its chest)
    player = graph.query("MATCH (p:Player)-[:LOCATED_IN]->(a:Area) RETURN a.number AS n")
    assert player == [{"n": 5}]
    objectives = graph.query(
        "MATCH (q:Quest {id: 'treasure'})-[:HAS_OBJECTIVE]->(o:Objective) "
        "WHERE o.status = 'done' RETURN count(o) AS c"
    )
    assert objectives == [{"c": 9}]


def test_remembered_places_off_screen_get_a_route(played: Playthrough) -> None:
    text = played.prompts[0]  # written in room 3
    assert "## Memory" in text and "the door at x=0, y=10 (area 3) leads to area 2" in text
    memory = played.env.memory
    world = memory.area.split(":")[0]
    area = {n: f"{world}:{n}" for n in range(1, 6)}
    # Entering a room links its exit to the next room and the doorway it came in by back.
    assert memory.connections[(area[2], area[1])] == (0, 10)
    exit_1 = memory.connections[(area[1], area[2])]
    assert memory.grids[area[1]][exit_1[1], exit_1[0]] == QUEST.tile_classes()["door"]
    # From the vault, the unopened chests of room 2 are three doors back, the first at x=0.
    assert waypoint(memory.connections, area[5], area[2], (1, 1)) == ((0, 10), 3)
    assert waypoint(memory.connections, area[1], area[3], (5, 5)) == (exit_1, 2)
    # A* over the remembered walkable tiles of room 2 reaches its west door from the east one.
    walkable = np.isin(memory.grids[area[2]], list(memory.spec.walkable))
    path = remembered_path(walkable, memory.connections[(area[2], area[3])], (0, 10))
    assert path is not None and path[-1] == (0, 10)


def test_todos_from_rules(tmp_path: Path) -> None:
    memory = WorldMemory(QUEST, None)
    tiles = np.zeros((20, 30), np.uint8)
    tiles[3, 3] = QUEST.tile_classes()["npc"]
    values = {"room": 2, "seed": 1, "player_x": 5, "player_y": 5, "hp": 5}
    memory.reset(values, {"room_tiles": tiles})
    todos = [t.id.split(":")[0] for t in memory.log.todos(memory.values, memory.entities())]
    assert todos == ["npc"]
    memory.observe({**values, "hp": 2})
    top = memory.log.top(10, memory.values, memory.entities())
    assert [t.priority for t in top] == sorted((t.priority for t in top), reverse=True)
    assert "heal" in [t.id for t in top] and top[0].priority == 10
    memory.observe({**values, "hp": 2, "player_x": 3, "player_y": 4, "talked": 1})
    todos = [t.id.split(":")[0] for t in memory.log.todos(memory.values, memory.entities())]
    assert todos == ["heal"]  # the sage was talked to: no NPC todo any more
    memory.close()


def test_prompt_section_stays_within_its_budget() -> None:
    memory = WorldMemory(QUEST, None)
    tiles = np.zeros((20, 30), np.uint8)
    tiles[2:18:2, 2:28:3] = QUEST.tile_classes()["chest"]  # 80 chests, 80 todos and facts
    memory.reset(
        {"room": 2, "seed": 1, "player_x": 1, "player_y": 1, "hp": 1}, {"room_tiles": tiles}
    )
    sizes = []
    for budget in (10, 40, 120, 400):
        text = memory_text(memory, budget_tokens=budget)
        assert estimate_tokens(text) <= budget
        sizes.append(len(text))
    assert sizes[0] == 0 < sizes[1] < sizes[2] < sizes[3]
    assert "[10]" in memory_text(memory, budget_tokens=40)  # the main quest comes first
    memory.close()


def test_pause_to_think_shows_the_memory(tmp_path: Path) -> None:
    env = PauseToThink(Memory(gym.make("MetaBonk/BonkQuest-v0"), path=None), engine="oracle")
    try:
        _, info = env.reset(seed=0)
        builder = PromptBuilder.for_env(env.env, env.adapter, None)
        text = builder.user_text(GameView.capture(env.env, info, 0), [], "start")
        assert "## Memory (what you found before)" in text and "pick up the key of room 1" in text
        plain = PromptBuilder.for_env(env.env.env, env.adapter, None)
        assert "## Memory" not in plain.user_text(GameView.capture(env.env, info, 0), [], "start")
    finally:
        env.close()
