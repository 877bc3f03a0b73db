"""Errors of the video layer: a video, frame folder, video dataset or IDM that cannot be used.

`ModelFileError` lives in `metabonk_gym.learned.errors` (the model files are read below the video
trainers) and is re-exported here.

>>> issubclass(VideoError, MetabonkError), issubclass(ModelFileError, ValueError)
(True, True)
"""

from __future__ import annotations

from metabonk_gym.errors import MetabonkError
from metabonk_gym.learned.errors import ModelFileError

__all__ = ["ModelFileError", "VideoDatasetError", "VideoError"]


class VideoError(MetabonkError, ValueError):
    """A video or frame folder that is missing, empty, corrupt, too large or not of the game."""


class VideoDatasetError(MetabonkError, ValueError):
    """A video dataset folder (`metabonk video to-dataset`) that is missing or malformed."""
