"""Errors of the training layer (training, video, world models): each names the problem and the fix, and is raised before anything
of a run directory or dataset is touched.

>>> issubclass(ConfigError, MetabonkError)
True
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
