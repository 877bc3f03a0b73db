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
The path finding is here because `metabonk_gym.experts` had none when this was written.

>>> grid = np.ones((3, 4), bool); grid[1, 1:3] = False   # two walls in the middle row
>>> astar(grid, (0, 1), [(3, 1)])
[(0, 1), (0, 0), (1, 0), (2, 0), (3, 0), (3, 1)]
"""

from __future__ import annotations

import heapq
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


def astar(
    passable: np.ndarray,
    start: tuple[int, int],
    goals: Iterable[tuple[int, int]],
    cost: np.ndarray | None = None,
) -> list[tuple[int, int]] | None:
    """Shortest 4-connected path from `start` to any of `goals` over `passable[y, x]` cells, as
    a list of (x, y) from start to goal; a goal may itself be impassable (a door to bump into).
    `cost[y, x]` adds to the cost of entering a cell. None when no goal is reachable."""
    goals = {(int(x), int(y)) for x, y in goals}
    if not goals:
        return None
    h_max, w_max = passable.shape

    def heuristic(x: int, y: int) -> int:
        return min(abs(x - gx) + abs(y - gy) for gx, gy in goals)

    start = (int(start[0]), int(start[1]))
    frontier: list[tuple[float, int, tuple[int, int]]] = [(heuristic(*start), 0, start)]
    came: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
    best: dict[tuple[int, int], float] = {start: 0.0}
    counter = 0
    while frontier:
        _, _, node = heapq.heappop(frontier)
        if node in goals:
            path = [node]
            while came[path[-1]] is not None:
                path.append(came[path[-1]])  # type: ignore[arg-type]
            return path[::-1]
        x, y = node
        for dx, dy in ((0, -1), (0, 1), (-1, 0), (1, 0)):
            nx, ny = x + dx, y + dy
            if not (0 <= nx < w_max and 0 <= ny < h_max):
                continue
            if not passable[ny, nx] and (nx, ny) not in goals:
                continue
            g = best[node] + 1.0 + (float(cost[ny, nx]) if cost is not None else 0.0)
            if g < best.get((nx, ny), float("inf")):
                best[(nx, ny)] = g
                came[(nx, ny)] = node
                counter += 1
                heapq.heappush(frontier, (g + heuristic(nx, ny), counter, (nx, ny)))
    return None


class DirectiveFollower:
    """Base follower: maps button combos to the env's discrete actions; see `make_follower`."""

    def __init__(self, adapter: GameAdapter, discrete_actions: list[tuple[str, ...]]) -> None:
        self.adapter = adapter
        self.combos = [tuple(sorted(c)) for c in discrete_actions]
        self.last_action = 0
        self.rng = np.random.default_rng(0)

    def reset(self, seed: int | None = None) -> None:
        """Forget per-episode state (enemy tracks, explore targets)."""
        self.last_action = 0
        self.rng = np.random.default_rng(seed)

    def action_for(self, *buttons: str) -> int:
        """The discrete action pressing exactly `buttons`, else one holding the most of them."""
        want = tuple(sorted(buttons))
        if want in self.combos:
            return self.combos.index(want)
        if not want:
            return 0

        def overlap(i: int) -> tuple[int, int]:
            combo = set(self.combos[i])
            return len(combo & set(want)) - len(combo - set(want)), -i

        return max(range(len(self.combos)), key=overlap)

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

    def __init__(self, adapter: QuestAdapter, discrete_actions: list[tuple[str, ...]]) -> None:
        super().__init__(adapter, discrete_actions)
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
            self._room, self._axis, self._last_enemies, self._explore = view.get("room"), {}, [], None
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
        path = astar(grid, cell, safe_goals, cost) if safe_goals else None
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
        wanted = {QUEST_TILE_IDS["npc"]} if directive.action == "talk" else {QUEST_TILE_IDS["chest"], QUEST_TILE_IDS["door_locked"]}
        if directive.tile is not None:
            targets = [directive.tile]
        else:
            found = [(int(x), int(y)) for y, x in np.argwhere(np.isin(tiles, list(wanted)))]
            targets = sorted(found, key=lambda t: abs(t[0] - cell[0]) + abs(t[1] - cell[1]))[:1]
        if not targets:
            return 0
        tx, ty = targets[0]
        kind = int(tiles[ty, tx])
        if kind in DOORS:  # bump into a locked door (with a key) to unlock it; walk into an open one
            return self._walk(passable, cost, blocked, cell, [(tx, ty)])
        if abs(tx - cell[0]) + abs(ty - cell[1]) == 1:
            if kind in INTERACT:
                return self.press_fresh("A")
            return 0
        around = [(tx + dx, ty + dy) for dx, dy in DIRS.values()]
        around = [(x, y) for x, y in around if 0 <= y < tiles.shape[0] and 0 <= x < tiles.shape[1] and passable[y, x]]
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
            score += 0.1 * sum(passable[y + ddy, x + ddx] for ddx, ddy in DIRS.values()
                               if 0 <= y + ddy < tiles.shape[0] and 0 <= x + ddx < tiles.shape[1])
            if score > best_score:
                best, best_score = (self.action_for(name) if name else 0), score
        return best


