"""Per-game knowledge the thinking stack needs: directive vocabulary, state, goals, progress.

What: a `GameAdapter` per game (`BonkQuest`, `BonkArena`, `Megabonk` through BonkLink, and a
generic one for user ROMs) gives the `DirectiveSpec` (action enum, coordinate ranges, safe
fallback), the player's cell, the state and goal list shown to the model, a text map (a tile map,
or Megabonk's radar around the player), events that call for a new directive (new room, menu, HP
drop), checks against the current state, and whether a directive is done.
Why: the wrapper, the follower, the oracle and the prompt stay game-agnostic; everything that
depends on a game's rules lives here, next to the other games.

>>> adapter = adapter_for_name("BonkQuest")
>>> adapter.spec.actions
('go_to', 'collect', 'open', 'talk', 'flee', 'explore', 'wait')
>>> adapter_for_name("BonkArena").spec.fallback("timeout").action
'flee'
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from metabonk_gym.think.directive import Directive, DirectiveError, DirectiveSpec
from metabonk_gym.think.view import GameView

GRID_W, GRID_H, CELL = 30, 20, 8
NONE = 0xFF

#: Map characters for BonkQuest's semantic tile ids (metabonk.json "tile_classes").
QUEST_TILE_CHARS = {
    "floor": ".",
    "wall": "#",
    "door_locked": "D",
    "door": "d",
    "key": "k",
    "chest": "C",
    "chest_open": "c",
    "treasure": "T",
    "npc": "N",
    "water": "~",
    "heart": "h",
}
QUEST_TILE_IDS = {name: i for i, name in enumerate(QUEST_TILE_CHARS)}
UPGRADES = ("damage", "fire rate", "speed", "max hp", "heal", "magnet", "multishot", "armor")


#: The system prompt's words about System 1 and the coordinates, for the GBA games.
GBA_SYSTEM1 = """A fast controller ("System 1") turns your directive into button presses: it walks shortest paths
to tile targets, presses A to talk and open, and navigates menus. You are asked again when the
directive is done or expires, on a new room or menu, when HP drops, or every few seconds."""
GBA_COORDINATES = """The screen is a grid of 30 x 20 cells of 8x8 pixels: x is the column (0..29, left to right),
y is the row (0..19, top to bottom). The text map shows x along the top and y down the side;
@ is you, E an enemy."""


class GameAdapter:
    """Game-agnostic defaults (a user ROM with no tile map): override per game."""

    name = "game"
    spec = DirectiveSpec(game="Game", actions=("go_to", "press_a", "wait"), fallback_action="wait")
    state_keys: tuple[str, ...] = ()
    #: How the system prompt introduces the game, System 1 and the coordinates.
    platform = "a Game Boy Advance game"
    system1_text = GBA_SYSTEM1
    coordinates_text = GBA_COORDINATES

    def game_card(self) -> str | None:
        """The game's rules when no integration provides a `game_card.md` (None: unknown)."""
        return None

    def hp(self, view: GameView) -> float:
        """The player's health (the decision log's "HP lost")."""
        return view.get("hp")

    def check(self, directive: Directive, view: GameView) -> None:
        """Reject (`DirectiveError`) a schema-valid directive that the current state rules out,
        such as an option the open menu does not offer. Nothing by default."""

    def picture(self, view: GameView) -> np.ndarray | None:
        """The image for vision models (None: the frame with the 30x20 cell grid)."""
        return None

    def player_cell(self, view: GameView) -> tuple[int, int] | None:
        """The player's (x, y) on the 30x20 screen-cell grid, or None if unknown."""
        if "player_x" in view.ram or "player_x" in view.info:
            return int(view.get("player_x")) // CELL, int(view.get("player_y")) // CELL
        return None

    def state(self, view: GameView) -> dict[str, Any]:
        """RAM state shown to the model (the integration's info variables)."""
        keys = self.state_keys or tuple(
            k for k in view.info if k not in ("reward_terms", "game_seed")
        )
        return {k: view.get(k) for k in keys if k in view.ram or k in view.info}

    def goals(self, view: GameView) -> list[str]:
        """The current goal list, most urgent first."""
        return ["win the game"]

    def text_map(self, view: GameView) -> str | None:
        """An ASCII map of the screen cells, or None when the game has no tile map."""
        return None

    def spatial(self, view: GameView) -> list[str]:
        """Sentences that place the player and the important things."""
        cell = self.player_cell(view)
        return [f"You are at x={cell[0]}, y={cell[1]}."] if cell else []

    def events(self, before: GameView | None, now: GameView) -> list[str]:
        """Reasons to think again now (new room, a menu opened, HP dropped)."""
        if before is None:
            return ["start"]
        out = []
        if self.hp(now) < self.hp(before):
            out.append("hp_drop")
        return out

    def status(self, directive: Directive, start: GameView, now: GameView) -> str:
        """`"done"` when the directive's intent is achieved, else `"running"`."""
        tile = directive.tile
        if directive.action == "go_to" and tile is not None and self.player_cell(now) == tile:
            return "done"
        return "running"

    def features(self, directive: Directive, view: GameView, frames_left: int) -> np.ndarray:
        """The directive as numbers for an RL policy (see `feature_size`)."""
        actions = self.spec.actions
        out = np.zeros(self.feature_size(), np.float32)
        if directive.action in actions:
            out[actions.index(directive.action)] = 1.0
        k = len(actions)
        tile, cell = directive.tile, self.player_cell(view)
        if tile is not None and cell is not None:
            out[k] = 1.0
            out[k + 1] = (tile[0] - cell[0]) / self.spec.grid_w
            out[k + 2] = (tile[1] - cell[1]) / self.spec.grid_h
        option = directive.option
        if option is not None and self.spec.n_options:
            out[k + 3] = (option + 1) / self.spec.n_options
        out[k + 4] = min(1.0, max(0.0, frames_left / max(1, directive.duration_frames)))
        out[k + 5] = directive.confidence
        return out

    def feature_size(self) -> int:
        """Length of `features`: one-hot action, has-tile, dx, dy, option, time left, confidence."""
        return len(self.spec.actions) + 6


