"""Errors of the video layer: a video, frame folder, video dataset or IDM that cannot be used.

>>> issubclass(VideoError, MetabonkError), issubclass(ModelFileError, ValueError)
(True, True)
"""

from __future__ import annotations

from metabonk_gym.errors import MetabonkError


class VideoError(MetabonkError, ValueError):
    """A video or frame folder that is missing, empty, corrupt, too large or not of the game."""


class VideoDatasetError(MetabonkError, ValueError):
    """A video dataset folder (`metabonk video to-dataset`) that is missing or malformed."""


class ModelFileError(MetabonkError, ValueError):
    """An IDM or reward model that is missing, malformed, or made for another game or env."""
