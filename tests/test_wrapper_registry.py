"""Wrappers register themselves (`metabonk_gym.wrappers.registry.config_wrapper`) and the training
config's registry, `metabonk_gym.training.wrapstack.WRAPPERS`, is built from them: every wrapper
the package exports can be named in a config, under its snake_case class name."""

from __future__ import annotations

import gymnasium as gym
import metabonk_gym.wrappers as wrappers
import pytest
from metabonk_gym.wrappers.registry import config_wrapper, snake_case

from metabonk_gym.training.wrapstack import WRAPPERS


def test_every_exported_wrapper_is_configurable() -> None:
    exported = [getattr(wrappers, name) for name in wrappers.__all__]
    classes = [c for c in exported if isinstance(c, type) and issubclass(c, gym.Wrapper)]
    assert len(classes) >= 8
    for cls in classes:
        assert WRAPPERS[snake_case(cls.__name__)].cls is cls
    assert {name for name, entry in WRAPPERS.items() if not entry.dict_obs} == {
        "memory",
        "pixel_cells",
        "ram_features",
    }


def test_two_wrappers_may_not_share_a_name() -> None:
    class TileTokens(gym.ObservationWrapper):  # another class, the same config name
        pass

    with pytest.raises(ValueError, match="two wrappers named 'tile_tokens'"):
        config_wrapper()(TileTokens)
