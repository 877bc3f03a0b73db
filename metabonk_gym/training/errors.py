"""Errors of the training layer (training, video, world models, RLlib), its one errors module:
each names the problem and the fix. Bad input is refused before anything of a run directory or
dataset is touched; `TrainingFailed` is a fault outside the model in the middle of a run. The
modules that raise them also export them (`metabonk_gym.training.rllib.RayError`).

>>> issubclass(ConfigError, MetabonkError), issubclass(RayError, ConfigError)
(True, True)
"""

from __future__ import annotations

from metabonk_gym.errors import CheckpointError as CheckpointError  # home: with metabonk_gym.rundir
from metabonk_gym.errors import MetabonkError
from metabonk_gym.errors import ModelFileError as ModelFileError  # re-exported for video
from metabonk_gym.errors import RunDirError as RunDirError  # home: with metabonk_gym.rundir
from metabonk_gym.errors import UntrustedGameCodeError as UntrustedGameCodeError  # its home moved


class ConfigError(MetabonkError, ValueError):
    """A training config (file, flags or plan) with an unknown key or a bad value."""


class DatasetError(MetabonkError, ValueError):
    """A Minari dataset that is missing, corrupt or does not fit the env."""


class GameUnreachableError(MetabonkError, ConnectionError):
    """No game (Megabonk with the BonkLink plugin, or `metabonk bonklink-sim`) answers where a
    training or evaluation env must connect."""


class VideoError(MetabonkError, ValueError):
    """A video or frame folder that is missing, empty, corrupt, too large or not of the game."""


class VideoDatasetError(MetabonkError, ValueError):
    """A video dataset folder (`metabonk video to-dataset`) that is missing or malformed."""


class TrainingFailed(MetabonkError, RuntimeError):
    """Training stopped by a fault outside the model (an env worker or the game gone, a full
    disk); the message names the cause, the checkpoint to continue from and `--resume`.
    The CLI exits with `exit_code` (1: the input was fine, the run's surroundings failed)."""

    exit_code = 1


class RayError(ConfigError):
    """Ray could not run the job: an unreachable cluster, runners that cannot build the env."""


class SharedRunError(RunDirError):
    """A run directory or model zip sets an option a shared run may not set."""


class WorldModelError(MetabonkError, ValueError):
    """A world-model file that is missing, corrupt, or made for another env."""


class ArchiveError(MetabonkError, ValueError):
    """An archive file that is corrupt, not an archive, or made on another ROM or cells."""
