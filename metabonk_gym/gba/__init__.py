"""GBA games: integrations, emulator backends and the env."""

from metabonk_gym.gba.buttons import BUTTONS
from metabonk_gym.gba.integration import Integration

__all__ = ["BUTTONS", "Integration"]
