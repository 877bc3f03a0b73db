"""Observation wrappers (installed as `metabonk_gym.wrappers`): tile tokens, text maps, grid
overlays, temporal strips with frame predictors, and button history. Each adds keys to a Dict
observation (the env's own frame stays under `pixels`), so they stack with each other and with
gymnasium's `FrameStackObservation`. See docs/wrappers.md. `PauseToThink`, which drives the think
machinery (a package that uses these wrappers) and lives in `metabonk_gym.think.pause_to_think`,
is importable from here like every other wrapper but loads lazily (PEP 562 `__getattr__`), so
importing the wrappers never imports think.

>>> import gymnasium as gym, metabonk_gym
>>> env = ButtonHistory(TileTokens(gym.make("MetaBonk/BonkQuest-v0")), n=4)
>>> obs, _ = env.reset(seed=0)
>>> sorted(obs)
['buttons', 'classes', 'pixels', 'sprite_map', 'sprites', 'tiles']
>>> env.close()
"""

from typing import Any

from metabonk_gym.wrappers.button_history import ButtonHistory
from metabonk_gym.wrappers.grid_overlay import GridOverlay, draw_overlay
from metabonk_gym.wrappers.pixel_cells import PixelCells
from metabonk_gym.wrappers.pixel_tokens import PixelTokenizer
from metabonk_gym.wrappers.predictors import (
    CopyPredictor,
    FlowPredictor,
    LearnedPredictor,
    LinearPredictor,
    Predictor,
    make_predictor,
)
from metabonk_gym.wrappers.ram_features import RamFeatures
from metabonk_gym.wrappers.screen import ScreenReader
from metabonk_gym.wrappers.semantic import SemanticClasses
from metabonk_gym.wrappers.temporal_strip import TemporalStrip, strip_image
from metabonk_gym.wrappers.text_map import TextMap, ascii_map, describe
from metabonk_gym.wrappers.tile_tokens import TileTokens
from metabonk_gym.wrappers.vram import VramTokenizer, read_snapshot


def __getattr__(name: str) -> Any:
    """`PauseToThink`, imported the first time it is asked for (after this package loaded)."""
    if name == "PauseToThink":
        from metabonk_gym.think.pause_to_think import PauseToThink

        return PauseToThink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ButtonHistory",
    "CopyPredictor",
    "FlowPredictor",
    "GridOverlay",
    "LearnedPredictor",
    "LinearPredictor",
    "PauseToThink",
    "PixelCells",
    "PixelTokenizer",
    "Predictor",
    "RamFeatures",
    "ScreenReader",
    "SemanticClasses",
    "TemporalStrip",
    "TextMap",
    "TileTokens",
    "VramTokenizer",
    "ascii_map",
    "describe",
    "draw_overlay",
    "make_predictor",
    "read_snapshot",
    "strip_image",
]
