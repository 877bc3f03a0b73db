"""The docstring examples of the wrapper modules run (each in this process, envs closed)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "metabonk_gym.wrappers",
    "metabonk_gym.wrappers._dict_obs",
    "metabonk_gym.wrappers.button_history",
    "metabonk_gym.wrappers.frame_metrics",
    "metabonk_gym.wrappers.grid_overlay",
    "metabonk_gym.wrappers.pixel_tokens",
    "metabonk_gym.wrappers.predictor_net",
    "metabonk_gym.wrappers.predictors",
    "metabonk_gym.wrappers.screen",
    "metabonk_gym.wrappers.semantic",
    "metabonk_gym.wrappers.temporal_strip",
    "metabonk_gym.wrappers.text_map",
    "metabonk_gym.wrappers.tile_tokens",
    "metabonk_gym.wrappers.vram",
    "metabonk_gym.training.predictor",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
