"""System 1: `DirectiveFollower` turns the directive in force into the env's action, every step.

What: this generic follower walks straight towards a tile target and presses A for `press_a`;
a game's `game.py` gives its own `Follower` (a subclass: A* over the tile map with enemies
avoided, steering in a 2D arena, a Box action for a 3D game), and `make_follower(env)` picks it
through the env's game folder. Path finding is the scripted experts' A*
(`metabonk_gym.experts.pathfinding`), used here in (x, y) cells.
Why: a directive is only worth as much as its execution; with a game's follower an oracle
strategist wins the game (see `metabonk bench think`), so the benchmark measures the strategist.

>>> grid = np.ones((3, 4), bool); grid[1, 1:3] = False   # two walls in the middle row
>>> path_cells(grid, (0, 1), [(3, 1)])
[(0, 1), (0, 0), (1, 0), (2, 0), (3, 0), (3, 1)]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from metabonk_gym.experts.base import action_index
from metabonk_gym.experts.pathfinding import astar
from metabonk_gym.think.directive import Directive
from metabonk_gym.think.games import GameAdapter, adapter_for, game_module
from metabonk_gym.think.view import GameView

DIRS: dict[str, tuple[int, int]] = {"UP": (0, -1), "DOWN": (0, 1), "LEFT": (-1, 0), "RIGHT": (1, 0)}


def path_cells(
    passable: np.ndarray,
    start: tuple[int, int],
    goals: Iterable[tuple[int, int]],
    extra_cost: np.ndarray | None = None,
) -> list[tuple[int, int]] | None:
    """A* (`metabonk_gym.experts.pathfinding`) in this module's (x, y) cells: the cells from
    `start` to the nearest reachable goal (a goal may itself be impassable, like a door);
    `extra_cost[y, x]` is added to the unit cost of entering a cell. None when unreachable."""
    cost = None if extra_cost is None else 1.0 + extra_cost
    path = astar(passable, (start[1], start[0]), {(int(y), int(x)) for x, y in goals}, cost)
    return None if path is None else [(c, r) for r, c in path]


class DirectiveFollower:
    """Base follower: maps button combos to the env's discrete actions; see `make_follower`.

    Args:
        adapter: the game's adapter (its reading of the state).
        env: the env it acts in (any wrapper stack).
    """

    def __init__(self, adapter: GameAdapter, env: Any) -> None:
        self.adapter = adapter
        self.env = env
        self.last_action = 0
        self.rng = np.random.default_rng(0)
        #: The actions it expects to take after this step's (first: the next step's), for
        #: action-conditioned predictors; a follower that walks a path sets it, else it is this
        #: step's action (held).
        self.plan: list[int] = []

    def reset(self, seed: int | None = None) -> None:
        """Forget per-episode state (enemy tracks, explore targets)."""
        self.last_action = 0
        self.plan = []
        self.rng = np.random.default_rng(seed)

    def action_for(self, *buttons: str) -> int:
        """The discrete action pressing `buttons` (`metabonk_gym.experts.base.action_index`)."""
        return action_index(self.env, set(buttons))

    def press_fresh(self, *buttons: str) -> int:
        """`buttons` if they were not held last step, else release first (games react to presses)."""
        action = self.action_for(*buttons)
        return 0 if self.last_action == action else action

    def act(self, view: GameView, directive: Directive) -> Any:
        """The action for this step (records it for `press_fresh`, and `plan`)."""
        self.plan = []
        action = self._act(view, directive)
        self.last_action = action
        if not self.plan and isinstance(action, (int, np.integer)):
            self.plan = [int(action)]
        return action

    def distance(self, view: GameView, directive: Directive) -> float | None:
        """Steps from the player to the directive's target tile as this follower walks there
        (here: Manhattan; a game's follower: its path), None without a tile target or player
        cell; `PauseToThink`'s `follow` reward term rewards its decrease.

        >>> from metabonk_gym.think.directive import Directive
        >>> class Adapter:  # the player stands at (2, 3)
        ...     def player_cell(self, view): return (2, 3)
        >>> go = Directive("g", "r", "go_to", {"x": 5, "y": 1}, 60, 1.0)
        >>> DirectiveFollower(Adapter(), env=None).distance(None, go)
        5.0
        """
        cell, tile = self.adapter.player_cell(view), directive.tile
        if cell is None or tile is None:
            return None
        return float(abs(tile[0] - cell[0]) + abs(tile[1] - cell[1]))

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


def make_follower(env: Any, adapter: GameAdapter | None = None, **kwargs: Any) -> DirectiveFollower:
    """The follower for an env's game: its game folder's `Follower` (`kwargs` go to it, e.g.
    a 3D game's `option_points`), else the generic `DirectiveFollower`."""
    adapter = adapter or adapter_for(env)
    cls = getattr(game_module(env), "Follower", None) or DirectiveFollower
    if not (isinstance(cls, type) and issubclass(cls, DirectiveFollower)):
        raise TypeError("a game module's Follower must be a subclass of DirectiveFollower")
    return cls(adapter, env, **kwargs)
