"""Helpers shared by the Dict-observation wrappers: stack them without nesting Dicts.

A wrapper over a plain Box env makes `{"pixels": obs, <its keys>}`; over another of these
wrappers it adds its keys to the existing Dict, so `ButtonHistory(TileTokens(env))` has
`pixels`, `tiles`, ... and `buttons` side by side.

>>> from gymnasium import spaces
>>> import numpy as np
>>> s = extend_space(spaces.Box(0, 255, (2, 2, 3), np.uint8), "pixels", {"n": spaces.Discrete(3)})
>>> list(s.spaces)  # gymnasium sorts the keys
['n', 'pixels']
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces


def extend_space(
    base: spaces.Space, pixels_key: str, extra: dict[str, spaces.Space]
) -> spaces.Dict:
    """`base` (Box or Dict) plus the `extra` keys, as one flat Dict space."""
    merged = dict(base.spaces) if isinstance(base, spaces.Dict) else {pixels_key: base}
    clash = set(merged) & set(extra)
    if clash:
        raise ValueError(
            f"observation keys {sorted(clash)} are already in the env's Dict observation; "
            "pass a different key= to the wrapper"
        )
    merged.update(extra)
    return spaces.Dict(merged)


def as_dict(obs: Any, pixels_key: str) -> dict[str, Any]:
    """A shallow copy of a Dict observation, or `{pixels_key: obs}`."""
    return dict(obs) if isinstance(obs, dict) else {pixels_key: obs}


def pixels(obs: Any, pixels_key: str) -> np.ndarray:
    """The frame inside an observation (Box or Dict)."""
    if isinstance(obs, dict):
        if pixels_key not in obs:
            raise KeyError(
                f"observation has no {pixels_key!r} key (keys: {', '.join(obs)}); pass pixels_key="
            )
        return obs[pixels_key]
    return obs


def pixels_space(space: spaces.Space, pixels_key: str) -> spaces.Box:
    """The frame's Box inside an observation space (Box or Dict)."""
    if isinstance(space, spaces.Dict):
        if pixels_key not in space.spaces:
            raise KeyError(f"observation space has no {pixels_key!r} key; pass pixels_key=")
        space = space.spaces[pixels_key]
    if not isinstance(space, spaces.Box):
        raise TypeError(f"expected an image Box observation, got {space}")
    return space
