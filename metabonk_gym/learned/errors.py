"""The error of a learned model's files: an IDM or reward model that cannot be used.

Raised before any weights are loaded where the metadata already tells (sizes, kind, game).

>>> from metabonk_gym.errors import MetabonkError
>>> issubclass(ModelFileError, MetabonkError), issubclass(ModelFileError, ValueError)
(True, True)
"""

from __future__ import annotations

from metabonk_gym.errors import MetabonkError


class ModelFileError(MetabonkError, ValueError):
    """An IDM or reward model that is missing, malformed, or made for another game or env."""
