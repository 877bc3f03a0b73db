"""System 1: `DirectiveFollower` turns the directive in force into button presses, every step.

What: for tile games it walks A* shortest paths over the room's tile map to the directive's target
(never through walls, water, closed chests or the sage; onto a door only when the door is the
target), steps around enemies (their cell and the cells they can enter this step are blocked near
the player, cells next to them cost extra), presses A next to a chest or the sage (releasing it in
between, since the games react to new presses), closes dialogue boxes, and flees when an enemy is
about to step onto it. In BonkArena it steers in eight directions (towards targets, away from
enemies) and moves the level-up menu's cursor to the chosen option before pressing A.
Why: a directive is only worth as much as its execution; with this follower an oracle strategist
wins BonkQuest (see `metabonk bench think`), so the benchmark measures the strategist alone.
Path finding is the scripted experts' A* (`metabonk_gym.experts.pathfinding`), used in (x, y).

>>> grid = np.ones((3, 4), bool); grid[1, 1:3] = False   # two walls in the middle row
>>> path_cells(grid, (0, 1), [(3, 1)])
[(0, 1), (0, 0), (1, 0), (2, 0), (3, 0), (3, 1)]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from metabonk_gym.think.directive import Directive
from metabonk_gym.think.games import (
    CELL,
    QUEST_TILE_IDS,
    ArenaAdapter,
    GameAdapter,
    QuestAdapter,
    adapter_for,
)
from metabonk_gym.think.view import GameView

DIRS: dict[str, tuple[int, int]] = {"UP": (0, -1), "DOWN": (0, 1), "LEFT": (-1, 0), "RIGHT": (1, 0)}
WALKABLE = {QUEST_TILE_IDS[n] for n in ("floor", "key", "heart", "treasure")}
INTERACT = {QUEST_TILE_IDS["chest"], QUEST_TILE_IDS["npc"]}
DOORS = {QUEST_TILE_IDS["door"], QUEST_TILE_IDS["door_locked"]}


def path_cells(
    passable: np.ndarray,
    start: tuple[int, int],
    goals: Iterable[tuple[int, int]],
    extra_cost: np.ndarray | None = None,
) -> list[tuple[int, int]] | None:
    """A* (`metabonk_gym.experts.pathfinding`) in this module's (x, y) cells: the cells from
    `start` to the nearest reachable goal (a goal may itself be impassable, like a door);
    `extra_cost[y, x]` is added to the unit cost of entering a cell. None when unreachable."""
    from metabonk_gym.experts.pathfinding import astar

    cost = None if extra_cost is None else 1.0 + extra_cost
    path = astar(passable, (start[1], start[0]), {(int(y), int(x)) for x, y in goals}, cost)
    return None if path is None else [(c, r) for r, c in path]


class DirectiveFollower:
    """Base follower: maps button combos to the env's discrete actions; see `make_follower`."""

    def __init__(self, adapter: GameAdapter, env: Any) -> None:
        self.adapter = adapter
        self.env = env
        self.last_action = 0
        self.rng = np.random.default_rng(0)

    def reset(self, seed: int | None = None) -> None:
        """Forget per-episode state (enemy tracks, explore targets)."""
        self.last_action = 0
        self.rng = np.random.default_rng(seed)

    def action_for(self, *buttons: str) -> int:
        """The discrete action pressing `buttons` (`metabonk_gym.experts.base.action_index`)."""
        from metabonk_gym.experts.base import action_index

        return action_index(self.env, set(buttons))

    def press_fresh(self, *buttons: str) -> int:
        """`buttons` if they were not held last step, else release first (games react to presses)."""
        action = self.action_for(*buttons)
        return 0 if self.last_action == action else action

    def act(self, view: GameView, directive: Directive) -> int:
        """The action for this step (records it for `press_fresh`)."""
        action = self._act(view, directive)
        self.last_action = action
        return action

    def _act(self, view: GameView, directive: Directive) -> int:
        cell, tile = self.adapter.player_cell(view), directive.tile
        if directive.action in ("press_a",):
            return self.press_fresh("A")
        if tile is None or cell is None or cell == tile:
            return 0
        dx, dy = tile[0] - cell[0], tile[1] - cell[1]
        if abs(dx) >= abs(dy):
            return self.action_for("RIGHT" if dx > 0 else "LEFT")
        return self.action_for("DOWN" if dy > 0 else "UP")


