"""The game adapter: what the thinking stack needs to know about a game, behind one interface.

What: a `GameAdapter` gives the `DirectiveSpec` (action enum, coordinate ranges, safe fallback),
the player's cell, the state and goal list shown to the model, a text map, events that call for
a new directive (new room, menu, HP drop), checks against the current state, whether a directive
is done, and the oracle's advice. This base class is the generic adapter (a user ROM with no
`game.py`); a game's folder overrides it in its `game.py` (`Adapter`, see docs/new-game.md), and
`adapter_for(env)` finds that through `env.unwrapped.game_data`, never by the game's name.
Why: the wrapper, the follower, the oracle and the prompt stay game-agnostic; everything that
depends on a game's rules lives in the game's own folder.

>>> adapter = adapter_for_name("BonkQuest")
>>> adapter.spec.actions
('go_to', 'collect', 'open', 'talk', 'flee', 'explore', 'wait')
>>> adapter_for_name("BonkArena").spec.fallback("timeout").action
'flee'
>>> type(adapter_for_name("my own ROM")) is GameAdapter
True
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import numpy as np

from metabonk_gym.gamedata import BUNDLED_GAMES, GameData, bundled_game_folder
from metabonk_gym.think.directive import Directive, DirectiveSpec
from metabonk_gym.think.view import GameView

#: A game folder's worked examples for the compact prompt profile.
EXAMPLES_FILE = "think_examples.json"

#: The GBA screen as the directive grid: 30 x 20 cells of 8 x 8 pixels.
GRID_W, GRID_H, CELL = 30, 20, 8


#: The system prompt's words about System 1 and the coordinates, for the GBA games.
GBA_SYSTEM1 = """A fast controller ("System 1") turns your directive into button presses: it walks shortest paths
to tile targets, presses A to talk and open, and navigates menus. You are asked again when the
directive is done or expires, on a new room or menu, when HP drops, or every few seconds."""
GBA_COORDINATES = """The screen is a grid of 30 x 20 cells of 8x8 pixels: x is the column (0..29, left to right),
y is the row (0..19, top to bottom). The text map shows x along the top and y down the side;
@ is you, E an enemy."""


class GameAdapter:
    """Game-agnostic defaults (a user ROM with no tile map); a game's `game.py` subclasses it.

    Class attributes a game sets: `name`, `spec`, `state_keys`, the prompt texts (`platform`,
    `system1_text`, `coordinates_text`) and `game` (its `GameData`, for the game card).
    """

    name = "game"
    #: The game's folder data (its game card); None for the generic adapter.
    game: GameData | None = None
    spec = DirectiveSpec(game="Game", actions=("go_to", "press_a", "wait"), fallback_action="wait")
    state_keys: tuple[str, ...] = ()
    #: The state values the compact prompt shows (empty: all of `state`).
    compact_state_keys: tuple[str, ...] = ()
    #: How the system prompt introduces the game, System 1 and the coordinates.
    platform = "a Game Boy Advance game"
    system1_text = GBA_SYSTEM1
    coordinates_text = GBA_COORDINATES
    #: The game in a sentence or two, for the compact prompt profile (small models).
    brief = "Infer the rules from the state and the map."
    #: Whether `options` lists candidate directives (then the "choice" prompt profile applies).
    offers_options = False
    #: The state values the choice prompt shows (empty: `compact_state_keys`).
    choice_state_keys: tuple[str, ...] = ()

    @classmethod
    def for_env(cls, env: Any) -> GameAdapter:
        """The adapter for a made env (override to read settings from it, such as the number
        of menu options)."""
        return cls()

    def game_card(self) -> str | None:
        """The game's rules (`game_card.md` of its folder; None: unknown)."""
        return self.game.game_card() if self.game is not None else None

    def prompt_examples(self, profile: str = "compact") -> list[dict[str, Any]]:
        """Worked examples for the compact prompt (`{"user": text, "answer": directive}`,
        the file's `examples`) or the choice prompt (`{"user": text, "answer": {"pick": N}}`,
        its `choice_examples`), from the game folder's `think_examples.json` (written from the
        oracle's advice by `metabonk think examples`); none for a game without that file."""
        if self.game is None:
            return []
        path = self.game.folder / EXAMPLES_FILE
        if not path.is_file():
            return []
        data = json.loads(path.read_text(encoding="utf-8"))
        key = "choice_examples" if profile == "choice" else "examples"
        return [dict(e) for e in data.get(key, [])]

    def sensible(self, directive: Directive, view: GameView) -> str | None:
        """Why a valid directive makes no sense in this state (None: it does): by default a
        tile target on the player's own cell. Games add theirs (a wall, an empty chest).
        `metabonk bench think` counts these."""
        tile = directive.tile
        if tile is not None and tile == self.player_cell(view):
            return "the target is the player's own cell"
        return None

    def options(self, view: GameView) -> list[Directive]:
        """Candidate directives in this state for the "choice" prompt profile, which numbers
        them and lets the model pick one: each one sensible by construction (a walkable target
        other than the player's cell, an action the state allows), its `goal` saying in a few
        words what it is. Ordered by something other than the answer (e.g. nearest first), so
        picking is the model's work. None by default (`offers_options` False)."""
        return []

    def advise(self, view: GameView) -> Directive | None:
        """The oracle's directive: perfect advice read from the state (secrets included), for
        `OracleStrategist`; None when the game has no oracle."""
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


