"""The rules of the bundled games, played on the real emulator through the env: named starts put
the player in the room or wave a rule needs, RAM pokes (`write_variable`) stand in for long play
(low HP, the clock near 5:00, enough XP), and the player walks along A* paths over the room's
tiles as the scripted expert does. `scripts/check_bonkquest.py` and `scripts/check_bonkarena.py`
check the same rules on the bare core, outside pytest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.pathfinding import astar, direction
from metabonk_gym.gamedata import GameData, bundled_game_folder

QUEST = GameData(bundled_game_folder("BonkQuest"))
ARENA = GameData(bundled_game_folder("BonkArena"))


def action_of(game: GameData, *buttons: str) -> int:
    """The index of the discrete action pressing exactly `buttons` (metabonk.json)."""
    combos = [sorted(c) for c in game.manifest["discrete_actions"]]
    return combos.index(sorted(buttons))


# BonkQuest: its discrete actions and the tile ids of metabonk.json's tile_classes
NOOP, A = action_of(QUEST), action_of(QUEST, "A")
MOVES = {name: action_of(QUEST, name) for name in ("UP", "DOWN", "LEFT", "RIGHT")}
TILE = QUEST.tile_classes()
DOOR_LOCKED, DOOR_OPEN, TREASURE, NPC = (
    TILE[n] for n in ("door_locked", "door", "treasure", "npc")
)
WALKABLE = tuple(TILE[n] for n in ("floor", "key", "heart", "treasure"))
# BonkArena: its discrete actions and upgrade enum (metabonk.json "upgrades")
ARENA_NOOP, ARENA_DOWN, ARENA_A = action_of(ARENA), action_of(ARENA, "DOWN"), action_of(ARENA, "A")
WIN_FRAMES = 5 * 60 * 60  # 5:00 at 60 frames per second
UPGRADES = [u["name"] for u in sorted(ARENA.manifest["upgrades"], key=lambda u: u["id"])]
#: the build variable each upgrade changes (heal restores hp)
STATS = {
    "damage": "damage",
    "firerate": "fire_cooldown",
    "speed": "player_speed",
    "maxhp": "max_hp",
    "heal": "hp",
    "magnet": "pickup_radius",
    "multi": "proj_count",
    "armor": "armor",
}

Cell = tuple[int, int]  # (row, column) = (y, x), as `astar` takes them
Info = dict[str, Any]


def me(env: gym.Env) -> Cell:
    game = env.unwrapped
    return game.read_variable("player_y"), game.read_variable("player_x")


def enemy_cells(env: gym.Env) -> set[Cell]:
    game = env.unwrapped
    active = game.read_array("enemy_active").astype(bool)
    xs, ys = game.read_array("enemy_x")[active], game.read_array("enemy_y")[active]
    return {(int(y), int(x)) for x, y in zip(xs, ys)}


def step_towards(env: gym.Env, goals: set[Cell], avoid_enemies: bool) -> int:
    """The first move of an A* path to `goals` (a goal that is not walkable is bumped into);
    with `avoid_enemies`, enemies and the cells next to them are walls. NOOP if no path."""
    tiles = env.unwrapped.read_array("room_tiles")
    passable = np.isin(tiles, WALKABLE)
    if avoid_enemies:
        for r, c in enemy_cells(env):
            for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                if 0 <= r + dr < tiles.shape[0] and 0 <= c + dc < tiles.shape[1]:
                    passable[r + dr, c + dc] = False
    path = astar(passable, me(env), goals)
    return MOVES[direction(path[0], path[1])] if path and len(path) > 1 else NOOP


def walk(env: gym.Env, goal: Cell, max_steps: int = 300) -> tuple[Info, bool]:
    """Walk to `goal` around the enemies (re-planned every step); stops on the goal or when the
    episode terminates. Returns the last info and whether it terminated."""
    info: Info = {}
    for _ in range(max_steps):
        if me(env) == goal:
            return info, False
        _, _, terminated, truncated, info = env.step(step_towards(env, {goal}, True))
        assert not truncated
        if terminated:
            return info, True
    raise AssertionError(f"did not reach {goal}: at {me(env)} after {max_steps} steps")


def chase(env: gym.Env, until: Callable[[Info], bool], max_steps: int = 300) -> tuple[Info, bool]:
    """Walk into the nearest enemy, wherever it patrols now, until `until(info)` or the end."""
    for _ in range(max_steps):
        _, _, terminated, _, info = env.step(step_towards(env, enemy_cells(env), False))
        if until(info) or terminated:
            return info, terminated
    raise AssertionError(f"{max_steps} steps of chasing the enemies and still {info}")


def beside(env: gym.Env, target: Cell) -> tuple[Cell, int]:
    """A walkable cell next to `target`, and the move from there into `target`."""
    tiles = env.unwrapped.read_array("room_tiles")
    for name, (dr, dc) in {"UP": (1, 0), "DOWN": (-1, 0), "LEFT": (0, 1), "RIGHT": (0, -1)}.items():
        r, c = target[0] + dr, target[1] + dc
        if 0 <= r < tiles.shape[0] and 0 <= c < tiles.shape[1] and tiles[r, c] in WALKABLE:
            return (r, c), MOVES[name]
    raise AssertionError(f"no walkable cell next to {target}")


# ---------------------------------------------------------------------------------- BonkQuest
def test_quest_touching_a_patrolling_enemy_costs_hp(quest) -> None:
    _, info = quest.reset(seed=0, options={"state": "room1", "game_seed": 3})
    assert info["hp"] == info["max_hp"] == 5 and info["hits"] == 0 and enemy_cells(quest)
    info, terminated = chase(quest, lambda i: i["hp"] < 5)
    assert info["hp"] == 4 and info["hits"] == 1 and not terminated
    assert info["invuln"] > 0, "a hit makes the player invulnerable for a while"
    assert info["reward_terms"]["hp"] < 0 and info["lost"] == 0


def test_quest_hp_reaching_zero_loses_and_ends_the_episode(quest) -> None:
    quest.reset(seed=0, options={"state": "room1", "game_seed": 3})
    quest.unwrapped.write_variable("hp", 1)  # one hit from death
    info, terminated = chase(quest, lambda i: i["hp"] == 0)
    assert terminated and info["hp"] == 0 and info["lost"] == 1 and info["won"] == 0
    assert info["reward_terms"]["lost"] < 0
    frozen = quest.unwrapped.read_memory(0x02000010, 0x100)  # the game state after the header
    quest.step(MOVES["RIGHT"])
    assert quest.unwrapped.read_memory(0x02000010, 0x100) == frozen, "the game freezes when lost"


def test_quest_locked_door_needs_a_key(quest) -> None:
    _, info = quest.reset(seed=0, options={"state": "room1", "game_seed": 1})
    assert info["keys"] == 0 and info["room"] == 1
    door = (info["exit_y"], info["exit_x"])
    assert quest.unwrapped.read_array("room_tiles")[door] == DOOR_LOCKED
    front, into = beside(quest, door)

    walk(quest, front)
    for _ in range(4):  # without a key, walking into the door does nothing
        _, _, _, _, info = quest.step(into)
    assert me(quest) == front and info["room"] == 1 and info["rooms_visited"] == 1
    assert quest.unwrapped.read_array("room_tiles")[door] == DOOR_LOCKED

    info, _ = walk(quest, (info["key_y"], info["key_x"]))
    assert info["keys"] == 1, "walking onto the key takes it"
    walk(quest, front)
    _, _, _, _, info = quest.step(into)  # a key opens the door; the player stays
    assert quest.unwrapped.read_array("room_tiles")[door] == DOOR_OPEN
    assert info["keys"] == 0 and info["doors_open"] & 2 and info["room"] == 1
    for _ in range(3):
        _, _, _, _, info = quest.step(into)
        if info["room"] == 2:
            break
    assert info["room"] == 2 and info["rooms_visited"] == 2, "the open door leads to room 2"


def test_quest_final_treasure_wins(quest) -> None:
    _, info = quest.reset(seed=0, options={"state": "room5", "game_seed": 11})
    assert info["room"] == 5 and info["won"] == 0
    game = quest.unwrapped
    treasure = (game.read_variable("treasure_y"), game.read_variable("treasure_x"))
    assert game.read_array("room_tiles")[treasure] == TREASURE
    info, terminated = walk(quest, treasure)
    assert terminated and info["won"] == 1 and info["lost"] == 0
    assert info["reward_terms"]["won"] > 0


def test_quest_npc_dialogue_opens_with_a(quest) -> None:
    _, info = quest.reset(seed=0, options={"state": "room2", "game_seed": 5})
    npc = (info["npc_y"], info["npc_x"])
    assert quest.unwrapped.read_array("room_tiles")[npc] == NPC
    front, into = beside(quest, npc)
    walk(quest, front)
    _, _, _, _, info = quest.step(into)  # bumping the sage turns the player to face him
    assert me(quest) == front and info["dialogue_open"] == 0 and info["talked"] == 0
    quest.step(A)
    _, _, _, _, info = quest.step(NOOP)
    assert info["dialogue_open"] == 1 and info["talked"] == 1
    enemies = quest.unwrapped.read_array("enemy_x").tolist()
    for _ in range(5):
        _, _, _, _, info = quest.step(NOOP)
    assert info["dialogue_open"] == 1, "the box stays open until A"
    assert quest.unwrapped.read_array("enemy_x").tolist() == enemies, "the world waits meanwhile"
    quest.step(A)
    _, _, _, _, info = quest.step(NOOP)
    assert info["dialogue_open"] == 0


# ---------------------------------------------------------------------------------- BonkArena
def test_arena_enemies_hurt_the_player(arena) -> None:
    _, info = arena.reset(seed=0, options={"state": "wave5", "game_seed": 0})
    assert info["hp"] == info["max_hp"] and info["enemies"] > 0
    for _ in range(300):  # stand still: the wave closes in
        _, _, terminated, _, info = arena.step(ARENA_NOOP)
        if info["hp"] < info["max_hp"]:
            break
    assert info["hp"] < info["max_hp"] and not terminated and info["lost"] == 0
    assert arena.unwrapped.read_variable("damage_taken") == info["max_hp"] - info["hp"]
    assert info["invuln"] > 0


def test_arena_hp_reaching_zero_loses_and_ends_the_episode(arena) -> None:
    arena.reset(seed=0, options={"state": "wave5", "game_seed": 0})
    arena.unwrapped.write_variable("hp", 1)
    for _ in range(300):
        _, _, terminated, _, info = arena.step(ARENA_NOOP)
        if terminated:
            break
    assert terminated and info["lost"] == 1 and info["hp"] == 0 and info["won"] == 0
    assert info["time_frames"] < WIN_FRAMES


def test_arena_surviving_to_five_minutes_wins(arena) -> None:
    _, info = arena.reset(seed=0, options={"state": "wave5", "game_seed": 0})
    assert info["time_frames"] == 4 * 3600 and info["time_s"] == 240
    game = arena.unwrapped
    game.write_variable("max_hp", 60000)  # nothing kills the player in the last seconds
    game.write_variable("hp", 60000)
    game.write_variable("time_frames", WIN_FRAMES - 120)  # 4:58
    game.write_variable("time_s", WIN_FRAMES // 60 - 2)
    steps = 0
    terminated = False
    while not terminated and steps < 100:
        _, _, terminated, _, info = arena.step(ARENA_NOOP)
        steps += 1
    assert terminated and info["won"] == 1 and info["lost"] == 0
    assert info["time_frames"] == WIN_FRAMES and info["time_s"] == 300
    assert steps == 120 // arena.unwrapped.frameskip, "won the step the clock reached 5:00"


def test_arena_level_up_menu_choice_changes_the_build(arena) -> None:
    _, info = arena.reset(seed=0, options={"state": "start", "game_seed": 0})
    assert info["level"] == 1 and info["menu_open"] == 0
    game = arena.unwrapped
    game.write_variable("xp", info["xp_next"])  # enough XP for a level
    _, _, _, _, info = arena.step(ARENA_NOOP)
    assert info["menu_open"] == 1 and info["level"] == 2
    options = game.read_array("menu_options").tolist()
    assert len(set(options)) == 3 and all(0 <= o < len(UPGRADES) for o in options)
    before = game.read_array("upgrades")
    stats = {name: game.read_variable(name) for name in STATS.values()}
    clock = info["time_frames"]
    for _ in range(5):
        _, _, _, _, info = arena.step(ARENA_NOOP)
    assert info["menu_open"] == 1 and info["time_frames"] == clock, "play pauses in the menu"

    arena.step(ARENA_DOWN)  # the cursor moves on a new press
    _, _, _, _, info = arena.step(ARENA_NOOP)
    assert info["menu_cursor"] == 1
    chosen = options[1]
    _, _, terminated, _, info = arena.step(ARENA_A)
    assert info["menu_open"] == 0 and not terminated
    gained = game.read_array("upgrades").astype(int) - before
    assert gained.tolist() == [int(i == chosen) for i in range(len(UPGRADES))], (
        f"A takes the highlighted {UPGRADES[chosen]}, nothing else"
    )
    stat = STATS[UPGRADES[chosen]]
    if stat != "hp":  # healing at full HP changes nothing; the seed fixes the offers anyway
        assert game.read_variable(stat) != stats[stat], f"{UPGRADES[chosen]} changes {stat}"
    _, _, _, _, info = arena.step(ARENA_NOOP)
    assert info["time_frames"] > clock, "play resumes"