class QuestFollower(DirectiveFollower):
    """BonkQuest: A* over `room_tiles`, enemy-aware; see the module docstring."""

    adapter: QuestAdapter

    def __init__(self, adapter: QuestAdapter, env: Any) -> None:
        super().__init__(adapter, env)
        self._room = -1
        self._last_enemies: list[tuple[int, int]] = []
        self._axis: dict[int, tuple[int, int]] = {}
        self._explore: tuple[int, int] | None = None

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._room, self._last_enemies, self._axis, self._explore = -1, [], {}, None

    # ------------------------------------------------------------------ enemies
    def _track(self, view: GameView) -> list[tuple[int, int]]:
        """Current enemy cells; learns each enemy's patrol axis from its moves."""
        enemies = self.adapter.enemies(view)
        if view.get("room") != self._room:
            self._room, self._axis, self._last_enemies, self._explore = (
                view.get("room"),
                {},
                [],
                None,
            )
        if len(enemies) == len(self._last_enemies):
            for i, (new, old) in enumerate(zip(enemies, self._last_enemies)):
                if new != old:
                    self._axis[i] = (1, 0) if new[1] == old[1] else (0, 1)
        self._last_enemies = enemies
        return enemies

    def _danger(self, enemies: list[tuple[int, int]]) -> set[tuple[int, int]]:
        """Cells an enemy occupies or can enter during this step."""
        cells: set[tuple[int, int]] = set()
        for i, (x, y) in enumerate(enemies):
            cells.add((x, y))
            axis = self._axis.get(i)
            steps = [(axis[0], axis[1]), (-axis[0], -axis[1])] if axis else list(DIRS.values())
            for dx, dy in steps:
                cells.add((x + dx, y + dy))
        return cells

    # ------------------------------------------------------------------ acting
    def _act(self, view: GameView, directive: Directive) -> int:
        if view.get("dialogue_open"):
            return self.press_fresh("A")
        tiles = self.adapter.tiles(view)
        cell = self.adapter.player_cell(view)
        if tiles is None or cell is None:
            return super()._act(view, directive)
        enemies = self._track(view)
        danger = self._danger(enemies)
        passable = np.isin(tiles, list(WALKABLE))
        near = {c for c in danger if abs(c[0] - cell[0]) + abs(c[1] - cell[1]) <= 3}
        cost = np.zeros(tiles.shape, np.float32)
        for ex, ey in enemies:
            y0, y1, x0, x1 = max(0, ey - 2), ey + 3, max(0, ex - 2), ex + 3
            cost[y0:y1, x0:x1] += 3.0
        if cell in danger:  # an enemy can step onto us this step: get out first
            return self._flee(tiles, passable, cell, enemies, danger)
        action = directive.action
        if action in ("go_to", "collect") and directive.tile is not None:
            return self._walk(passable, cost, near, cell, [directive.tile])
        if action in ("open", "talk"):
            return self._interact(tiles, passable, cost, near, cell, directive)
        if action == "flee":
            return self._flee(tiles, passable, cell, enemies, danger)
        if action == "explore":
            if self._explore is None or self._explore == cell:
                floor = np.argwhere(passable)
                y, x = floor[int(self.rng.integers(len(floor)))]
                self._explore = (int(x), int(y))
            return self._walk(passable, cost, near, cell, [self._explore])
        return 0  # wait

    def _walk(
        self,
        passable: np.ndarray,
        cost: np.ndarray,
        blocked: set[tuple[int, int]],
        cell: tuple[int, int],
        goals: list[tuple[int, int]],
    ) -> int:
        """One step along the cheapest path avoiding `blocked` cells (none if there is none)."""
        if cell in goals:
            return 0
        grid = passable.copy()
        for x, y in blocked:
            if 0 <= y < grid.shape[0] and 0 <= x < grid.shape[1]:
                grid[y, x] = False
        safe_goals = [g for g in goals if g not in blocked]
        path = path_cells(grid, cell, safe_goals, cost) if safe_goals else None
        if path is None or len(path) < 2:
            return 0  # wait for the way to clear
        return self._step_towards(cell, path[1])

    def _step_towards(self, cell: tuple[int, int], nxt: tuple[int, int]) -> int:
        dx, dy = nxt[0] - cell[0], nxt[1] - cell[1]
        for name, d in DIRS.items():
            if d == (dx, dy):
                return self.action_for(name)
        return 0

    def _interact(
        self,
        tiles: np.ndarray,
        passable: np.ndarray,
        cost: np.ndarray,
        blocked: set[tuple[int, int]],
        cell: tuple[int, int],
        directive: Directive,
    ) -> int:
        wanted = (
            {QUEST_TILE_IDS["npc"]}
            if directive.action == "talk"
            else {QUEST_TILE_IDS["chest"], QUEST_TILE_IDS["door_locked"]}
        )
        if directive.tile is not None:
            targets = [directive.tile]
        else:
            found = [(int(x), int(y)) for y, x in np.argwhere(np.isin(tiles, list(wanted)))]
            targets = sorted(found, key=lambda t: abs(t[0] - cell[0]) + abs(t[1] - cell[1]))[:1]
        if not targets:
            return 0
        tx, ty = targets[0]
        kind = int(tiles[ty, tx])
        if (
            kind in DOORS
        ):  # bump into a locked door (with a key) to unlock it; walk into an open one
            return self._walk(passable, cost, blocked, cell, [(tx, ty)])
        if abs(tx - cell[0]) + abs(ty - cell[1]) == 1:
            if kind in INTERACT:
                return self.press_fresh("A")
            return 0
        around = [(tx + dx, ty + dy) for dx, dy in DIRS.values()]
        around = [
            (x, y)
            for x, y in around
            if 0 <= y < tiles.shape[0] and 0 <= x < tiles.shape[1] and passable[y, x]
        ]
        return self._walk(passable, cost, blocked, cell, around)

    def _flee(
        self,
        tiles: np.ndarray,
        passable: np.ndarray,
        cell: tuple[int, int],
        enemies: list[tuple[int, int]],
        danger: set[tuple[int, int]],
    ) -> int:
        """The neighbouring step (or staying) that is safe and farthest from the enemies."""
        if not enemies:
            return 0
        best, best_score = 0, -1e9
        for name, (dx, dy) in [("", (0, 0)), *DIRS.items()]:
            x, y = cell[0] + dx, cell[1] + dy
            if not (0 <= y < tiles.shape[0] and 0 <= x < tiles.shape[1]) or not passable[y, x]:
                continue
            score = min(abs(x - ex) + abs(y - ey) for ex, ey in enemies)
            if (x, y) in danger:
                score -= 100
            score += 0.1 * sum(
                passable[y + ddy, x + ddx]
                for ddx, ddy in DIRS.values()
                if 0 <= y + ddy < tiles.shape[0] and 0 <= x + ddx < tiles.shape[1]
            )
            if score > best_score:
                best, best_score = (self.action_for(name) if name else 0), score
        return best


