"""Errors of the SkyEmu backend: each names what went wrong on the HTTP link and how to fix it.

All subclass `metabonk_gym.errors.MetabonkError`, so `except MetabonkError` catches them too.

>>> issubclass(SkyEmuUnreachableError, SkyEmuError) and issubclass(SkyEmuError, MetabonkError)
True
"""

from __future__ import annotations

from metabonk_gym.errors import CorruptSavestateError, MetabonkError

#: How to get a SkyEmu to talk to; appended to errors about a missing or silent server.
START_HINT = (
    "Start SkyEmu with its HTTP control server (GUI: Settings > Advanced > Enable HTTP Control "
    "Server; headless: `SkyEmu http_server 8080 ROM.gba`) and pass skyemu_url='http://127.0.0.1:8080', "
    "or pass skyemu_binary=PATH_TO_SKYEMU to let metabonk start its own"
)


class SkyEmuError(MetabonkError):
    """Base class of the SkyEmu backend's errors."""


class SkyEmuUnreachableError(SkyEmuError, ConnectionError):
    """No SkyEmu answers at the URL (refused, timed out, or the process exited)."""


class SkyEmuProtocolError(SkyEmuError):
    """The server answered, but not as SkyEmu's HTTP control server does."""


class SkyEmuNotFoundError(SkyEmuProtocolError):
    """An endpoint answered 404: the server is not SkyEmu, or a build without that endpoint."""


class SkyEmuCommandFailedError(SkyEmuError):
    """SkyEmu replied `failed` (or `Failed ...`) to a command such as `/save` or `/load`."""


class SkyEmuRomMismatchError(SkyEmuError, ValueError):
    """SkyEmu runs no ROM, or a different ROM from the one the env was made for."""


class SkyEmuStateError(CorruptSavestateError):
    """A savestate SkyEmu cannot load (e.g. a stable-retro/mGBA `.state` file)."""
