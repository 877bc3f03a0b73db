"""Megabonk's own code (`MetaBonk/Megabonk-v0` through BonkLink, or `metabonk bonklink-sim`):
the think adapter, the Box-action directive follower and the oracle.

The game-agnostic machinery (`metabonk_gym.think`) finds these through this folder
(`GameData.module()`): `Adapter` and `Follower` below (see docs/new-game.md, "game.py"). A 3D
survivor game seen as a radar around the player, from the plugin's info (`hp`, position,
enemies, menu, level-up options); there is no scripted `Expert` (the oracle and follower play).

>>> Adapter().spec.actions
('attack', 'flee', 'wander', 'go_to', 'choose_upgrade', 'wait')
>>> pick_megabonk_upgrade(["Move Speed +10%", "Damage +25%", "Heal 40%"], 0.3)
2
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.bonklink.actions import make_box_action
from metabonk_gym.bonklink.game import card_rects
from metabonk_gym.gamedata import GameData
from metabonk_gym.think.directive import Directive, DirectiveError, DirectiveSpec
from metabonk_gym.think.follower import DirectiveFollower
from metabonk_gym.think.games import GameAdapter, direction, framed
from metabonk_gym.think.oracle import oracle_directive
from metabonk_gym.think.view import GameView

DATA = GameData(Path(__file__).resolve().parent)


SYSTEM1 = """A fast controller ("System 1") turns your directive into stick and button input every game tick:
it steers around enemies (always away from the ones about to touch you), aims at the nearest
enemy and fires, uses the area ability when several are close, and clicks the level-up option you
choose. You are asked again when the directive is done or expires, when a menu opens, when health
drops, or every few seconds."""
COORDINATES = """The map is a radar of {n} x {n} cells centred on you: cell (x={c}, y={c}) is where you stand, each
cell is {units:g} world units. x grows to the east (+X), y grows to the south (-Z): y=0 is the
radar's north edge. The map shows x along the top and y down the side;
@ is you, E an enemy (a digit: that many enemies in one cell). A target {{"x", "y"}} is a radar
cell, a direction and distance from where you stand now."""
UPGRADE_PRIORITY = (
    "projectile",
    "damage",
    "attack speed",
    "area",
    "max hp",
    "range",
    "move speed",
    "heal",
)


class MegabonkAdapter(GameAdapter):
    """Megabonk through BonkLink (`MetaBonk/Megabonk-v0`, or `bonklink-sim`): a 3D survivor
    game seen as a radar around the player, from the plugin's info (health, position, enemies,
    menu, level-up options). Actions steer (attack = kite, flee, wander, go_to a radar cell),
    wait, or pick a level-up option; `DirectiveSpec.n_options` is the env's `max_options`, and
    `check` rejects options the open menu does not offer.

    Args:
        n_options: level-up options a directive may choose among (the env's `max_options`; >= 1).
        radar: the radar's width and height in cells: odd and >= 3, so the player has a centre.
        cell_units: world units per radar cell (> 0); the radar spans `radar * cell_units`.
    """

    name = DATA.name
    game = DATA
    platform = "a 3D roguelike survivor game played through the BonkLink mod"
    brief = (
        "A 3D survivor game seen as a radar centred on you: stay alive while your weapons "
        "kill the monsters (E) that chase you; at a level-up menu choose an upgrade."
    )
    system1_text = SYSTEM1
    GAMEPLAY = "Gameplay"

    def __init__(self, n_options: int = 4, radar: int = 21, cell_units: float = 2.0) -> None:
        if radar < 3 or radar % 2 == 0:
            raise ValueError(f"radar must be an odd number of cells >= 3, not {radar}")
        if cell_units <= 0:
            raise ValueError(f"cell_units must be > 0, not {cell_units}")
        self.radar = int(radar)
        self.centre = self.radar // 2
        self.cell_units = float(cell_units)
        self.coordinates_text = COORDINATES.format(
            n=self.radar, c=self.centre, units=self.cell_units
        )
        self.spec = DirectiveSpec(
            game=DATA.name,
            actions=("attack", "flee", "wander", "go_to", "choose_upgrade", "wait"),
            grid_w=self.radar,
            grid_h=self.radar,
            n_options=max(1, int(n_options)),
            tile_actions=("go_to",),
            option_actions=("choose_upgrade",),
            fallback_action="flee",
            fallback_frames=60,
            action_help={
                "attack": "kite the enemy nearest the radar cell {x, y} (or the nearest one): keep "
                "a few units away, aim and fire at it",
                "flee": "run through the widest gap away from the enemies",
                "wander": "roam open ground (towards the radar cell {x, y} if given) to meet "
                "enemies and pick up XP, dodging the ones that come close",
                "go_to": "walk to the radar cell {x, y}, dodging enemies on the way",
                "choose_upgrade": "in the level-up menu, take option {option} (0 is the first "
                "option listed in the state)",
                "wait": "stand still and fire at the nearest enemy (step aside if one touches)",
            },
        )

    # ------------------------------------------------------------------ reading info
    @staticmethod
    def number(view: GameView, key: str, default: float = 0.0) -> float:
        """A float from `info` (NaN and missing read as `default`)."""
        value = view.info.get(key, default)
        try:
            out = float(value)
        except (TypeError, ValueError):
            return default
        return default if out != out else out

    @classmethod
    def for_env(cls, env: Any) -> MegabonkAdapter:
        """The adapter for a made env: as many menu options as its observation holds."""
        return cls(n_options=int(env.unwrapped.max_options))

    def hp(self, view: GameView) -> float:
        return self.number(view, "hp")

    def health_frac(self, view: GameView) -> float:
        """Health over max health (1.0 when the game sends no maximum)."""
        top = self.number(view, "max_hp")
        return min(1.0, max(0.0, self.hp(view) / top)) if top > 0 else 1.0

    @staticmethod
    def position(view: GameView) -> np.ndarray:
        """The player's ground position (x, z) in world units."""
        pos = np.asarray(view.info.get("position", (0.0, 0.0, 0.0)), np.float64).reshape(-1)
        if pos.size < 3:
            return np.zeros(2)
        return np.nan_to_num(pos[[0, 2]])

    def enemies(self, view: GameView) -> np.ndarray:
        """Enemy ground offsets from the player (n, 2): (dx, dz), nearest first."""
        raw = np.asarray(view.info.get("enemies", np.zeros((0, 4))), np.float64)
        if raw.ndim != 2 or raw.shape[1] < 3 or not len(raw):
            return np.zeros((0, 2))
        rel = np.nan_to_num(raw[:, [0, 2]]) - self.position(view)[None, :]
        return rel[np.argsort(np.hypot(rel[:, 0], rel[:, 1]), kind="stable")]

    def menu(self, view: GameView) -> str:
        """The open menu's name (`Gameplay` while playing)."""
        return str(view.info.get("menu", self.GAMEPLAY) or self.GAMEPLAY)

    def in_menu(self, view: GameView) -> bool:
        """A menu (a level-up) is open over the run."""
        return self.menu(view) != self.GAMEPLAY

    @staticmethod
    def menu_options(view: GameView) -> list[str]:
        """The level-up options the game offers (empty when it sends none)."""
        return [str(o) for o in view.info.get("options", []) or []]

    # ------------------------------------------------------------------ radar cells
    def cell_of(self, dx: float, dz: float) -> tuple[int, int]:
        """The radar cell of a ground offset from the player (may lie outside the radar)."""
        return (
            self.centre + int(round(dx / self.cell_units)),
            self.centre - int(round(dz / self.cell_units)),
        )

    def offset_of(self, cell: tuple[int, int]) -> np.ndarray:
        """The ground offset (dx, dz) of a radar cell's centre from the player."""
        return np.array(
            [(cell[0] - self.centre) * self.cell_units, (self.centre - cell[1]) * self.cell_units]
        )

    def player_cell(self, view: GameView) -> tuple[int, int] | None:
        return self.centre, self.centre

    # ------------------------------------------------------------------ prompt
    def state(self, view: GameView) -> dict[str, Any]:
        foes = self.enemies(view)
        dist = np.hypot(foes[:, 0], foes[:, 1]) if len(foes) else np.zeros(0)
        out: dict[str, Any] = {
            "hp": round(self.hp(view), 1),
            "max_hp": round(self.number(view, "max_hp"), 1),
            "game_time_s": round(self.number(view, "game_time"), 1),
            "enemies": int(len(foes)),
            "enemies_within_3_units": int(np.count_nonzero(dist < 3.0)),
            "menu": self.menu(view),
        }
        for key in ("level", "xp", "kills"):
            if key in view.info:
                out[key] = round(self.number(view, key), 1)
        if self.in_menu(view) or self.menu_options(view):
            out["options"] = {str(i): o for i, o in enumerate(self.menu_options(view))}
        return out

    def goals(self, view: GameView) -> list[str]:
        if self.in_menu(view):
            options = self.menu_options(view)
            if options:
                listed = ", ".join(f"{i} {o}" for i, o in enumerate(options))
                return [f"choose a level-up option: {listed}"]
            return ["a menu is open: choose_upgrade (option 0 takes the default)"]
        goals = [f"survive (now {self.number(view, 'game_time'):.0f} s into the run)"]
        if self.health_frac(view) < 0.35:
            goals.insert(0, "low health: keep away from the enemies")
        goals.append("let the weapons kill enemies for XP and level-ups")
        return goals

    def text_map(self, view: GameView) -> str | None:
        counts = np.zeros((self.radar, self.radar), int)
        for dx, dz in self.enemies(view):
            x, y = self.cell_of(dx, dz)
            if 0 <= x < self.radar and 0 <= y < self.radar:
                counts[y, x] += 1
        grid = [
            ["." if n == 0 else "E" if n == 1 else str(min(9, n)) for n in row] for row in counts
        ]
        grid[self.centre][self.centre] = "@"
        return framed(grid)

    def spatial(self, view: GameView) -> list[str]:
        foes = self.enemies(view)
        pos = self.position(view)
        out = [
            f"You are at world x={pos[0]:.1f}, z={pos[1]:.1f} (radar cell "
            f"x={self.centre}, y={self.centre}); {len(foes)} enemies."
        ]
        for dx, dz in foes[:5]:
            x, y = self.cell_of(dx, dz)
            dist = float(np.hypot(dx, dz))
            out.append(
                f"enemy {dist:.1f} units away at cell x={x}, y={y} "
                f"({direction(self.centre, self.centre, x, y)})"
            )
        return out

    def picture(self, view: GameView) -> np.ndarray | None:
        return view.frame  # a 3D view: no cell grid on it

    # ------------------------------------------------------------------ triggers
    def events(self, before: GameView | None, now: GameView) -> list[str]:
        if before is None:
            return ["start"]
        out: list[str] = []
        if self.in_menu(now) and self.menu(now) != self.menu(before):
            out.append("menu")
        top = self.number(now, "max_hp")
        lost = self.hp(before) - self.hp(now)
        if top > 0 and lost > 0:
            # one big hit, or health crossing a quarter of the bar (not every tick of contact)
            band_now = math.ceil(4 * self.hp(now) / top)  # quarters of the bar: 4 = full
            band_before = math.ceil(4 * self.hp(before) / top)
            if lost >= 0.1 * top or band_now < band_before:
                out.append("hp_drop")
        return out

    def check(self, directive: Directive, view: GameView) -> None:
        option = directive.option
        if directive.action != "choose_upgrade" or option is None:
            return
        if not self.in_menu(view):
            raise DirectiveError("choose_upgrade, but no menu is open")
        options = self.menu_options(view)
        if options and not 0 <= option < len(options):
            raise DirectiveError(
                f"target.option {option} is out of range: the menu offers options "
                f"0..{len(options) - 1}"
            )

    def goal_offset(
        self, directive: Directive, start: GameView, now: GameView
    ) -> np.ndarray | None:
        """Where a tile target (set at `start`) lies from the player now, in world units."""
        tile = directive.tile
        if tile is None:
            return None
        anchor = self.position(start) + self.offset_of(tile)
        return anchor - self.position(now)

    def status(self, directive: Directive, start: GameView, now: GameView) -> str:
        if directive.action == "choose_upgrade":
            return "running" if self.in_menu(now) else "done"
        if self.in_menu(now) and not self.in_menu(start):
            return "done"  # a level-up interrupts anything else
        if directive.action == "go_to":
            offset = self.goal_offset(directive, start, now)
            if offset is not None and float(np.hypot(*offset)) <= self.cell_units:
                return "done"
        return "running"

    def advise(self, view: GameView) -> Directive | None:
        return megabonk_advice(view, self)


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

    Args:
        adapter: the `MegabonkAdapter` whose radar cells and options the directives name.
        env: the Megabonk env (any wrapper stack); its `action_type` picks Box or Dict actions.
        option_points: click points of options 0, 1, ... (normalised x, y, top-left origin);
            default: the stand-in game's cards.
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
            options, option = adapter.menu_options(view), directive.option
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


def pick_megabonk_upgrade(options: Sequence[str], health_frac: float) -> int:
    """The index of the best level-up option by name: healing or max HP when health is below
    half, else `UPGRADE_PRIORITY` (0 when no name is known).

    >>> pick_megabonk_upgrade(["Move Speed +10%", "Damage +25%", "Heal 40%"], 0.9)
    1
    >>> pick_megabonk_upgrade(["Move Speed +10%", "Damage +25%", "Heal 40%"], 0.3)
    2
    """
    names = [o.lower() for o in options]
    order = list(UPGRADE_PRIORITY)
    if health_frac < 0.5:
        order = ["heal", "max hp", *order]
    for key in order:
        for i, name in enumerate(names):
            if key in name:
                return i
    return 0


def megabonk_advice(view: GameView, adapter: MegabonkAdapter) -> Directive:
    """A sound Megabonk plan from the plugin's info: upgrades by name, flee when hurt or
    crowded, kite the nearest enemy while there are any, else wander."""
    if adapter.in_menu(view):
        options = adapter.menu_options(view)
        best = pick_megabonk_upgrade(options, adapter.health_frac(view)) if options else 0
        return oracle_directive("take the best upgrade", "choose_upgrade", {"option": best}, 120)
    foes = adapter.enemies(view)
    dist = np.hypot(foes[:, 0], foes[:, 1]) if len(foes) else np.zeros(0)
    if adapter.health_frac(view) < 0.3 or np.count_nonzero(dist < 3.0) >= 4:
        return oracle_directive("get away from the enemies", "flee", None, 60)
    if len(foes):
        return oracle_directive("kite the nearest enemy", "attack", None, 120)
    return oracle_directive("find enemies on open ground", "wander", None, 120)


Adapter = MegabonkAdapter
Follower = MegabonkFollower