class QuestAdapter(GameAdapter):
    """BonkQuest: five rooms, keys, locked doors, the sage, chests, patrolling enemies."""

    name = "BonkQuest"
    spec = DirectiveSpec(
        game="BonkQuest",
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
            labels = ("NORTH-WEST", "NORTH-EAST", "SOUTH")
            chest = view.get("key_chest", 0)
            if 0 <= chest < len(labels):
                out["sage_said"] = f"the key is in the {labels[chest]} chest of the sage's hall"
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
        elif room == 2:
            goals.append("open the chest the sage named to get the key")
        elif not (view.get("doors_open") >> room) & 1:
            goals.append(f"find the key of room {room} (k on the map)")
        else:
            goals.append("go through the open door (d) on the east side to the next room")
        if view.get("hp") <= 2:
            goals.append("pick up a heart (h) if there is one")
        goals.append("avoid the enemies (E): touching one costs 1 HP")
        return goals

    def text_map(self, view: GameView) -> str | None:
        tiles = self.tiles(view)
        if tiles is None:
            return None
        grid = [[_quest_char(int(t)) for t in row] for row in tiles]
        for x, y in self.enemies(view):
            if 0 <= y < len(grid) and 0 <= x < len(grid[0]):
                grid[y][x] = "E"
        px, py = self.player_cell(view) or (-1, -1)
        if 0 <= py < len(grid) and 0 <= px < len(grid[0]):
            grid[py][px] = "@"
        return _framed(grid)

    def spatial(self, view: GameView) -> list[str]:
        out = super().spatial(view)
        tiles = self.tiles(view)
        if tiles is None:
            return out
        px, py = self.player_cell(view) or (0, 0)
        for name in ("key", "chest", "npc", "door_locked", "door", "treasure", "heart"):
            cells = np.argwhere(tiles == QUEST_TILE_IDS[name])
            for y, x in cells[:4]:
                out.append(
                    f"{name.replace('_', ' ')} at x={x}, y={y} ({_direction(px, py, int(x), int(y))})"
                )
        for x, y in self.enemies(view):
            out.append(f"enemy at x={x}, y={y} ({_direction(px, py, x, y)})")
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


class ArenaAdapter(GameAdapter):
    """BonkArena: survive 5:00 of waves; auto-fire; level-up menus with three upgrades."""

    name = "BonkArena"
    spec = DirectiveSpec(
        game="BonkArena",
        actions=("go_to", "collect", "attack", "flee", "choose_upgrade", "wait"),
        n_options=3,
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
            out["menu"] = [
                UPGRADES[int(o)] if int(o) < len(UPGRADES) else str(int(o)) for o in options
            ]
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
            _put(grid, x // CELL, y // CELL, "*")
        for x, y in self.enemies(view):
            _put(grid, x // CELL, y // CELL, "E")
        cell = self.player_cell(view)
        if cell is not None:
            _put(grid, cell[0], cell[1], "@")
        return _framed(grid)

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
                f"enemy at x={x // CELL}, y={y // CELL}, {dist} px {_direction(*cell, x // CELL, y // CELL)}"
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


MEGABONK_SYSTEM1 = """A fast controller ("System 1") turns your directive into stick and button input every game tick:
it steers around enemies (always away from the ones about to touch you), aims at the nearest
enemy and fires, uses the area ability when several are close, and clicks the level-up option you
choose. You are asked again when the directive is done or expires, when a menu opens, when health
drops, or every few seconds."""
MEGABONK_COORDINATES = """The map is a radar of {n} x {n} cells centred on you: cell (x={c}, y={c}) is where you stand, each
cell is {units:g} world units. x grows to the east (+X), y grows to the south (-Z): y=0 is the
radar's north edge. The map shows x along the top and y down the side;
@ is you, E an enemy (a digit: that many enemies in one cell). A target {{"x", "y"}} is a radar
cell, a direction and distance from where you stand now."""
MEGABONK_UPGRADE_PRIORITY = (
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
    `check` rejects options the open menu does not offer."""

    name = "Megabonk"
    platform = "a 3D roguelike survivor game played through the BonkLink mod"
    system1_text = MEGABONK_SYSTEM1
    GAMEPLAY = "Gameplay"

    def __init__(self, n_options: int = 4, radar: int = 21, cell_units: float = 2.0) -> None:
        if radar < 3 or radar % 2 == 0:
            raise ValueError(f"radar must be an odd number of cells >= 3, not {radar}")
        if cell_units <= 0:
            raise ValueError(f"cell_units must be > 0, not {cell_units}")
        self.radar = int(radar)
        self.centre = self.radar // 2
        self.cell_units = float(cell_units)
        self.coordinates_text = MEGABONK_COORDINATES.format(
            n=self.radar, c=self.centre, units=self.cell_units
        )
        self.spec = DirectiveSpec(
            game="Megabonk",
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

    def hp(self, view: GameView) -> float:
        return self.number(view, "health")

    def health_frac(self, view: GameView) -> float:
        """Health over max health (1.0 when the game sends no maximum)."""
        top = self.number(view, "max_health")
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
    def options(view: GameView) -> list[str]:
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
    def game_card(self) -> str | None:
        from importlib import resources

        card = resources.files("metabonk_gym") / "games" / "Megabonk" / "game_card.md"
        return card.read_text(encoding="utf-8") if card.is_file() else None

    def state(self, view: GameView) -> dict[str, Any]:
        foes = self.enemies(view)
        dist = np.hypot(foes[:, 0], foes[:, 1]) if len(foes) else np.zeros(0)
        out: dict[str, Any] = {
            "health": round(self.hp(view), 1),
            "max_health": round(self.number(view, "max_health"), 1),
            "game_time_s": round(self.number(view, "game_time"), 1),
            "enemies": int(len(foes)),
            "enemies_within_3_units": int(np.count_nonzero(dist < 3.0)),
            "menu": self.menu(view),
        }
        for key in ("level", "xp", "kills"):
            if key in view.info:
                out[key] = round(self.number(view, key), 1)
        if self.in_menu(view) or self.options(view):
            out["options"] = {str(i): o for i, o in enumerate(self.options(view))}
        return out

    def goals(self, view: GameView) -> list[str]:
        if self.in_menu(view):
            options = self.options(view)
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
        return _framed(grid)

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
                f"({_direction(self.centre, self.centre, x, y)})"
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
        top = self.number(now, "max_health")
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
        options = self.options(view)
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


ADAPTERS: dict[str, type[GameAdapter]] = {
    "BonkQuest": QuestAdapter,
    "BonkArena": ArenaAdapter,
    "Megabonk": MegabonkAdapter,
}


def adapter_for_name(game: str) -> GameAdapter:
    """The adapter of a game by integration name (the generic one for unknown games)."""
    return ADAPTERS.get(game, GameAdapter)()


def adapter_for(env: Any) -> GameAdapter:
    """The adapter for an env (any wrapper stack); Megabonk's gets the env's `max_options`."""
    base = env.unwrapped
    if is_megabonk_env(base):
        builder = getattr(base, "_obs", None)
        return MegabonkAdapter(n_options=int(getattr(builder, "max_options", 4)))
    integration = getattr(base, "integration", None)
    return adapter_for_name(str(getattr(integration, "name", "")))


def is_megabonk_env(env: Any) -> bool:
    """Whether `env` (unwrapped) is `MetaBonk/Megabonk-v0`'s `MegabonkEnv`."""
    from metabonk_gym.bonklink.env import MegabonkEnv

    return isinstance(env, MegabonkEnv)


def _quest_char(tile: int) -> str:
    names = list(QUEST_TILE_CHARS)
    return QUEST_TILE_CHARS[names[tile]] if 0 <= tile < len(names) else "?"


def _put(grid: list[list[str]], x: int, y: int, char: str) -> None:
    if 0 <= y < len(grid) and 0 <= x < len(grid[0]):
        grid[y][x] = char


def _framed(grid: list[list[str]]) -> str:
    """Rows prefixed with y, and a two-line x ruler on top (x = column, y = row)."""
    width = len(grid[0])
    tens = "".join(str(x // 10) for x in range(width))
    ones = "".join(str(x % 10) for x in range(width))
    lines = [f"   {tens}", f"   {ones}"]
    lines += [f"{y:2d} {''.join(row)}" for y, row in enumerate(grid)]
    return "\n".join(lines)


def _direction(px: int, py: int, x: int, y: int) -> str:
    dx, dy = x - px, y - py
    if dx == 0 and dy == 0:
        return "here"
    parts = []
    if dy:
        parts.append(f"{abs(dy)} {'down' if dy > 0 else 'up'}")
    if dx:
        parts.append(f"{abs(dx)} {'right' if dx > 0 else 'left'}")
    return ", ".join(parts)
