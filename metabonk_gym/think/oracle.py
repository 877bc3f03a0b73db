"""The oracle strategist: reads RAM (secrets included) and gives perfect advice, instantly.

What: for BonkQuest it knows where each key lies and which chest of the sage's hall holds one
(`key_chest`), so it sends System 1 straight along the shortest quest: key, door, next room, ...,
treasure, detouring for a heart when HP is low. For BonkArena it picks upgrades as the scripted expert does (`pick_upgrade`),
flees when hurt or crowded, and otherwise fights and collects gems. For Megabonk it reads the
plugin's info: upgrades by name (healing when low), flee when hurt or crowded, kite otherwise.
Why: `metabonk bench think` measures what perfect thinking is worth with the `DirectiveFollower`
(the ceiling a VLM could reach), and tests run the whole think loop without a model.

>>> from metabonk_gym.think.games import adapter_for_name
>>> OracleStrategist(adapter_for_name("BonkQuest")).name
'oracle'
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Sequence

import numpy as np

from metabonk_gym.think.directive import Directive
from metabonk_gym.think.games import (
    CELL,
    MEGABONK_UPGRADE_PRIORITY,
    NONE,
    QUEST_TILE_IDS,
    ArenaAdapter,
    GameAdapter,
    MegabonkAdapter,
    QuestAdapter,
)
from metabonk_gym.think.prompts import HistoryItem
from metabonk_gym.think.strategist import Strategist, ThinkResult, done_future
from metabonk_gym.think.view import GameView


class OracleStrategist(Strategist):
    """Perfect advice from RAM; answers in microseconds."""

    name = "oracle"

    def __init__(self, adapter: GameAdapter) -> None:
        self.adapter = adapter

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> cf.Future[ThinkResult]:
        start = time.perf_counter()
        if isinstance(self.adapter, QuestAdapter):
            directive = quest_advice(view)
        elif isinstance(self.adapter, ArenaAdapter):
            directive = arena_advice(view, self.adapter)
        elif isinstance(self.adapter, MegabonkAdapter):
            directive = megabonk_advice(view, self.adapter)
        else:
            directive = self.adapter.spec.fallback("the oracle does not know this game")
        return done_future(ThinkResult(directive, time.perf_counter() - start))


def _d(goal: str, action: str, target: dict[str, int] | None, frames: int = 1200) -> Directive:
    return Directive(goal, "read from RAM", action, target, frames, 1.0, source="oracle")


def quest_advice(view: GameView) -> Directive:
    """The next step of the shortest BonkQuest playthrough from this state."""
    room, keys, hp = view.get("room"), view.get("keys"), view.get("hp")
    tiles = view.arrays.get("room_tiles")
    if view.get("treasure_x") != NONE:
        return _d(
            "take the treasure",
            "collect",
            {"x": view.get("treasure_x"), "y": view.get("treasure_y")},
        )
    if tiles is not None and hp <= 2:
        hearts = np.argwhere(tiles == QUEST_TILE_IDS["heart"])
        if len(hearts):
            y, x = hearts[0]
            return _d("heal with the heart", "collect", {"x": int(x), "y": int(y)}, 600)
    exit_x, exit_y = view.get("exit_x"), view.get("exit_y")
    door_open = (
        tiles is not None
        and exit_x != NONE
        and int(tiles[exit_y, exit_x]) == QUEST_TILE_IDS["door"]
    )
    if door_open:
        return _d("go through the open door", "go_to", {"x": exit_x, "y": exit_y})
    if keys > 0 and exit_x != NONE:
        return _d("unlock the door with the key", "open", {"x": exit_x, "y": exit_y})
    if view.get("key_x") != NONE:
        return _d("pick up the key", "collect", {"x": view.get("key_x"), "y": view.get("key_y")})
    if tiles is not None:
        chests = [
            (int(x), int(y))
            for y, x in np.argwhere(
                np.isin(tiles, [QUEST_TILE_IDS["chest"], QUEST_TILE_IDS["chest_open"]])
            )
        ]
        index = view.get("key_chest")
        if room == 2 and 0 <= index < len(chests):
            x, y = chests[index]  # argwhere is in reading order, as the game counts chests
            if int(tiles[y, x]) == QUEST_TILE_IDS["chest"]:
                return _d("open the chest with the key", "open", {"x": x, "y": y})
    return _d("look around", "explore", None, 240)


def arena_advice(view: GameView, adapter: ArenaAdapter) -> Directive:
    """A sound BonkArena plan from RAM: upgrades by priority, flee when hurt or crowded."""
    if view.get("menu_open"):
        from metabonk_gym.experts.bonkarena import pick_upgrade

        options = [int(o) for o in view.arrays.get("menu_options", np.zeros(3, int))]
        best = pick_upgrade(options, view.get("hp") / max(1, view.get("max_hp")))
        return _d("take the best upgrade", "choose_upgrade", {"option": best}, 120)
    px, py = view.get("player_x"), view.get("player_y")
    enemies = adapter.enemies(view)
    close = [e for e in enemies if (e[0] - px) ** 2 + (e[1] - py) ** 2 < 40**2]
    if view.get("hp") * 3 < view.get("max_hp") or len(close) >= 3:
        return _d("get away from the enemies", "flee", None, 60)
    gems = adapter.gems(view)
    safe = [
        g for g in gems if all((g[0] - e[0]) ** 2 + (g[1] - e[1]) ** 2 > 32**2 for e in enemies)
    ]
    if safe:
        gx, gy = min(safe, key=lambda g: (g[0] - px) ** 2 + (g[1] - py) ** 2)
        return _d("collect XP gems", "collect", {"x": gx // CELL, "y": gy // CELL}, 90)
    return _d("fight from a distance", "attack", None, 90)


def pick_megabonk_upgrade(options: Sequence[str], health_frac: float) -> int:
    """The index of the best level-up option by name: healing or max HP when health is below
    half, else `MEGABONK_UPGRADE_PRIORITY` (0 when no name is known).

    >>> pick_megabonk_upgrade(["Move Speed +10%", "Damage +25%", "Heal 40%"], 0.9)
    1
    >>> pick_megabonk_upgrade(["Move Speed +10%", "Damage +25%", "Heal 40%"], 0.3)
    2
    """
    names = [o.lower() for o in options]
    order = list(MEGABONK_UPGRADE_PRIORITY)
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
        options = adapter.options(view)
        best = pick_megabonk_upgrade(options, adapter.health_frac(view)) if options else 0
        return _d("take the best upgrade", "choose_upgrade", {"option": best}, 120)
    foes = adapter.enemies(view)
    dist = np.hypot(foes[:, 0], foes[:, 1]) if len(foes) else np.zeros(0)
    if adapter.health_frac(view) < 0.3 or np.count_nonzero(dist < 3.0) >= 4:
        return _d("get away from the enemies", "flee", None, 60)
    if len(foes):
        return _d("kite the nearest enemy", "attack", None, 120)
    return _d("find enemies on open ground", "wander", None, 120)
