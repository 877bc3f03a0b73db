"""Generic reward presets: specs that name no game and work on any env of the contract.

A game's own presets live in its folder (`presets.yaml`, read by `metabonk_gym.gamedata.GameData`)
and win over these on a name clash; `default` is the integration's scenario.json unless the game defines it.

>>> sorted(PRESETS["sparse"])
['lost', 'won']
>>> list(available_presets({"explore": {}}))
['explore', 'sparse']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Preset name -> reward spec (term name -> term), over the info every env reports.
PRESETS: dict[str, dict[str, Any]] = {
    # Sparse: 1 for winning, -1 for losing, nothing else.
    "sparse": {
        "won": {"type": "event", "variable": "won", "weight": 1.0},
        "lost": {"type": "event", "variable": "lost", "weight": -1.0},
    },
}


def available_presets(game_presets: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A game's presets (`GameData.presets()`), then the generic ones it does not redefine:
    name -> reward spec."""
    game = dict(game_presets or {})
    return {**game, **{name: spec for name, spec in PRESETS.items() if name not in game}}
