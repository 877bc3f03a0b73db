"""Wrappers register themselves for training configs: a class decorated with `@config_wrapper()`
may be named in a config's `wrappers:` list by its snake_case class name (`TileTokens` is
`tile_tokens`), so the list of configurable wrappers is the wrappers themselves, never a second
list kept by hand. `metabonk_gym.training.wrapstack.WRAPPERS` is built from `CONFIG_WRAPPERS`.

>>> import gymnasium as gym
>>> @config_wrapper(dict_obs=False)
... class ScreenCrop(gym.ObservationWrapper):
...     def __init__(self, env: gym.Env, top: int = 0, bottom: int = 160) -> None:
...         super().__init__(env)
>>> entry = CONFIG_WRAPPERS.pop("screen_crop")
>>> entry.cls.__name__, entry.dict_obs, entry.pixels_only, entry.options()
('ScreenCrop', False, False, ['top', 'bottom'])
>>> snake_case("PauseToThink")
'pause_to_think'
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import gymnasium as gym

C = TypeVar("C", bound=type)


@dataclass(frozen=True)
class WrapperEntry:
    """A wrapper a config may name.

    Args:
        cls: the wrapper class (its constructor's keyword arguments are the options).
        dict_obs: it turns the observation into a Dict (the policy becomes `MultiInputPolicy`).
        pixels_only: its observation is computed from the frame alone (no RAM, no VRAM), so a
            policy trained "from pixels" (`metabonk robustify`) may use it.
    """

    cls: type[gym.Wrapper]
    dict_obs: bool = True
    pixels_only: bool = False

    def options(self) -> list[str]:
        """The options it takes: its constructor's named arguments but `env`, or the names of
        its keyword form where it has one (`PauseToThink.keyword_options`)."""
        keyword_options = getattr(self.cls, "keyword_options", None)
        if keyword_options is not None:
            return list(keyword_options())
        params = inspect.signature(self.cls.__init__).parameters.values()
        return [
            p.name
            for p in params
            if p.name not in ("self", "env") and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]


#: Every wrapper that registered itself, by its snake_case class name, in import order.
CONFIG_WRAPPERS: dict[str, WrapperEntry] = {}


def snake_case(name: str) -> str:
    """A CamelCase class name in snake_case (`RamFeatures` -> `ram_features`)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def config_wrapper(*, dict_obs: bool = True, pixels_only: bool = False) -> Callable[[C], C]:
    """A class decorator: register the wrapper in `CONFIG_WRAPPERS` under its snake_case name
    (`dict_obs`: it turns the observation into a Dict; `pixels_only`: it reads nothing but the
    frame). Two classes may not share a name."""

    def register(cls: C) -> C:
        name = snake_case(cls.__name__)
        known = CONFIG_WRAPPERS.get(name)
        if known is not None and known.cls.__qualname__ != cls.__qualname__:
            raise ValueError(f"two wrappers named {name!r}: {known.cls} and {cls}")
        CONFIG_WRAPPERS[name] = WrapperEntry(cls, dict_obs=dict_obs, pixels_only=pixels_only)
        return cls

    return register