class ArenaFollower(DirectiveFollower):
    """BonkArena: steering in 8 directions and level-up menu navigation."""

    adapter: ArenaAdapter
    MOVES: dict[tuple[str, ...], tuple[float, float]] = {
        ("UP",): (0, -1), ("DOWN",): (0, 1), ("LEFT",): (-1, 0), ("RIGHT",): (1, 0),
        ("UP", "LEFT"): (-0.7, -0.7), ("UP", "RIGHT"): (0.7, -0.7),
        ("DOWN", "LEFT"): (-0.7, 0.7), ("DOWN", "RIGHT"): (0.7, 0.7),
    }

    def _act(self, view: GameView, directive: Directive) -> int:
        if view.get("menu_open"):
            option = directive.option if directive.option is not None else 0
            cursor = view.get("menu_cursor")
            if cursor == option:
                return self.action_for("A")
            return self.press_fresh("DOWN" if (option - cursor) % 3 == 1 else "UP")
        px, py = view.get("player_x"), view.get("player_y")
        enemies = self.adapter.enemies(view)
        away = np.zeros(2)
        for ex, ey in enemies:
            d = np.array([px - ex, py - ey], float)
            dist = max(4.0, float(np.hypot(*d)))
            away += d / dist * (1.0 / dist) * 40.0
        # keep off the walls
        away += np.array([max(0, 40 - (px - 15)) - max(0, 40 - (225 - px)), max(0, 30 - (py - 22)) - max(0, 30 - (145 - py))]) / 40.0
        want = np.zeros(2)
        action = directive.action
        tile = directive.tile
        if action in ("go_to", "collect") and tile is not None:
            want = np.array([tile[0] * CELL + 4 - px, tile[1] * CELL + 4 - py], float)
            if action == "collect":
                gems = self.adapter.gems(view)
                if gems:
                    gx, gy = min(gems, key=lambda g: (g[0] - want[0] - px) ** 2 + (g[1] - want[1] - py) ** 2)
                    want = np.array([gx - px, gy - py], float)
        elif action == "attack" and enemies:
            ex, ey = min(enemies, key=lambda e: (e[0] - px) ** 2 + (e[1] - py) ** 2)
            d = np.array([ex - px, ey - py], float)
            dist = float(np.hypot(*d))
            want = d if dist > 56 else np.array([-d[1], d[0]])  # close in, then circle
        elif action == "flee" or (action == "wait" and any(np.hypot(ex - px, ey - py) < 28 for ex, ey in enemies)):
            want = away * 3
        norm = float(np.hypot(*want))
        if norm > 1e-6:
            want = want / norm
        total = want + away * (0.5 if action != "flee" else 0.0)
        if float(np.hypot(*total)) < 0.2:
            return 0
        best = max(self.MOVES.items(), key=lambda kv: kv[1][0] * total[0] + kv[1][1] * total[1])
        return self.action_for(*best[0])


def make_follower(env: Any, adapter: GameAdapter | None = None) -> DirectiveFollower:
    """The follower for an env's game (discrete action spaces)."""
    adapter = adapter or adapter_for(env)
    integration = getattr(env.unwrapped, "integration", None)
    combos = list(getattr(integration, "discrete_actions", [()]))
    if isinstance(adapter, QuestAdapter):
        return QuestFollower(adapter, combos)
    if isinstance(adapter, ArenaAdapter):
        return ArenaFollower(adapter, combos)
    return DirectiveFollower(adapter, combos)