class ArenaFollower(DirectiveFollower):
    """BonkArena: steering in 8 directions and level-up menu navigation.

    The move follows a force: every enemy pushes away ((40 px / distance)^2, brutes harder), the
    arena's centre pulls (hard near the walls), and the directive pulls towards its target (a
    cell, the gems near it, or the nearest enemy for `attack`) while no enemy is close.
    """

    adapter: ArenaAdapter
    MOVES: dict[tuple[str, ...], tuple[float, float]] = {
        ("UP",): (0.0, -1.0),
        ("DOWN",): (0.0, 1.0),
        ("LEFT",): (-1.0, 0.0),
        ("RIGHT",): (1.0, 0.0),
        ("LEFT", "UP"): (-0.7, -0.7),
        ("RIGHT", "UP"): (0.7, -0.7),
        ("DOWN", "LEFT"): (-0.7, 0.7),
        ("DOWN", "RIGHT"): (0.7, 0.7),
    }
    AREA = (15.0, 22.0, 225.0, 145.0)  # the player's centre stays inside (x0, y0, x1, y1)
    CLOSE_PX = 36.0
    BRUTE = 2

    def _act(self, view: GameView, directive: Directive) -> int:
        if view.get("menu_open"):
            option = directive.option if directive.option is not None else 0
            cursor = view.get("menu_cursor")
            if cursor == option:
                return self.action_for("A")
            return self.press_fresh("DOWN" if (option - cursor) % 3 == 1 else "UP")
        me = np.array([view.get("player_x"), view.get("player_y")], np.float64)
        force, nearest = self._repulsion(view, me)
        pull = self._pull(view, directive, me)
        if pull is not None and (nearest > self.CLOSE_PX or directive.action == "attack"):
            force += pull
        elif directive.action == "wait" and nearest > self.CLOSE_PX:
            return 0
        x0, y0, x1, y1 = self.AREA
        to_centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2]) - me
        margin = min(me[0] - x0, x1 - me[0], me[1] - y0, y1 - me[1])
        norm = float(np.linalg.norm(to_centre))
        if norm > 1:
            force += to_centre / norm * (0.3 + (2.5 if margin < 24 else 0.0))
        if float(np.linalg.norm(force)) < 0.05:
            return 0
        best = max(
            self.MOVES, key=lambda k: self.MOVES[k][0] * force[0] + self.MOVES[k][1] * force[1]
        )
        return self.action_for(*best)

    def _repulsion(self, view: GameView, me: np.ndarray) -> tuple[np.ndarray, float]:
        xs, ys, active = (view.arrays.get(k) for k in ("enemy_x", "enemy_y", "enemy_active"))
        if xs is None or ys is None or active is None or not active.any():
            return np.zeros(2), float("inf")
        mask = active.astype(bool)
        kinds = view.arrays.get("enemy_kind")
        delta = me[None, :] - np.stack([xs[mask], ys[mask]], axis=1).astype(np.float64)
        dist = np.maximum(np.linalg.norm(delta, axis=1), 1.0)
        heavy = (kinds[mask] == self.BRUTE) if kinds is not None else np.zeros(len(dist), bool)
        weight = np.where(heavy, 1.6, 1.0) * (40.0 / dist) ** 2
        return (delta / dist[:, None] * weight[:, None]).sum(axis=0), float(dist.min())

    def _pull(self, view: GameView, directive: Directive, me: np.ndarray) -> np.ndarray | None:
        """A unit pull (times 0.8) towards what the directive is after, if anything."""
        goal: np.ndarray | None = None
        tile = directive.tile
        if directive.action in ("go_to", "collect") and tile is not None:
            goal = np.array([tile[0] * CELL + 4, tile[1] * CELL + 4], np.float64)
            gems = self.adapter.gems(view)
            if directive.action == "collect" and gems:
                near = min(gems, key=lambda g: (g[0] - goal[0]) ** 2 + (g[1] - goal[1]) ** 2)  # type: ignore[index]
                goal = np.array(near, np.float64)
        elif directive.action == "attack":
            enemies = self.adapter.enemies(view)
            if enemies:
                target = np.array(
                    min(enemies, key=lambda e: (e[0] - me[0]) ** 2 + (e[1] - me[1]) ** 2),
                    np.float64,
                )
                if float(np.linalg.norm(target - me)) > 56:
                    goal = target
        if goal is None:
            return None
        d = goal - me
        norm = float(np.linalg.norm(d))
        return None if norm < 2 else d / norm * 0.8


def make_follower(env: Any, adapter: GameAdapter | None = None) -> DirectiveFollower:
    """The follower for an env's game (discrete action spaces)."""
    adapter = adapter or adapter_for(env)
    if isinstance(adapter, QuestAdapter):
        return QuestFollower(adapter, env)
    if isinstance(adapter, ArenaAdapter):
        return ArenaFollower(adapter, env)
    return DirectiveFollower(adapter, env)
