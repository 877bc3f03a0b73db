"""GBA envs on SkyEmu, through its HTTP control server (`backend="skyemu"`), and the test peer.

>>> from metabonk_gym.skyemu import SkyEmuBackend, SkyEmuError
>>> SkyEmuBackend.name
'skyemu'
"""

from metabonk_gym.skyemu.backend import SkyEmuBackend
from metabonk_gym.skyemu.client import SkyEmuClient
from metabonk_gym.skyemu.errors import (
    SkyEmuCommandFailedError,
    SkyEmuError,
    SkyEmuNotFoundError,
    SkyEmuProtocolError,
    SkyEmuRomMismatchError,
    SkyEmuStateError,
    SkyEmuUnreachableError,
)

__all__ = [
    "SkyEmuBackend",
    "SkyEmuClient",
    "SkyEmuCommandFailedError",
    "SkyEmuError",
    "SkyEmuNotFoundError",
    "SkyEmuProtocolError",
    "SkyEmuRomMismatchError",
    "SkyEmuStateError",
    "SkyEmuUnreachableError",
]
