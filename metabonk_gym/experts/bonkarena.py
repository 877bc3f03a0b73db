"""The BonkArena scripted expert: kites enemies from the RAM state and picks level-up upgrades.

Movement is a sum of forces on the player: each active enemy pushes away (stronger when close,
brutes more), the nearest gem pulls while no enemy is near, and the arena's centre pulls harder
near the walls so the player is never pinned in a corner. The move is the one of the 8 directions
that best follows the force. In the level-up menu it moves the cursor (UP/DOWN on new presses)
to the best option by a fixed priority (heal when low, then survival, then firepower) and presses A.

>>> pick_upgrade([2, 0, 5], hp_fraction=1.0)
1
>>> pick_upgrade([2, 4, 5], hp_fraction=0.3)
1
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.base import AgentError, RamExpert

UPG_DAMAGE, UPG_FIRERATE, UPG_SPEED, UPG_MAXHP, UPG_HEAL, UPG_MAGNET, UPG_MULTI, UPG_ARMOR = range(
    8
)
#: Preferred upgrades, best first (HEAL goes first when HP is low).
PRIORITY: tuple[int, ...] = (
    UPG_DAMAGE,
    UPG_MULTI,
    UPG_FIRERATE,
    UPG_ARMOR,
    UPG_MAXHP,
    UPG_SPEED,
    UPG_MAGNET,
    UPG_HEAL,
)
BRUTE = 2
ARENA = (15.0, 22.0, 225.0, 145.0)  # player centre limits: x0, y0, x1, y1
MENU_DELAY_FRAMES = 12


def pick_upgrade(options: Sequence[int], hp_fraction: float) -> int:
    """Index (0..2) of the option to take."""
    order = list(PRIORITY)
    if hp_fraction < 0.5:
        order.remove(UPG_HEAL)
        order.insert(0, UPG_HEAL)
    ranks = [order.index(o) if o in order else len(order) for o in options]
    return int(np.argmin(ranks))


class BonkArenaExpert(RamExpert):
    """Plays BonkArena from the RAM state; see the module docstring."""

    def __init__(self, env: gym.Env, seed: int | None = None) -> None:
        self.game: Any = env.unwrapped
        integration = getattr(self.game, "integration", None)
        if integration is None or integration.name != "BonkArena":
            raise AgentError("BonkArenaExpert plays BonkArena only")
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
        if self._var("menu_timer") < MENU_DELAY_FRAMES:
            return self.noop
        options = [self._var(f"menu_option{k}") for k in range(3)]
        want = pick_upgrade(options, self._var("hp") / max(1, self._var("max_hp")))
        cursor = self._var("menu_cursor")
        if cursor == want:
            return self.press_a
        if self._last in (self.up, self.down):
            return self.noop  # the cursor moves on a new press
        down_steps = (want - cursor) % 3
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
        x0, y0, x1, y1 = ARENA
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
