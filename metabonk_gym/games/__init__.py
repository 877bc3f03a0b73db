"""The games: one folder each (`metabonk_gym/games/<Game>/`), and the registry from env to game.

A game folder holds its integration data, reward presets, training defaults, milestones, tile
classes, game card and one `game.py`; `game_for` maps an env id (and its make kwargs) to that
folder's `GameData`, so training and the CLI treat bundled games and user folders alike.

>>> game_for("MetaBonk/BonkQuest-v0").name
'BonkQuest'
>>> game_for("MetaBonk/GBA-v0") is None
True
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from metabonk_gym.gamedata import BUNDLED_GAMES, GameData, bundled_game_folder
from metabonk_gym.registration import env_traits

__all__ = ["BUNDLED_GAMES", "GameData", "bundled_games", "game_for"]


def game_for(env_id: str, **env_kwargs: Any) -> GameData | None:
    """The game behind `env_id` made with `env_kwargs`; None for a user env with no folder.

    `integration=FOLDER` (a user's game, `MetaBonk/GBA-v0`) wins over the id's bundled game.
    """
    spec = gym.spec(env_id.split(":")[-1])
    kwargs = {**spec.kwargs, **env_kwargs}
    if kwargs.get("integration") is not None:
        return GameData(kwargs["integration"])
    name = kwargs.get("game") or env_traits(env_id).game
    return GameData(bundled_game_folder(name)) if name else None


def bundled_games() -> list[GameData]:
    """Every bundled game, in `BUNDLED_GAMES` order."""
    return [GameData(bundled_game_folder(name)) for name in BUNDLED_GAMES]
