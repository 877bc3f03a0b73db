"""GBA games: integrations, emulator backends and the env.

>>> BUTTONS[:4], Integration.bundled("BonkQuest").name
(('A', 'B', 'SELECT', 'START'), 'BonkQuest')
"""

from metabonk_gym.gba.buttons import BUTTONS
from metabonk_gym.gba.integration import Integration

__all__ = ["BUTTONS", "Integration"]
