"""A scripted "person at the keyboard" of the stand-in game, for recording demonstrations.

The real plugin reports what the human pressed in its ``HINP`` input snapshot while the client
sends nothing. ``bonklink-sim --human scripted`` plays that part with this player: it holds a
heading for a while (then picks a new one, or stands still), turns away from enemies that come
close, aims at the nearest enemy, fires and uses its ability in bursts, and presses submit
(interact, with edges) in menus. Its input is applied when no client action is pending and
reported in the snapshot, exactly like a human's.

>>> from metabonk_gym.bonklink.game import ArenaGame
>>> player = ScriptedPlayer(seed=1)
>>> game = ArenaGame(seed=1)
>>> [player.act(game).interact for _ in range(4)]  # on the main menu: submit, with edges
[True, False, True, False]
"""

from __future__ import annotations

import math
import random

import numpy as np

from metabonk_gym.bonklink.codec import Action
from metabonk_gym.bonklink.game import GAMEPLAY, ArenaGame

__all__ = ["HUMAN_PLAYERS", "ScriptedPlayer"]

#: The names ``bonklink-sim --human`` takes.
HUMAN_PLAYERS: tuple[str, ...] = ("scripted",)


class ScriptedPlayer:
    """Chooses one action per tick from the game's own state, like a person watching the screen.

    Args:
        seed: seeds its choices of heading, pauses and bursts.
        hold_ticks: (least, most) ticks a heading or a pause is held.
        still_fraction: the fraction of those holds spent standing still.
        flee_radius: world units: an enemy closer than this turns the heading away from it.
    """

    def __init__(
        self,
        seed: int | None = None,
        hold_ticks: tuple[int, int] = (20, 80),
        still_fraction: float = 0.15,
        flee_radius: float = 4.0,
    ) -> None:
        self.rng = random.Random(seed)
        self.hold_ticks = hold_ticks
        self.still_fraction = still_fraction
        self.flee_radius = flee_radius
        self._heading: tuple[float, float] = (0.0, 0.0)
        self._hold = 0
        self._fire_hold = 0
        self._firing = False
        self._menu_tick = 0

    def _new_heading(self) -> None:
        self._hold = self.rng.randint(*self.hold_ticks)
        if self.rng.random() < self.still_fraction:
            self._heading = (0.0, 0.0)
            return
        angle = self.rng.uniform(0.0, 2.0 * math.pi)
        self._heading = (math.cos(angle), math.sin(angle))

    def act(self, game: ArenaGame) -> Action:
        """The input for this tick of ``game``."""
        if game.menu != GAMEPLAY:
            self._menu_tick += 1
            return Action(interact=self._menu_tick % 2 == 1)
        self._menu_tick = 0
        self._hold -= 1
        if self._hold <= 0:
            self._new_heading()
        mx, my = self._heading
        aim = (0.0, 0.0)
        near = False
        n = game.n_enemies
        if n:
            dx = game.ex[:n] - game.px
            dz = game.ez[:n] - game.pz
            d2 = dx * dx + dz * dz
            i = int(np.argmin(d2))
            dist = math.sqrt(float(d2[i])) or 1.0
            aim = (float(dx[i]) / dist, float(dz[i]) / dist)
            near = dist < self.flee_radius
            if near and (mx or my):  # turn away from the enemy, keep moving
                mx, my = -aim[0], -aim[1]
        half = game.config.arena_half * 0.85  # steer back from the walls
        if abs(game.px) > half and mx * game.px > 0:
            mx = -mx
        if abs(game.pz) > half and my * game.pz > 0:
            my = -my
        self._heading = (mx, my) if (mx or my) else self._heading
        self._fire_hold -= 1
        if self._fire_hold <= 0:
            self._fire_hold = self.rng.randint(10, 40)
            self._firing = self.rng.random() < 0.5
        return Action(
            move_x=mx,
            move_y=my,
            aim_x=aim[0],
            aim_y=aim[1],
            fire=self._firing and n > 0,
            ability=near and self.rng.random() < 0.1,
        )


def make_player(name: str, seed: int | None = None) -> ScriptedPlayer:
    """The scripted human called ``name`` (one of :data:`HUMAN_PLAYERS`).

    >>> make_player("scripted").still_fraction
    0.15
    """
    if name not in HUMAN_PLAYERS:
        raise ValueError(f"human must be one of {', '.join(HUMAN_PLAYERS)}, not {name!r}")
    return ScriptedPlayer(seed=seed)
