"""BonkQuest's own code: the think adapter, the directive follower, the oracle and the expert.

The game-agnostic machinery (`metabonk_gym.think`, `metabonk_gym.experts`) finds these through
this folder (`GameData.module()`): `Adapter`, `Follower` and `Expert` below (see
docs/new-game.md, "game.py"). Tile ids come from this folder's metabonk.json ("tile_classes",
generated from gba/bonkquest/game.h), the map characters from text_map.yaml; the constants
shared with the C source are checked against it by tests/test_game_constants.py.

The riddle quest (`state="riddles"`, `riddles_roomN`; game.h ARG_RIDDLES) is the same game
where the sage's words decide: a wrong chest of his hall costs RIDDLE_COST HP, and in the
garden and the crypt the key lies under one of four marks (x), a wrong one costing as much.
The adapter says what the sage said about the room the player is in (`sage_said`) and names
chests and marks by the sage's words in its options, nearest first, so the nearest option is
wrong as often as the seed makes it. RIDDLE_COST and the marks' names are checked against the C
source by tests/test_bonkquest_riddles.py.

>>> TILE["wall"], tile_char(TILE["door_locked"]), tile_char(99), tile_char(TILE["mark"])
(1, 'D', '?', 'x')
>>> mark_label(1, 18), mark_label(24, 1)
('SOUTH-WEST', 'NORTH-EAST')
>>> Adapter().spec.fallback("timeout").action
'wait'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.configfile import load_optional
from metabonk_gym.experts.base import AgentError, RamExpert
from metabonk_gym.experts.pathfinding import Cell, astar, neighbours
from metabonk_gym.experts.pathfinding import direction as step_name
from metabonk_gym.gamedata import GameData
from metabonk_gym.think.directive import Directive, DirectiveSpec
from metabonk_gym.think.follower import DIRS, DirectiveFollower, path_cells
from metabonk_gym.think.games import GameAdapter, direction, framed
from metabonk_gym.think.oracle import oracle_directive
from metabonk_gym.think.view import GameView

DATA = GameData(Path(__file__).resolve().parent)
#: Tile class name -> the id stored in `room_tiles` (game.h's T_* enum).
TILE: dict[str, int] = DATA.tile_classes()
#: Tile id -> its character on the think map.
CHARS: dict[int, str] = {
    TILE[name]: char
    for name, char in (load_optional(DATA.folder, "text_map") or {})["chars"].items()
}
#: game.h: "no such object in this room" in the position fields.
NONE = 0xFF
#: game.h DIR_*: `facing` -> the button that walks that way.
FACING = {0: "UP", 1: "DOWN", 2: "LEFT", 3: "RIGHT"}
#: rooms.c CHEST_LABELS: the sage's words for chest 0..2 of his hall (`key_chest`).
CHEST_LABELS = ("NORTH-WEST", "NORTH-EAST", "SOUTH")
#: game.h RIDDLE_COST: HP a wrong chest of the sage's hall or a wrong mark costs (riddle quest).
RIDDLE_COST = 3
WALKABLE = frozenset(TILE[n] for n in ("floor", "key", "heart", "treasure"))
INTERACT = frozenset({TILE["chest"], TILE["npc"]})
DOORS = frozenset({TILE["door"], TILE["door_locked"]})


def tile_char(tile: int) -> str:
    """The think map's character of a tile id ("?" for an unknown id)."""
    return CHARS.get(tile, "?")


def mark_label(x: int, y: int) -> str:
    """The sage's name for a mark (a key spot of the garden or the crypt, rooms.c): the quarter
    of the room it lies in."""
    return f"{'NORTH' if y < 10 else 'SOUTH'}-{'WEST' if x < 15 else 'EAST'}"


def riddles(view: GameView) -> bool:
    """Whether this is the riddle quest (game.h `quest_mode`)."""
    return view.get("quest_mode") == 1


