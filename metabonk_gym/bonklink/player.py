"""A scripted "person at the keyboard" of the stand-in game, for recording demonstrations.

The real plugin reports what the human pressed in its ``HINP`` input snapshot while the client
sends nothing. ``bonklink-sim --human scripted`` plays that part with this player: it holds a
heading for a while (then picks a new one, or stands still), runs away from the enemies that
come close (weighted by closeness) and back from the walls, aims at the nearest enemy, fires in
bursts (most of the time), uses its area ability when it is ready and enemies are in reach (as
a person watching its cooldown does, not mashing it), and presses submit (interact, with edges)
in menus. Its input is applied when no client action is pending and
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

__all__ = ["HUMAN_PLAYERS", "ScriptedPlayer", "survival_times"]

#: The names ``bonklink-sim --human`` takes.
HUMAN_PLAYERS: tuple[str, ...] = ("scripted",)


class ScriptedPlayer:
    """Chooses one action per tick from the game's own state, like a person watching the screen.

    Args:
        seed: seeds its choices of heading, pauses and bursts.
        hold_ticks: (least, most) ticks a heading or a pause is held.
        still_fraction: the fraction of those holds spent standing still.
        flee_radius: world units: enemies closer than this turn the heading away from them.
        fire_fraction: the fraction of fire bursts in which it holds fire (else it holds off).
    """

    def __init__(
        self,
        seed: int | None = None,
        hold_ticks: tuple[int, int] = (20, 80),
        still_fraction: float = 0.15,
        flee_radius: float = 4.0,
        fire_fraction: float = 0.75,
    ) -> None:
        self.rng = random.Random(seed)
        self.hold_ticks = hold_ticks
        self.still_fraction = still_fraction
        self.flee_radius = flee_radius
        self.fire_fraction = fire_fraction
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
        in_reach = 0
        n = game.n_enemies
        if n:
            dx = game.ex[:n] - game.px
            dz = game.ez[:n] - game.pz
            d2 = dx * dx + dz * dz
            i = int(np.argmin(d2))
            dist = math.sqrt(float(d2[i])) or 1.0
            aim = (float(dx[i]) / dist, float(dz[i]) / dist)
            reach = game.config.ability_radius * game.area_mult
            in_reach = int(np.count_nonzero(d2 <= reach * reach))
            near = d2 < self.flee_radius**2
            if near.any():  # run from the close ones, the closest counting most
                weight = 1.0 / np.maximum(d2[near], 0.25)
                fx, fz = -float((dx[near] * weight).sum()), -float((dz[near] * weight).sum())
                norm = math.hypot(fx, fz)
                if norm > 0:
                    mx, my = fx / norm, fz / norm
        half = game.config.arena_half * 0.8  # steer back from the walls
        if abs(game.px) > half:
            mx -= math.copysign(0.4 * (abs(game.px) - half), game.px)
        if abs(game.pz) > half:
            my -= math.copysign(0.4 * (abs(game.pz) - half), game.pz)
        norm = math.hypot(mx, my)
        if norm > 1.0:
            mx, my = mx / norm, my / norm
        self._heading = (mx, my) if norm > 0.1 else self._heading
        self._fire_hold -= 1
        if self._fire_hold <= 0:
            self._fire_hold = self.rng.randint(10, 40)
            self._firing = self.rng.random() < self.fire_fraction
        ready = game.ability_timer <= 0
        return Action(
            move_x=mx,
            move_y=my,
            aim_x=aim[0],
            aim_y=aim[1],
            fire=self._firing and n > 0,
            ability=ready and in_reach >= 2 and self.rng.random() < 0.3,
        )


def survival_times(seed: int, episodes: int, seconds: float) -> list[float]:
    """The scripted person's own survival: game seconds of ``episodes`` runs (game and player
    seeded ``seed + i``), each capped at ``seconds``, played directly (no sockets): the
    teacher's figure beside its clones' and a random policy's.

    >>> survival_times(0, 2, 3.0)
    [3.0, 3.0]
    """
    times: list[float] = []
    for i in range(episodes):
        game = ArenaGame(seed=seed + i)
        player = ScriptedPlayer(seed=seed + i)
        while game.menu != GAMEPLAY:  # the main menu: submit
            game.tick(player.act(game))
        while game.is_playing and game.game_time < seconds - 1e-9:
            game.tick(player.act(game))
        times.append(round(min(game.game_time, seconds), 3))
    return times


def make_player(name: str, seed: int | None = None) -> ScriptedPlayer:
    """The scripted human called ``name`` (one of :data:`HUMAN_PLAYERS`).

    >>> make_player("scripted").still_fraction
    0.15
    """
    if name not in HUMAN_PLAYERS:
        raise ValueError(f"human must be one of {', '.join(HUMAN_PLAYERS)}, not {name!r}")
    return ScriptedPlayer(seed=seed)
