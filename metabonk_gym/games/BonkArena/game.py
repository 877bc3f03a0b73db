"""BonkArena's own code: the think adapter, the directive follower, the oracle and the expert.

The game-agnostic machinery (`metabonk_gym.think`, `metabonk_gym.experts`) finds these through
this folder (`GameData.module()`): `Adapter`, `Follower` and `Expert` below (see
docs/new-game.md, "game.py"). The upgrade enum comes from this folder's metabonk.json
("upgrades", generated from gba/bonkarena/game.h and gfx.c); the constants shared with the C
source are checked against it by tests/test_game_constants.py.

The scripted expert moves by a sum of forces on the player: each active enemy pushes away
(stronger when close, brutes more), the nearest gem pulls while no enemy is near, and the arena's
centre pulls harder near the walls so the player is never pinned in a corner. The move is the one
of the 8 directions that best follows the force. In the level-up menu it moves the cursor
(UP/DOWN on new presses) to the best option by a fixed priority (heal when low, then survival,
then firepower) and presses A.

>>> [UPGRADE_LABELS[i] for i in (0, 1, 6)]
['damage', 'fire rate', 'multishot']
>>> pick_upgrade([UPGRADE["speed"], UPGRADE["damage"], UPGRADE["magnet"]], hp_fraction=1.0)
1
>>> pick_upgrade([UPGRADE["speed"], UPGRADE["heal"], UPGRADE["magnet"]], hp_fraction=0.3)
1
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.base import AgentError, RamExpert
from metabonk_gym.gamedata import GameData
from metabonk_gym.think.directive import Directive, DirectiveSpec
from metabonk_gym.think.follower import DirectiveFollower
from metabonk_gym.think.games import CELL, GRID_H, GRID_W, GameAdapter, direction, framed, put_char
from metabonk_gym.think.oracle import oracle_directive
from metabonk_gym.think.view import GameView

DATA = GameData(Path(__file__).resolve().parent)
#: Upgrade name (game.h UPG_*, lower case) -> id, and id -> the words the menu shows.
UPGRADE: dict[str, int] = {u["name"]: int(u["id"]) for u in DATA.manifest["upgrades"]}
UPGRADE_LABELS: dict[int, str] = {int(u["id"]): str(u["label"]) for u in DATA.manifest["upgrades"]}
#: Preferred upgrades, best first (heal goes first when HP is low).
PRIORITY: tuple[int, ...] = tuple(
    UPGRADE[n] for n in ("damage", "multi", "firerate", "armor", "maxhp", "speed", "magnet", "heal")
)
#: game.h: the level-up menu's options (menu_options[3]) and the frames before it takes input.
MENU_OPTIONS = 3
MENU_DELAY = 12
#: game.h EK_BRUTE: the heavy enemy kind (enemy_kind[]).
BRUTE = 2
#: game.h PLAYER_XMIN, PLAYER_YMIN, PLAYER_XMAX, PLAYER_YMAX: where the player's centre can be.
PLAYER_AREA = (15.0, 22.0, 225.0, 145.0)


class ArenaAdapter(GameAdapter):
    """BonkArena: survive 5:00 of waves; auto-fire; level-up menus with three upgrades."""

    name = DATA.name
    game = DATA
    brief = (
        "Survive 5:00 in a walled arena: monsters (E) chase you and cost HP on touch, your "
        "weapon fires by itself, gems (*) give XP; at a level-up menu choose an upgrade."
    )
    spec = DirectiveSpec(
        game=DATA.name,
        actions=("go_to", "collect", "attack", "flee", "choose_upgrade", "wait"),
        n_options=MENU_OPTIONS,
        tile_actions=("go_to", "collect"),
        option_actions=("choose_upgrade",),
        fallback_action="flee",
        fallback_frames=60,
        action_help={
            "go_to": "move to the screen cell {x, y} (8x8 pixel cells, 30 across, 20 down)",
            "collect": "pick up the XP gems around cell {x, y}",
            "attack": "close in on the enemy nearest the cell {x, y} (or the nearest one); the weapon fires by itself",
            "flee": "move away from the enemies",
            "choose_upgrade": "in the level-up menu, pick option {option} (0 top, 1 middle, 2 bottom)",
            "wait": "stand still",
        },
    )
    compact_state_keys = ("hp", "max_hp", "level", "time_s", "enemies", "menu_open")
    state_keys = (
        "hp",
        "max_hp",
        "level",
        "xp",
        "xp_next",
        "kills",
        "time_s",
        "wave",
        "enemies",
        "gems",
        "menu_open",
    )

    def state(self, view: GameView) -> dict[str, Any]:
        out = super().state(view)
        options = view.arrays.get("menu_options")
        if view.get("menu_open") and options is not None:
            out["menu"] = [UPGRADE_LABELS.get(int(o), str(int(o))) for o in options]
        return out

    def enemies(self, view: GameView) -> list[tuple[int, int]]:
        """Enemy centres in pixels."""
        xs, ys, act = (view.arrays.get(k) for k in ("enemy_x", "enemy_y", "enemy_active"))
        if xs is None or ys is None or act is None:
            return []
        return [(int(x), int(y)) for x, y, a in zip(xs, ys, act) if a]

    def gems(self, view: GameView) -> list[tuple[int, int]]:
        """Gem positions in pixels."""
        xs, ys, val = (view.arrays.get(k) for k in ("gem_x", "gem_y", "gem_value"))
        if xs is None or ys is None or val is None:
            return []
        return [(int(x), int(y)) for x, y, v in zip(xs, ys, val) if v]

    def goals(self, view: GameView) -> list[str]:
        if view.get("menu_open"):
            return ["choose an upgrade in the level-up menu"]
        goals = [
            f"survive until 5:00 (now {view.get('time_s') // 60}:{view.get('time_s') % 60:02d})"
        ]
        if view.get("hp") * 3 < view.get("max_hp"):
            goals.insert(0, "low HP: keep away from enemies")
        goals.append("collect XP gems to level up")
        return goals

    def text_map(self, view: GameView) -> str | None:
        grid = [["." for _ in range(GRID_W)] for _ in range(GRID_H)]
        for x in range(GRID_W):
            grid[0][x] = grid[1][x] = grid[GRID_H - 1][x] = "#"
        for y in range(GRID_H):
            grid[y][0] = grid[y][GRID_W - 1] = "#"
        for x, y in self.gems(view):
            put_char(grid, x // CELL, y // CELL, "*")
        for x, y in self.enemies(view):
            put_char(grid, x // CELL, y // CELL, "E")
        cell = self.player_cell(view)
        if cell is not None:
            put_char(grid, cell[0], cell[1], "@")
        return framed(grid)

    def spatial(self, view: GameView) -> list[str]:
        out = super().spatial(view)
        cell = self.player_cell(view)
        if cell is None:
            return out
        px, py = view.get("player_x"), view.get("player_y")
        foes = sorted(self.enemies(view), key=lambda e: (e[0] - px) ** 2 + (e[1] - py) ** 2)
        out.append(f"{len(foes)} enemies; {len(self.gems(view))} gems on the floor.")
        for x, y in foes[:5]:
            dist = int(((x - px) ** 2 + (y - py) ** 2) ** 0.5)
            out.append(
                f"enemy at x={x // CELL}, y={y // CELL}, {dist} px {direction(*cell, x // CELL, y // CELL)}"
            )
        return out

    def events(self, before: GameView | None, now: GameView) -> list[str]:
        out = super().events(before, now)
        if before is not None:
            if now.get("menu_open") and not before.get("menu_open"):
                out.append("menu")
            if now.get("wave") != before.get("wave"):
                out.append("new_wave")
        return out

    def status(self, directive: Directive, start: GameView, now: GameView) -> str:
        if directive.action == "choose_upgrade":
            return "done" if not now.get("menu_open") else "running"
        if now.get("menu_open") and not start.get("menu_open"):
            return "done"  # a menu interrupts anything else
        tile, cell = directive.tile, self.player_cell(now)
        if directive.action in ("go_to", "collect") and tile is not None and cell is not None:
            near = abs(cell[0] - tile[0]) <= 1 and abs(cell[1] - tile[1]) <= 1
            return "done" if near else "running"
        return "running"

    def advise(self, view: GameView) -> Directive | None:
        return arena_advice(view, self)


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
    AREA = PLAYER_AREA
    CLOSE_PX = 36.0

    def _act(self, view: GameView, directive: Directive) -> int:
        if view.get("menu_open"):
            option = directive.option if directive.option is not None else 0
            cursor = view.get("menu_cursor")
            if cursor == option:
                return self.action_for("A")
            return self.press_fresh("DOWN" if (option - cursor) % MENU_OPTIONS == 1 else "UP")
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
        heavy = (kinds[mask] == BRUTE) if kinds is not None else np.zeros(len(dist), bool)
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


def arena_advice(view: GameView, adapter: ArenaAdapter) -> Directive:
    """A sound BonkArena plan from RAM: upgrades by priority, flee when hurt or crowded."""
    if view.get("menu_open"):
        options = [int(o) for o in view.arrays.get("menu_options", np.zeros(MENU_OPTIONS, int))]
        best = pick_upgrade(options, view.get("hp") / max(1, view.get("max_hp")))
        return oracle_directive("take the best upgrade", "choose_upgrade", {"option": best}, 120)
    px, py = view.get("player_x"), view.get("player_y")
    enemies = adapter.enemies(view)
    close = [e for e in enemies if (e[0] - px) ** 2 + (e[1] - py) ** 2 < 40**2]
    if view.get("hp") * 3 < view.get("max_hp") or len(close) >= 3:
        return oracle_directive("get away from the enemies", "flee", None, 60)
    gems = adapter.gems(view)
    safe = [
        g for g in gems if all((g[0] - e[0]) ** 2 + (g[1] - e[1]) ** 2 > 32**2 for e in enemies)
    ]
    if safe:
        gx, gy = min(safe, key=lambda g: (g[0] - px) ** 2 + (g[1] - py) ** 2)
        return oracle_directive(
            "collect XP gems", "collect", {"x": gx // CELL, "y": gy // CELL}, 90
        )
    return oracle_directive("fight from a distance", "attack", None, 90)


def pick_upgrade(options: Sequence[int], hp_fraction: float) -> int:
    """Index (0..2) of the option to take."""
    order = list(PRIORITY)
    if hp_fraction < 0.5:
        order.remove(UPGRADE["heal"])
        order.insert(0, UPGRADE["heal"])
    ranks = [order.index(o) if o in order else len(order) for o in options]
    return int(np.argmin(ranks))


class BonkArenaExpert(RamExpert):
    """Plays BonkArena from the RAM state; see the module docstring.

    Args:
        env: a BonkArena env (any wrapper stack; `AgentError` for another game's).
        seed: unused (the expert is deterministic); every game's `Expert(env, seed)` takes it.
    """

    def __init__(self, env: gym.Env, seed: int | None = None) -> None:
        game: Any = env.unwrapped
        self.game = game
        integration = game.integration
        if game.game_data != DATA:
            raise AgentError(f"BonkArenaExpert plays {DATA.name} only")
        combos = [tuple(sorted(c)) for c in integration.discrete_actions]
        self.noop = combos.index(())
        self.press_a = combos.index(("A",))
        self.up = combos.index(("UP",))
        self.down = combos.index(("DOWN",))
        self.moves: list[tuple[int, np.ndarray]] = []
        for i, combo in enumerate(combos):
            vec = np.zeros(2)
            for button in combo:
                vec += {"UP": (0, -1), "DOWN": (0, 1), "LEFT": (-1, 0), "RIGHT": (1, 0)}.get(
                    button, (0, 0)
                )
            if np.any(vec) and "A" not in combo:
                self.moves.append((i, vec / np.linalg.norm(vec)))
        self._last = self.noop

    def _decide(self) -> int:
        if self._var("won") or self._var("lost"):
            return self.noop
        if self._var("menu_open"):
            return self._menu()
        return self._kite()

    def _menu(self) -> int:
        if self._var("menu_timer") < MENU_DELAY:
            return self.noop
        options = [self._var(f"menu_option{k}") for k in range(MENU_OPTIONS)]
        want = pick_upgrade(options, self._var("hp") / max(1, self._var("max_hp")))
        cursor = self._var("menu_cursor")
        if cursor == want:
            return self.press_a
        if self._last in (self.up, self.down):
            return self.noop  # the cursor moves on a new press
        down_steps = (want - cursor) % MENU_OPTIONS
        return self.down if down_steps == 1 else self.up

    def _kite(self) -> int:
        me = np.array([self._var("player_x"), self._var("player_y")], dtype=np.float64)
        force = np.zeros(2)
        active = self.game.read_array("enemy_active").astype(bool)
        nearest = np.inf
        if active.any():
            xs = self.game.read_array("enemy_x")[active].astype(np.float64)
            ys = self.game.read_array("enemy_y")[active].astype(np.float64)
            kinds = self.game.read_array("enemy_kind")[active]
            delta = me[None, :] - np.stack([xs, ys], axis=1)
            dist = np.maximum(np.linalg.norm(delta, axis=1), 1.0)
            nearest = float(dist.min())
            weight = np.where(kinds == BRUTE, 1.6, 1.0) * (40.0 / dist) ** 2
            force += ((delta / dist[:, None]) * weight[:, None]).sum(axis=0)
        gems = self.game.read_array("gem_value") > 0
        if gems.any() and nearest > 36:
            gx = self.game.read_array("gem_x")[gems].astype(np.float64)
            gy = self.game.read_array("gem_y")[gems].astype(np.float64)
            to_gems = np.stack([gx, gy], axis=1) - me[None, :]
            d = np.linalg.norm(to_gems, axis=1)
            j = int(np.argmin(d))
            if d[j] > 1:
                force += to_gems[j] / d[j] * 0.8
        x0, y0, x1, y1 = PLAYER_AREA
        centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
        margin = min(me[0] - x0, x1 - me[0], me[1] - y0, y1 - me[1])
        pull = 0.3 + (2.5 if margin < 24 else 0.0)
        to_centre = centre - me
        norm = np.linalg.norm(to_centre)
        if norm > 1:
            force += to_centre / norm * pull
        if np.linalg.norm(force) < 0.05:
            return self.noop
        scores = [float(vec @ force) for _, vec in self.moves]
        return self.moves[int(np.argmax(scores))][0]


class BonkArenaTeacher(BonkArenaExpert):
    """The expert as a DAgger teacher (`metabonk_gym.training.dagger`): the same kiting, and in
    the level-up menu a choice made only from what a state-vector policy can see with the menu's
    options added (`wrappers: [{name: ram_features, one_hot: {menu_options: 8}}]`): the cursor,
    HP and the three options. It holds UP or DOWN until the cursor is on the wanted option (the
    menu repeats a held direction), then A; the expert instead waits out the menu's input delay
    and releases between presses, which depends on a timer and its own last button that such a
    policy cannot see.

    Args:
        env: a BonkArena env (`AgentError` for another game's).
        seed: unused (every game's teacher takes it).
    """

    def _menu(self) -> int:
        options = [self._var(f"menu_option{k}") for k in range(MENU_OPTIONS)]
        want = pick_upgrade(options, self._var("hp") / max(1, self._var("max_hp")))
        cursor = self._var("menu_cursor")
        if cursor == want:
            return self.press_a
        return self.down if (want - cursor) % MENU_OPTIONS == 1 else self.up


Adapter = ArenaAdapter
Follower = ArenaFollower
Expert = BonkArenaExpert
Teacher = BonkArenaTeacher