class QuestAdapter(GameAdapter):
    """BonkQuest: five rooms, keys, locked doors, the sage, chests, patrolling enemies."""

    name = DATA.name
    game = DATA
    spec = DirectiveSpec(
        game=DATA.name,
        actions=("go_to", "collect", "open", "talk", "flee", "explore", "wait"),
        tile_actions=("go_to", "collect"),
        fallback_action="wait",
        fallback_frames=48,
        action_help={
            "go_to": "walk to the tile target {x, y} (an open door tile takes you to the next room)",
            "collect": "walk onto the key, heart or treasure at target {x, y}",
            "open": "open the chest at target {x, y}, or unlock the locked door there with a key",
            "talk": "walk next to the sage at target {x, y} (or the nearest one) and talk",
            "flee": "move away from the nearest enemy",
            "explore": "walk to a part of the room you have not been near yet",
            "wait": "stay put, stepping aside from enemies",
        },
    )
    brief = (
        "Cross five rooms: take each room's key (k), unlock the door (D), go through; in room 2 "
        "the sage (N) says which chest (C) holds the key; in room 5 step onto the treasure (T). "
        "Enemies (E) cost 1 HP."
    )
    compact_state_keys = ("room", "hp", "keys", "quest_stage")
    offers_options = True
    choice_state_keys = ("hp", "keys")
    state_keys = (
        "room",
        "hp",
        "max_hp",
        "keys",
        "chests",
        "quest_stage",
        "rooms_visited",
        "score",
        "talked",
    )

    def player_cell(self, view: GameView) -> tuple[int, int] | None:
        return view.get("player_x"), view.get("player_y")

    def tiles(self, view: GameView) -> np.ndarray | None:
        return view.arrays.get("room_tiles")

    def enemies(self, view: GameView) -> list[tuple[int, int]]:
        """Cells of the active enemies of this room."""
        xs, ys = view.arrays.get("enemy_x"), view.arrays.get("enemy_y")
        active = view.arrays.get("enemy_active")
        if xs is None or ys is None or active is None:
            return []
        return [(int(x), int(y)) for x, y, a in zip(xs, ys, active) if a]

    def state(self, view: GameView) -> dict[str, Any]:
        out = super().state(view)
        if view.get("talked") > 0:
            # What the player read in the sage's box (the chest the key is in).
            chest = view.get("key_chest", 0)
            if 0 <= chest < len(CHEST_LABELS):
                out["sage_said"] = (
                    f"the key is in the {CHEST_LABELS[chest]} chest of the sage's hall"
                )
            x, y = view.get("key_x", NONE), view.get("key_y", NONE)
            tiles = self.tiles(view)
            if riddles(view) and x != NONE and tiles is not None and tiles[y, x] == TILE["mark"]:
                out["sage_said"] = f"the key of this room lies under the {mark_label(x, y)} mark"
        return out

    def goals(self, view: GameView) -> list[str]:
        stage, room = view.get("quest_stage"), view.get("room")
        if view.get("won"):
            return ["the quest is complete"]
        goals: list[str] = []
        if view.get("dialogue_open"):
            goals.append("close the sage's dialogue (press A)")
        if room == 2 and stage < 3:
            goals.append("talk to the sage (N) to learn which chest holds the key")
        if view.get("keys") > 0:
            goals.append(
                "unlock the locked door (D) on the east side with your key and go through it"
            )
        elif room == 5:
            goals.append("reach the treasure (T) and step onto it, avoiding the ghosts")
        elif room == 2 and riddles(view):
            goals.append(
                f"open the chest the sage named to get the key (a wrong one costs {RIDDLE_COST} HP)"
            )
        elif room == 2:
            goals.append("open the chest the sage named to get the key")
        elif riddles(view) and self._marks(view):
            goals.append(
                f"step onto the mark (x) the sage named: the key lies under it "
                f"(a wrong mark costs {RIDDLE_COST} HP)"
            )
        elif not (view.get("doors_open") >> room) & 1:
            goals.append(f"find the key of room {room} (k on the map)")
        else:
            goals.append("go through the open door (d) on the east side to the next room")
        if view.get("hp") <= 2:
            goals.append("pick up a heart (h) if there is one")
        goals.append("avoid the enemies (E): touching one costs 1 HP")
        return goals

    def _marks(self, view: GameView) -> bool:
        """Whether the room shows marks (the riddle quest's hidden key)."""
        tiles = self.tiles(view)
        return tiles is not None and bool(np.any(tiles == TILE["mark"]))

    def text_map(self, view: GameView) -> str | None:
        tiles = self.tiles(view)
        if tiles is None:
            return None
        grid = [[tile_char(int(t)) for t in row] for row in tiles]
        for x, y in self.enemies(view):
            if 0 <= y < len(grid) and 0 <= x < len(grid[0]):
                grid[y][x] = "E"
        px, py = self.player_cell(view) or (-1, -1)
        if 0 <= py < len(grid) and 0 <= px < len(grid[0]):
            grid[py][px] = "@"
        return framed(grid)

    def spatial(self, view: GameView) -> list[str]:
        out = super().spatial(view)
        tiles = self.tiles(view)
        if tiles is None:
            return out
        px, py = self.player_cell(view) or (0, 0)
        for name in ("key", "mark", "chest", "npc", "door_locked", "door", "treasure", "heart"):
            cells = np.argwhere(tiles == TILE[name])
            for y, x in cells[:4]:
                out.append(
                    f"{name.replace('_', ' ')} at x={x}, y={y} ({direction(px, py, int(x), int(y))})"
                )
        for x, y in self.enemies(view):
            out.append(f"enemy at x={x}, y={y} ({direction(px, py, x, y)})")
        return out

    def events(self, before: GameView | None, now: GameView) -> list[str]:
        out = super().events(before, now)
        if before is not None:
            if now.get("room") != before.get("room"):
                out.append("new_room")
            if now.get("dialogue_open") and not before.get("dialogue_open"):
                out.append("dialogue")
            if now.get("keys") != before.get("keys") or now.get("quest_stage") != before.get(
                "quest_stage"
            ):
                out.append("progress")
        return out

    def status(self, directive: Directive, start: GameView, now: GameView) -> str:
        if now.get("room") != start.get("room"):
            return "done"
        tile = directive.tile
        cell = self.player_cell(now)
        action = directive.action
        if action in ("go_to", "collect") and tile is not None:
            return "done" if cell == tile else "running"
        if action == "open":
            opened = now.get("chests") > start.get("chests") or now.get("doors_open") != start.get(
                "doors_open"
            )
            return "done" if opened else "running"
        if action == "talk":
            return "done" if now.get("talked") > start.get("talked") else "running"
        return "running"

    def advise(self, view: GameView) -> Directive | None:
        return quest_advice(view)

    def options(self, view: GameView) -> list[Directive]:
        """What can be done here, read from the room's tiles: take a key, step onto a mark
        (riddle quest: by the sage's name for it), take the treasure or a heart (when hurt),
        open a closed chest (room 2: by the sage's names for them), talk to the sage (until
        talked to), unlock the locked door (with a key), go through an open door other than the
        way in (x 0), nearest first; then explore the room."""
        tiles, cell = self.tiles(view), self.player_cell(view)
        found: list[tuple[int, Directive]] = []
        if tiles is not None and cell is not None:
            px, py = cell
            chests = [
                (int(x), int(y))
                for y, x in np.argwhere(np.isin(tiles, [TILE["chest"], TILE["chest_open"]]))
            ]
            named = view.get("room") == 2 and len(chests) == len(CHEST_LABELS)
            kinds = [
                ("key", "collect", "take the key", True),
                ("mark", "collect", "step onto the mark", True),
                ("treasure", "collect", "take the treasure", True),
                ("heart", "collect", "take a heart", view.get("hp") < view.get("max_hp", 5)),
                ("chest", "open", "open the chest", True),
                ("npc", "talk", "talk to the sage", view.get("talked") == 0),
                ("door_locked", "open", "unlock the door", view.get("keys") > 0),
                ("door", "go_to", "go through the door", True),
            ]
            for kind, action, what, allowed in kinds:
                if not allowed:
                    continue
                for y, x in np.argwhere(tiles == TILE[kind]):
                    x, y = int(x), int(y)
                    if (x, y) == cell or (kind == "door" and x == 0):
                        continue
                    if kind == "chest" and named:
                        what = f"open the {CHEST_LABELS[chests.index((x, y))]} chest"
                    elif kind == "mark":
                        what = f"step onto the {mark_label(x, y)} mark"
                    goal = f"{what}, {direction(px, py, x, y)}"
                    distance = abs(x - px) + abs(y - py)
                    found.append(
                        (distance, Directive(goal, "", action, {"x": x, "y": y}, 1200, 1.0))
                    )
        found.sort(key=lambda item: item[0])
        explore = Directive("explore the room", "", "explore", None, 240, 1.0)
        return [d for _, d in found] + [explore]

    def sensible(self, directive: Directive, view: GameView) -> str | None:
        reason = super().sensible(directive, view)
        tiles, tile, action = self.tiles(view), directive.tile, directive.action
        if reason is not None or tiles is None or tile is None:
            return reason
        x, y = tile
        if not (0 <= y < tiles.shape[0] and 0 <= x < tiles.shape[1]):
            return "the target is outside the room"
        here = int(tiles[y, x])
        wanted = {
            "go_to": WALKABLE | DOORS,
            "collect": {TILE["key"], TILE["mark"], TILE["heart"], TILE["treasure"]},
            "open": {TILE["chest"]} | DOORS,
            "talk": {TILE["npc"]},
        }.get(action)
        if wanted is not None and here not in wanted:
            return f"{action} at a {tile_char(here)!r} cell"
        if action == "open" and here == TILE["door_locked"] and view.get("keys") <= 0:
            return "opening a locked door without a key"
        return None


