"""Errors raised by metabonk-gym on purpose: each names the problem and how to fix it.

Each is a `MetabonkError` and also the builtin it refines (`KeyError`, `ValueError`, ...), so one
`except MetabonkError` catches all of ours while code that knows only the builtins still works.

>>> from metabonk_gym.gba.integration import Integration
>>> try:
...     Integration.bundled("BonkQuest").resolve_state("room9")
... except MetabonkError as exc:
...     print(type(exc).__name__, isinstance(exc, KeyError), exc)
UnknownStateError True unknown state 'room9' for BonkQuest; valid states: ...room1, ... start. ...
"""

from __future__ import annotations


class MetabonkError(Exception):
    """Base class of every error this package raises on purpose."""


class RomNotFoundError(MetabonkError, FileNotFoundError):
    """The ROM file does not exist."""


class RomHashMismatchError(MetabonkError, ValueError):
    """The ROM's SHA-1 differs from the one its integration was made for (`rom.sha`)."""


class IntegrationError(MetabonkError, ValueError):
    """An integration folder is missing a file or holds malformed JSON."""


class UntrustedGameCodeError(MetabonkError, ValueError):
    """A shared file (a run directory, model or decision log) names a game folder whose `game.py`
    (code) the user did not name or trust (`--trust-game-folder`)."""


class UnknownStateError(MetabonkError, KeyError):
    """No savestate or named start has this name."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class CorruptSavestateError(MetabonkError, ValueError):
    """A savestate file cannot be decoded or does not fit this core."""


class UnknownVariableError(MetabonkError, KeyError):
    """A RAM variable name that the integration's data.json does not define."""

    def __str__(self) -> str:
        return str(self.args[0])


class InvalidActionError(MetabonkError, ValueError):
    """An action outside the env's action space."""


class RewardSpecError(MetabonkError, ValueError):
    """A reward specification (preset name, dict or file) that cannot be built."""


class EnvWorkerError(MetabonkError, RuntimeError):
    """A vector env's worker process died, hung past its deadline or raised; the message names
    the env index and what happened. The vector env is closed and must be rebuilt."""


class UntrustedFileError(MetabonkError, ValueError):
    """A file (model, state, dataset) that could run code or exhaust memory when loaded, refused
    unless the user says they trust it (`--trust-model` / `trust=True`)."""


class MissingFolderError(MetabonkError, FileNotFoundError):
    """A file would be written into a folder that does not exist (never created on the fly: a
    typo in a path should not make folders)."""


class EnvClosedError(MetabonkError, RuntimeError):
    """An env was used after `close()`: make a new one."""


class RomLoadError(MetabonkError, ValueError):
    """The emulator could not load the ROM file (not a GBA ROM, or damaged)."""


class BadNumberError(MetabonkError, ValueError):
    """A number (a flag, a value in a file) of the wrong kind or outside its range: NaN,
    infinity, a negative count, a fraction above 1."""


class EnvArgumentError(MetabonkError, ValueError):
    """An env keyword argument of the wrong kind (`frameskip="banana"`, `obs_type="purple"`):
    raised by the env contract's checks when an env is made."""


class WeightsFileError(MetabonkError, ValueError):
    """A weights file (a predictor net, a distilled policy) that is corrupt, of another model,
    or holds more than tensors and plain numbers (never unpickled)."""


class ModelFileError(MetabonkError, ValueError):
    """An IDM or reward model that is missing, malformed, or made for another game or env
    (raised before any weights are loaded where the metadata already tells)."""


class IntegrateError(MetabonkError, ValueError):
    """Bad input to `metabonk integrate` / `metabonk ram` (a ROM, an address, a filter, a session)."""


class RunDirError(MetabonkError, ValueError):
    """A run directory that cannot be used as asked (exists without --resume, missing, ...)."""


class CheckpointError(MetabonkError, ValueError):
    """A missing, corrupt or incompatible model checkpoint."""
