"""SkyEmu's HTTP control server: the client, the process launcher and the test peer.

The env's backend built on them is `metabonk_gym.gba.backends.skyemu.SkyEmuBackend`
(`GBAEnv(backend="skyemu")`).

>>> from metabonk_gym.skyemu import SkyEmuError
>>> issubclass(SkyEmuError, Exception)
True
"""

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
    "SkyEmuClient",
    "SkyEmuCommandFailedError",
    "SkyEmuError",
    "SkyEmuNotFoundError",
    "SkyEmuProtocolError",
    "SkyEmuRomMismatchError",
    "SkyEmuStateError",
    "SkyEmuUnreachableError",
]