class QuestFollower(DirectiveFollower):
    """BonkQuest: A* over `room_tiles`, enemy-aware; see the module docstring.

    Args:
        adapter: the `QuestAdapter` that reads the room, the player and the enemies.
        env: the BonkQuest env it presses buttons in (any wrapper stack).
    """

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

    def distance(self, view: GameView, directive: Directive) -> float | None:
        """Steps of the A* path (walkable tiles, enemies ignored) to the directive's target
        tile, which may itself be a door, chest or the sage; None without one or unreachable."""
        tiles, cell, tile = self.adapter.tiles(view), self.adapter.player_cell(view), directive.tile
        if tiles is None or cell is None or tile is None:
            return super().distance(view, directive)
        path = path_cells(np.isin(tiles, list(WALKABLE)), cell, [tile])
        return None if path is None else float(len(path) - 1)

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
        # the plan: this move (held until its tile is reached), then the path's next moves
        self.plan = [self._step_towards(a, b) for a, b in zip(path[:3], path[1:4])]
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
            {TILE["npc"]} if directive.action == "talk" else {TILE["chest"], TILE["door_locked"]}
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


def quest_advice(view: GameView) -> Directive:
    """The next step of the shortest BonkQuest playthrough from this state."""
    room, keys, hp = view.get("room"), view.get("keys"), view.get("hp")
    tiles = view.arrays.get("room_tiles")
    if view.get("treasure_x") != NONE:
        return oracle_directive(
            "take the treasure",
            "collect",
            {"x": view.get("treasure_x"), "y": view.get("treasure_y")},
        )
    if tiles is not None and hp <= 2:
        hearts = np.argwhere(tiles == TILE["heart"])
        if len(hearts):
            y, x = hearts[0]
            return oracle_directive(
                "heal with the heart", "collect", {"x": int(x), "y": int(y)}, 600
            )
    exit_x, exit_y = view.get("exit_x"), view.get("exit_y")
    door_open = tiles is not None and exit_x != NONE and int(tiles[exit_y, exit_x]) == TILE["door"]
    if door_open:
        return oracle_directive("go through the open door", "go_to", {"x": exit_x, "y": exit_y})
    if keys > 0 and exit_x != NONE:
        return oracle_directive("unlock the door with the key", "open", {"x": exit_x, "y": exit_y})
    if view.get("key_x") != NONE:
        return oracle_directive(
            "pick up the key", "collect", {"x": view.get("key_x"), "y": view.get("key_y")}
        )
    if riddles(view) and room == 2 and view.get("talked") == 0 and view.get("npc_x") != NONE:
        # the riddle quest: hear the sage first, so that a decision log shows the words a
        # model must choose by (the oracle itself reads the chest from RAM)
        return oracle_directive(
            "hear the sage", "talk", {"x": view.get("npc_x"), "y": view.get("npc_y")}
        )
    if tiles is not None:
        chests = [
            (int(x), int(y))
            for y, x in np.argwhere(np.isin(tiles, [TILE["chest"], TILE["chest_open"]]))
        ]
        index = view.get("key_chest")
        if room == 2 and 0 <= index < len(chests):
            x, y = chests[index]  # argwhere is in reading order, as the game counts chests
            if int(tiles[y, x]) == TILE["chest"]:
                return oracle_directive("open the chest with the key", "open", {"x": x, "y": y})
    return oracle_directive("look around", "explore", None, 240)


