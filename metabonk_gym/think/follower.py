"""System 1: `DirectiveFollower` turns the directive in force into button presses, every step.

What: for tile games it walks A* shortest paths over the room's tile map to the directive's target
(never through walls, water, closed chests or the sage; onto a door only when the door is the
target), steps around enemies (their cell and the cells they can enter this step are blocked near
the player, cells next to them cost extra), presses A next to a chest or the sage (releasing it in
between, since the games react to new presses), closes dialogue boxes, and flees when an enemy is
about to step onto it. In BonkArena it steers in eight directions (towards targets, away from
enemies) and moves the level-up menu's cursor to the chosen option before pressing A. For Megabonk
(`MegabonkFollower`) it returns the env's Box action: steering, aim, fire, ability, and a UI click
on the chosen level-up option.
Why: a directive is only worth as much as its execution; with this follower an oracle strategist
wins BonkQuest (see `metabonk bench think`), so the benchmark measures the strategist alone.
Path finding is the scripted experts' A* (`metabonk_gym.experts.pathfinding`), used in (x, y).

>>> grid = np.ones((3, 4), bool); grid[1, 1:3] = False   # two walls in the middle row
>>> path_cells(grid, (0, 1), [(3, 1)])
[(0, 1), (0, 0), (1, 0), (2, 0), (3, 0), (3, 1)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from metabonk_gym.think.directive import Directive
from metabonk_gym.think.games import (
    CELL,
    QUEST_TILE_IDS,
    ArenaAdapter,
    GameAdapter,
    MegabonkAdapter,
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

    def act(self, view: GameView, directive: Directive) -> Any:
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


class MegabonkFollower(DirectiveFollower):
    """Megabonk (BonkLink): the directive as the env's Box (or Dict) action, every tick.

    Steering scores 16 directions and standing still by where each leads in `LOOKAHEAD` world
    units: a danger potential from every enemy ((`DANGER` / distance)^2), walls it has run into
    (learnt when the position stops changing along an axis the stick pushes), a little inertia,
    and the directive's own pull: `attack` keeps the kited enemy at `KITE_RANGE`, `go_to` and
    `wander` head for their radar cell (anchored where the directive started; `wander` without
    one keeps a heading and turns now and then), `flee` weighs danger most, `wait` prefers
    standing. It always aims at the nearest enemy and fires when one is within `FIRE_RANGE`, and
    uses the ability when two or more are within `ABILITY_RADIUS`.

    In a menu it alternates a neutral tick with an input (so presses have edges): a UI click on
    the chosen option (`choose_upgrade` with an option the game lists), else a submit
    (interact), which takes the default. `option_points(n)` gives the normalised click points
    (top-left origin; `bonklink.actions` converts them to the plugin's bottom-left pixels): by
    default the stand-in game's three cards (`bonklink.game.card_rects`); pass `option_points=`
    for the real game's layout. The stick axes are taken as world +X / +Z, as in `bonklink-sim`;
    in Megabonk that holds while the camera looks along +Z.
    """

    adapter: MegabonkAdapter
    DIRECTIONS = 16
    LOOKAHEAD = 2.5
    DANGER = 2.0
    KITE_RANGE = 5.0
    FIRE_RANGE = 14.0
    ABILITY_RADIUS = 3.0

    def __init__(
        self,
        adapter: MegabonkAdapter,
        env: Any,
        option_points: Sequence[tuple[float, float]] | None = None,
    ) -> None:
        super().__init__(adapter, env)
        self.action_type = str(getattr(env.unwrapped, "action_type", "box"))
        self.custom_points = tuple(option_points) if option_points else None
        angles = np.arange(self.DIRECTIONS) * (2 * np.pi / self.DIRECTIONS)
        self.dirs = np.concatenate(
            [np.zeros((1, 2)), np.stack([np.cos(angles), np.sin(angles)], 1)]
        )
        self._clear()

    def _clear(self) -> None:
        self._menu_ticks = 0
        self._steps = 0
        self._move = np.zeros(2)
        self._heading = np.array([1.0, 0.0])
        self._heading_steps = 0
        self._last: tuple[np.ndarray, float] | None = None  # position and game time
        self._walls: list[tuple[int, float, float, int]] = []  # axis, side, coordinate, step
        self._anchor: tuple[Directive, np.ndarray] | None = None

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._clear()
        angle = float(self.rng.uniform(0, 2 * np.pi))
        self._heading = np.array([np.cos(angle), np.sin(angle)])

    # ------------------------------------------------------------------ output
    def option_points(self, n: int) -> list[tuple[float, float]]:
        """Where to click option 0..n-1 (normalised, top-left origin)."""
        if self.custom_points is not None:
            return list(self.custom_points)
        from metabonk_gym.bonklink.game import card_rects

        cards = card_rects()
        if n <= len(cards):
            return [rect.center for rect in cards[:n]]
        return [((i + 0.5) / n, 0.55) for i in range(n)]

    def emit(
        self,
        move: Sequence[float] | np.ndarray = (0.0, 0.0),
        aim: Sequence[float] | np.ndarray = (0.0, 0.0),
        fire: bool = False,
        ability: bool = False,
        interact: bool = False,
        click: tuple[float, float] | None = None,
    ) -> Any:
        """An action of the env's space (`make_box_action`'s layout, or the Dict form)."""
        from metabonk_gym.bonklink.actions import make_box_action

        stick = np.clip(np.asarray(move, np.float32).reshape(2), -1, 1)
        look = np.clip(np.asarray(aim, np.float32).reshape(2), -1, 1)
        if self.action_type == "dict":
            return {
                "move": stick,
                "aim": look,
                "buttons": np.array([fire, ability, interact], np.int8),
                "click": int(click is not None),
                "click_pos": np.array(click if click is not None else (0.5, 0.5), np.float32),
            }
        return make_box_action(
            (float(stick[0]), float(stick[1])),
            (float(look[0]), float(look[1])),
            fire,
            ability,
            interact,
            click,
        )

    def act(self, view: GameView, directive: Directive) -> Any:
        return self._act(view, directive)

    def _act(self, view: GameView, directive: Directive) -> Any:  # type: ignore[override]
        adapter = self.adapter
        if adapter.in_menu(view):
            self._last = None
            self._menu_ticks += 1
            if self._menu_ticks % 2 == 0:
                return self.emit()  # release, so the next press is a new one
            options, option = adapter.options(view), directive.option
            if directive.action == "choose_upgrade" and option is not None and options:
                points = self.option_points(len(options))
                if option < min(len(options), len(points)):
                    return self.emit(click=points[option])
            return self.emit(interact=True)
        self._menu_ticks = 0
        self._steps += 1
        me = adapter.position(view)
        self._learn_walls(me, adapter.number(view, "game_time"))
        foes = adapter.enemies(view)
        dist = np.hypot(foes[:, 0], foes[:, 1]) if len(foes) else np.zeros(0)
        move = self._steer(view, directive, me, foes, dist)
        self._move = move
        aim = foes[0] / max(float(dist[0]), 1e-6) if len(foes) else self._heading
        fire = bool(len(foes)) and float(dist[0]) <= self.FIRE_RANGE
        ability = int(np.count_nonzero(dist <= self.ABILITY_RADIUS)) >= 2
        return self.emit(move, aim, fire, ability)

    # ------------------------------------------------------------------ steering
    def _steer(
        self,
        view: GameView,
        directive: Directive,
        me: np.ndarray,
        foes: np.ndarray,
        dist: np.ndarray,
    ) -> np.ndarray:
        points = self.dirs * self.LOOKAHEAD  # candidate offsets from the player
        score = self._danger(points, foes) * (1.5 if directive.action == "flee" else 1.0)
        score += self._wall_cost(me + points)
        moving = np.hypot(self._move[0], self._move[1]) > 0
        if moving:  # inertia: fewer zig-zags
            score += 0.15 * (1.0 - self.dirs @ (self._move / np.hypot(*self._move)))
        action = directive.action
        heading = self._goal_heading(view, directive, me)
        if action == "attack" and len(foes):
            target = foes[0]
            if directive.tile is not None:  # the enemy nearest the radar cell
                cell = self.adapter.offset_of(directive.tile)
                target = foes[int(np.argmin(np.hypot(*(foes - cell).T)))]
            gap = np.hypot(*(target[None, :] - points).T)
            score += 0.08 * (gap - self.KITE_RANGE) ** 2
        elif action in ("go_to", "wander") and heading is not None:
            score -= 0.8 * (self.dirs @ heading)
            if action == "go_to" and self._anchor_reached(me):
                score[0] -= 1.0  # arrived: stay unless an enemy comes
        elif action in ("wait", "choose_upgrade") or (action == "attack" and not len(foes)):
            score[1:] += 0.3  # standing is the plan; moving only to dodge
        best = int(np.argmin(score))
        return self.dirs[best].copy()

    def _danger(self, points: np.ndarray, foes: np.ndarray) -> np.ndarray:
        """Sum over enemies of (DANGER / distance)^2 at each candidate point."""
        if not len(foes):
            return np.zeros(len(points))
        gaps = np.hypot(*(points[:, None, :] - foes[None, :, :]).transpose(2, 0, 1))
        return ((self.DANGER / np.maximum(gaps, 0.3)) ** 2).sum(axis=1)

    def _goal_heading(
        self, view: GameView, directive: Directive, me: np.ndarray
    ) -> np.ndarray | None:
        """A unit vector towards the directive's radar cell (anchored at its start) or, for
        `wander` without one, a heading that turns every few seconds."""
        tile = directive.tile
        if tile is not None and directive.action in ("go_to", "wander"):
            if self._anchor is None or self._anchor[0] != directive:
                self._anchor = (directive, me + self.adapter.offset_of(tile))
            to_goal = self._anchor[1] - me
            norm = float(np.hypot(*to_goal))
            if norm > 0.5:
                return to_goal / norm
            if directive.action == "go_to":
                return None
        self._anchor = None
        if directive.action != "wander":
            return None
        self._heading_steps += 1
        if self._heading_steps >= 180 or self._blocked(me, self._heading):
            self._heading_steps = 0
            angle = float(self.rng.uniform(0, 2 * np.pi))
            self._heading = np.array([np.cos(angle), np.sin(angle)])
        return self._heading

    def _anchor_reached(self, me: np.ndarray) -> bool:
        return (
            self._anchor is not None
            and float(np.hypot(*(self._anchor[1] - me))) <= self.adapter.cell_units
        )

    # ------------------------------------------------------------------ walls
    def _learn_walls(self, me: np.ndarray, game_time: float) -> None:
        """A wall where the stick pushed along an axis but the position did not move on it."""
        last, self._last = self._last, (me.copy(), game_time)
        self._walls = [w for w in self._walls if self._steps - w[3] < 1800]
        if last is None or game_time <= last[1]:
            return
        for axis in (0, 1):
            push = float(self._move[axis])
            if abs(push) > 0.3 and abs(me[axis] - last[0][axis]) < 1e-3:
                side = 1.0 if push > 0 else -1.0
                known = [w for w in self._walls if w[0] == axis and w[1] == side]
                if not any(abs(w[2] - me[axis]) < 0.5 for w in known):
                    self._walls = [*self._walls, (axis, side, float(me[axis]), self._steps)][-8:]

    def _wall_cost(self, points: np.ndarray) -> np.ndarray:
        """Points (world) beyond or close to a learnt wall cost more the closer they get."""
        cost = np.zeros(len(points))
        for axis, side, coordinate, _ in self._walls:
            room = side * (coordinate - points[:, axis])  # distance left before the wall
            cost += np.where(room < 0.5, 20.0, 2.0 / np.maximum(room, 0.5) ** 2)
        return cost

    def _blocked(self, me: np.ndarray, heading: np.ndarray) -> bool:
        return bool(self._wall_cost((me + heading * self.LOOKAHEAD)[None, :])[0] >= 20.0)


def make_follower(env: Any, adapter: GameAdapter | None = None, **kwargs: Any) -> DirectiveFollower:
    """The follower for an env's game: discrete actions for the GBA games, Box (or Dict) actions
    for Megabonk (`kwargs` go to `MegabonkFollower`, e.g. `option_points`)."""
    adapter = adapter or adapter_for(env)
    if isinstance(adapter, QuestAdapter):
        return QuestFollower(adapter, env)
    if isinstance(adapter, ArenaAdapter):
        return ArenaFollower(adapter, env)
    if isinstance(adapter, MegabonkAdapter):
        return MegabonkFollower(adapter, env, **kwargs)
    return DirectiveFollower(adapter, env)
