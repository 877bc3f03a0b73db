"""GBA games: integrations, emulator backends and the env."""

from metabonk_gym.gba.buttons import BUTTONS
from metabonk_gym.gba.integration import BUNDLED_GAMES, Integration

__all__ = ["BUNDLED_GAMES", "BUTTONS", "Integration"]
