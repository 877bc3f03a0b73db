"""The BonkQuest scripted expert: reads the game's RAM and plans with A* on `room_tiles`.

Each step it picks one objective from the game state, in this order: close the sage's dialogue
box; walk onto the treasure (room 5); pick up a key lying in the room; in the sage's hall, talk
to the sage once, then open the chest that holds the key; bump into the locked exit while holding
a key; walk through the open exit. Paths avoid patrolling enemies (their cells cost a lot, cells
next to them a little) and it waits when the next cell is about to be taken by one. The A button
acts on a new press, so it never presses A on two steps in a row.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.base import AgentError, RamExpert
from metabonk_gym.experts.pathfinding import Cell, astar, direction, neighbours

# tile classes (metabonk.json "tile_classes")
T_FLOOR, T_WALL, T_DOOR_LOCKED, T_DOOR_OPEN, T_KEY = 0, 1, 2, 3, 4
T_CHEST, T_CHEST_OPEN, T_TREASURE, T_NPC, T_WATER, T_HEART = 5, 6, 7, 8, 9, 10
NONE = 0xFF
WALKABLE = (T_FLOOR, T_KEY, T_HEART, T_TREASURE)
FACING = {0: "UP", 1: "DOWN", 2: "LEFT", 3: "RIGHT"}


class BonkQuestExpert(RamExpert):
    """Plays BonkQuest from the RAM state; see the module docstring."""

    def __init__(self, env: gym.Env, seed: int | None = None) -> None:
        self.env = env
        self.game: Any = env.unwrapped
        integration = getattr(self.game, "integration", None)
        if integration is None or integration.name != "BonkQuest":
            raise AgentError("BonkQuestExpert plays BonkQuest only")
        combos = [tuple(c) for c in integration.discrete_actions]
        self.actions = {
            name: combos.index((name,)) for name in ("UP", "DOWN", "LEFT", "RIGHT", "A")
        }
        self.noop = combos.index(())
        self._last = self.noop
        self.objective = ""

    # ------------------------------------------------------------------ planning
    def _press_a(self) -> int:
        return self.noop if self._last == self.actions["A"] else self.actions["A"]

    def _decide(self) -> int:
        if self._var("won") or self._var("lost"):
            return self.noop
        if self._var("dialogue_open"):
            self.objective = "close dialogue"
            return self._press_a()
        tiles = self.game.read_array("room_tiles")
        me: Cell = (self._var("player_y"), self._var("player_x"))
        treasure = (self._var("treasure_y"), self._var("treasure_x"))
        key = (self._var("key_y"), self._var("key_x"))
        door = (self._var("exit_y"), self._var("exit_x"))
        if treasure[0] != NONE:
            self.objective = "treasure"
            return self._walk_to(tiles, me, treasure)
        if key[0] != NONE and tiles[key] == T_KEY:
            self.objective = "key"
            return self._walk_to(tiles, me, key)
        keys = self._var("keys")
        if door[0] != NONE and tiles[door] == T_DOOR_LOCKED:
            if keys > 0:
                self.objective = "unlock door"
                return self._bump(tiles, me, door)
            npc = (self._var("npc_y"), self._var("npc_x"))
            if npc[0] != NONE and self._var("talked") == 0:
                self.objective = "talk to the sage"
                return self._use(tiles, me, npc)
            chest = self._key_chest(tiles)
            if chest is not None:
                self.objective = "open the key chest"
                return self._use(tiles, me, chest)
            return self.noop
        if door[0] != NONE and tiles[door] == T_DOOR_OPEN:
            self.objective = "exit"
            return self._walk_to(tiles, me, door)
        return self.noop

    def _key_chest(self, tiles: np.ndarray) -> Cell | None:
        """The closed chest that holds the key (`key_chest` indexes chests in reading order)."""
        cells = [
            (int(r), int(c))
            for r, c in zip(*np.nonzero((tiles == T_CHEST) | (tiles == T_CHEST_OPEN)))
        ]
        index = self._var("key_chest")
        if index < len(cells) and tiles[cells[index]] == T_CHEST:
            return cells[index]
        closed = [c for c in cells if tiles[c] == T_CHEST]
        return closed[0] if closed else None

    def _costs(self, tiles: np.ndarray) -> tuple[np.ndarray, set[Cell]]:
        cost = np.ones(tiles.shape, dtype=np.float64)
        danger: set[Cell] = set()
        active = self.game.read_array("enemy_active")
        xs, ys = self.game.read_array("enemy_x"), self.game.read_array("enemy_y")
        for i in np.nonzero(active)[0]:
            cell = (int(ys[i]), int(xs[i]))
            danger.add(cell)
            cost[cell] += 40.0
            for _, n in neighbours(cell, tiles.shape):
                danger.add(n)
                cost[n] += 6.0
        return cost, danger

    def _passable(self, tiles: np.ndarray) -> np.ndarray:
        return np.isin(tiles, WALKABLE)

    def _step_along(self, tiles: np.ndarray, me: Cell, goals: set[Cell]) -> int | None:
        cost, danger = self._costs(tiles)
        path = astar(self._passable(tiles), me, goals, cost)
        if path is None:
            path = astar(self._passable(tiles), me, goals)
        if path is None or len(path) < 2:
            return None
        nxt = path[1]
        if nxt in danger and me not in danger and self._var("invuln") == 0:
            return self.noop  # let the enemy pass
        return self.actions[direction(me, nxt)]

    def _walk_to(self, tiles: np.ndarray, me: Cell, target: Cell) -> int:
        step = self._step_along(tiles, me, {target})
        return self.noop if step is None else step

    def _adjacent(self, tiles: np.ndarray, target: Cell) -> set[Cell]:
        passable = self._passable(tiles)
        return {n for _, n in neighbours(target, tiles.shape) if passable[n]}

    def _bump(self, tiles: np.ndarray, me: Cell, target: Cell) -> int:
        """Stand next to `target` and push into it (doors open on a bump)."""
        if abs(me[0] - target[0]) + abs(me[1] - target[1]) == 1:
            return self.actions[direction(me, target)]
        step = self._step_along(tiles, me, self._adjacent(tiles, target))
        return self.noop if step is None else step

    def _use(self, tiles: np.ndarray, me: Cell, target: Cell) -> int:
        """Stand next to `target`, face it, press A (chests and the sage)."""
        if abs(me[0] - target[0]) + abs(me[1] - target[1]) == 1:
            want = direction(me, target)
            if FACING.get(self._var("facing")) != want:
                return self.actions[want]  # blocked move: turns to face it
            return self._press_a()
        step = self._step_along(tiles, me, self._adjacent(tiles, target))
        return self.noop if step is None else step