def game_module(env: Any) -> ModuleType | None:
    """The `game.py` of an env's game folder (`env.unwrapped.game_data`), None when it has none.

    Envs that are not MetaBonk envs (no `game_data`) have no game folder either.
    """
    game = getattr(env.unwrapped, "game_data", None)
    return game.module() if isinstance(game, GameData) else None


def adapter_class(module: ModuleType | None) -> type[GameAdapter]:
    """A game module's `Adapter` (the generic `GameAdapter` when it declares none)."""
    cls = getattr(module, "Adapter", None) if module is not None else None
    if cls is None:
        return GameAdapter
    if not (isinstance(cls, type) and issubclass(cls, GameAdapter)):
        raise TypeError(f"{module.__file__}: Adapter must be a subclass of GameAdapter")  # type: ignore[union-attr]
    return cls


def adapter_for_game(game: GameData) -> GameAdapter:
    """The adapter of a game folder (its `game.py` `Adapter`, else the generic one)."""
    return adapter_class(game.module())()


def adapter_for_name(game: str) -> GameAdapter:
    """The adapter of a bundled game by name (the generic one for any other name)."""
    if game not in BUNDLED_GAMES:
        return GameAdapter()
    return adapter_for_game(GameData(bundled_game_folder(game)))


def game_folder(env: Any) -> str | None:
    """The env's game folder as an absolute path (for decision logs), None without one."""
    game = getattr(env.unwrapped, "game_data", None)
    return str(game.folder.resolve()) if isinstance(game, GameData) else None


def adapter_for(env: Any) -> GameAdapter:
    """The adapter for an env (any wrapper stack): its game folder's `Adapter.for_env(env)`."""
    return adapter_class(game_module(env)).for_env(env)


def put_char(grid: list[list[str]], x: int, y: int, char: str) -> None:
    """Set `grid[y][x]` when (x, y) lies on the grid."""
    if 0 <= y < len(grid) and 0 <= x < len(grid[0]):
        grid[y][x] = char


def framed(grid: list[list[str]]) -> str:
    """Rows prefixed with y, and a two-line x ruler on top (x = column, y = row).

    >>> print(framed([["@", "."], [".", "E"]]))
       00
       01
     0 @.
     1 .E
    """
    width = len(grid[0])
    tens = "".join(str(x // 10) for x in range(width))
    ones = "".join(str(x % 10) for x in range(width))
    lines = [f"   {tens}", f"   {ones}"]
    lines += [f"{y:2d} {''.join(row)}" for y, row in enumerate(grid)]
    return "\n".join(lines)


def direction(px: int, py: int, x: int, y: int) -> str:
    """Where cell (x, y) lies from (px, py), in words.

    >>> direction(5, 5, 7, 4), direction(1, 1, 1, 1)
    ('1 up, 2 right', 'here')
    """
    dx, dy = x - px, y - py
    if dx == 0 and dy == 0:
        return "here"
    parts = []
    if dy:
        parts.append(f"{abs(dy)} {'down' if dy > 0 else 'up'}")
    if dx:
        parts.append(f"{abs(dx)} {'right' if dx > 0 else 'left'}")
    return ", ".join(parts)