class BonkQuestExpert(RamExpert):
    """Plays BonkQuest from the RAM state; see the module docstring.

    Args:
        env: a BonkQuest env (any wrapper stack; `AgentError` for another game's).
        seed: unused (the expert is deterministic); every game's `Expert(env, seed)` takes it.
    """

    #: Decide only from what the screen shows (`BonkQuestScreenExpert`).
    screen_only = False

    def __init__(self, env: gym.Env, seed: int | None = None) -> None:
        self.env = env
        game: Any = env.unwrapped
        self.game = game
        integration = game.integration
        if game.game_data != DATA:
            raise AgentError(f"BonkQuestExpert plays {DATA.name} only")
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
        if key[0] != NONE and tiles[key] in (TILE["key"], TILE["mark"]):
            self.objective = "key"  # a mark: the one the key lies under (riddle quest)
            return self._walk_to(tiles, me, key)
        keys = self._var("keys")
        if door[0] != NONE and tiles[door] == TILE["door_locked"]:
            if keys > 0:
                self.objective = "unlock door"
                return self._bump(tiles, me, door)
            npc = (self._var("npc_y"), self._var("npc_x"))
            if npc[0] != NONE and self._var("talked") == 0 and not self.screen_only:
                self.objective = "talk to the sage"
                return self._use(tiles, me, npc)
            chest = self._key_chest(tiles)
            if chest is not None:
                self.objective = "open the key chest"
                return self._use(tiles, me, chest)
            return self.noop
        if door[0] != NONE and tiles[door] == TILE["door"]:
            self.objective = "exit"
            return self._walk_to(tiles, me, door)
        return self.noop

    def _key_chest(self, tiles: np.ndarray) -> Cell | None:
        """The closed chest that holds the key (`key_chest` indexes chests in reading order)."""
        cells = [
            (int(r), int(c))
            for r, c in zip(*np.nonzero((tiles == TILE["chest"]) | (tiles == TILE["chest_open"])))
        ]
        closed = [c for c in cells if tiles[c] == TILE["chest"]]
        if self.screen_only:  # the nearest closed chest: what the screen shows, not the sage
            me = (self._var("player_y"), self._var("player_x"))
            return min(
                closed, key=lambda c: (abs(c[0] - me[0]) + abs(c[1] - me[1]), c), default=None
            )
        index = self._var("key_chest")
        if index < len(cells) and tiles[cells[index]] == TILE["chest"]:
            return cells[index]
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
        return np.isin(tiles, list(WALKABLE))

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
        return self.actions[step_name(me, nxt)]

    def _walk_to(self, tiles: np.ndarray, me: Cell, target: Cell) -> int:
        step = self._step_along(tiles, me, {target})
        return self.noop if step is None else step

    def _adjacent(self, tiles: np.ndarray, target: Cell) -> set[Cell]:
        passable = self._passable(tiles)
        return {n for _, n in neighbours(target, tiles.shape) if passable[n]}

    def _bump(self, tiles: np.ndarray, me: Cell, target: Cell) -> int:
        """Stand next to `target` and push into it (doors open on a bump)."""
        if abs(me[0] - target[0]) + abs(me[1] - target[1]) == 1:
            return self.actions[step_name(me, target)]
        step = self._step_along(tiles, me, self._adjacent(tiles, target))
        return self.noop if step is None else step

    def _use(self, tiles: np.ndarray, me: Cell, target: Cell) -> int:
        """Stand next to `target`, face it, press A (chests and the sage)."""
        if abs(me[0] - target[0]) + abs(me[1] - target[1]) == 1:
            want = step_name(me, target)
            if FACING.get(self._var("facing")) != want and not self.screen_only:
                return self.actions[want]  # blocked move: turns to face it
            return self._press_a()
        step = self._step_along(tiles, me, self._adjacent(tiles, target))
        return self.noop if step is None else step


class BonkQuestScreenExpert(BonkQuestExpert):
    """The expert deciding only from what the screen shows: the teacher a pixel policy is
    distilled from (`metabonk_gym.training.dagger`).

    The expert's plan depends on things a frame does not show once they are gone: what the sage
    said (the key chest) and whether he was heard, and which way the player faces (one pixel per
    tile hides it). This one never talks, opens the nearest closed chest of the sage's hall until
    it holds a key, and presses A next to a chest without turning to it (A opens any adjacent
    closed chest), so a policy that sees only frames can match its every choice.

    Args:
        env: a BonkQuest env (any wrapper stack; `AgentError` for another game's).
        seed: unused (deterministic).
    """

    screen_only = True


Adapter = QuestAdapter
Follower = QuestFollower
Expert = BonkQuestExpert
#: The teacher of pixel policies (`metabonk_gym.training.dagger`): decides from what a frame shows.
Teacher = BonkQuestScreenExpert
