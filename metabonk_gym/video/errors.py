"""The video errors' old import path: `VideoError` and `VideoDatasetError` live in
`metabonk_gym.training.errors` (the training layer's one errors module), `ModelFileError` in
`metabonk_gym.errors`; both are re-exported here so existing imports keep working.

>>> from metabonk_gym.errors import MetabonkError
>>> issubclass(VideoError, MetabonkError), issubclass(ModelFileError, ValueError)
(True, True)
"""

from __future__ import annotations

from metabonk_gym.training.errors import ModelFileError, VideoDatasetError, VideoError

__all__ = ["ModelFileError", "VideoDatasetError", "VideoError"]
