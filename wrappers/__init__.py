"""Observation wrappers (installed as `metabonk_gym.wrappers`): tile tokens, text maps, grid
overlays, temporal strips with frame predictors, and button history, all as Dict observations
that stack with each other and with gymnasium's `FrameStackObservation`. See docs/wrappers.md.
"""

from metabonk_gym.wrappers.tile_tokens import TileTokens

__all__ = ["TileTokens"]
from metabonk_gym.wrappers.pause_to_think import PauseToThink  # noqa: E402
