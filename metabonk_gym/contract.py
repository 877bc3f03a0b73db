"""The contract every env of the suite speaks: core options, their checks, and info names.

Every env takes `frameskip`, `obs_type` (`OBS_TYPES`), `downscale`, `reward`, `render_mode`
(and gym.make's `max_episode_steps`), reports `CONTRACT_INFO` and `reward_terms` in `info`,
and puts the screen under `PIXELS` wherever its observation is a Dict.

>>> check_frameskip(4), check_obs_type("state"), check_downscale(2)
(4, 'state', 2)
>>> check_frameskip(0)
Traceback (most recent call last):
...
metabonk_gym.errors.EnvArgumentError: frameskip must be an int >= 1, not 0
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from metabonk_gym.errors import EnvArgumentError

#: Info names on every env (`hp`/`max_hp` None and `won`/`lost` False when a game has none).
CONTRACT_INFO: tuple[str, ...] = ("hp", "max_hp", "won", "lost", "reward_terms")
#: The key of the screen in Dict observations.
PIXELS = "pixels"
#: Downscale factors a GBA screen (160 x 240) divides by.
DOWNSCALES: tuple[int, ...] = (1, 2, 4, 8)
#: Observation types every env takes.
OBS_TYPES: tuple[str, ...] = ("rgb", "grayscale", "state")


def check_obs_type(obs_type: object) -> str:
    """`obs_type` if valid, else an `EnvArgumentError` (a ValueError) naming the valid ones.

    >>> check_obs_type("rgb")
    'rgb'
    """
    if obs_type not in OBS_TYPES:
        raise EnvArgumentError(f"obs_type must be 'rgb', 'grayscale' or 'state', not {obs_type!r}")
    return str(obs_type)


def check_downscale(downscale: object, allowed: tuple[int, ...] | None = DOWNSCALES) -> int:
    """`downscale` as an int if valid (a positive int, one of `allowed` unless None).

    >>> check_downscale(4)
    4
    """
    if isinstance(downscale, bool) or not isinstance(downscale, (int, np.integer)):
        raise EnvArgumentError(f"downscale must be an int, not {downscale!r}")
    k = int(downscale)
    if allowed is not None and k not in allowed:
        raise EnvArgumentError(
            f"downscale must be {', '.join(map(str, allowed[:-1]))} or {allowed[-1]}, not {k}"
        )
    if k < 1:
        raise EnvArgumentError(f"downscale must be >= 1, not {k}")
    return k


def check_frameskip(frameskip: object) -> int:
    """`frameskip` as an int if it is one >= 1, else an `EnvArgumentError` saying so."""
    if isinstance(frameskip, bool) or not isinstance(frameskip, (int, np.integer)) or frameskip < 1:
        raise EnvArgumentError(f"frameskip must be an int >= 1, not {frameskip!r}")
    return int(frameskip)


# --------------------------------------------------------------------------- capabilities
# What some envs offer beyond the contract. Generic code (wrappers, think, benchmarks) asks
# `isinstance(env.unwrapped, HasRam)` instead of naming an env class, so any env that offers a
# capability gets the features built on it.


@runtime_checkable
class HasRam(Protocol):
    """An env whose RAM reads by name: `variables()` (every variable of its integration),
    `read_array(name)` (a typed RAM array) and the `integration` that names them (its `arrays`,
    and `tiles()`, the semantic tile classes).

    >>> import gymnasium as gym, metabonk_gym
    >>> env = gym.make("MetaBonk/BonkQuest-v0")
    >>> isinstance(env.unwrapped, HasRam), isinstance(env.unwrapped, HasVram)
    (True, True)
    >>> env.close()
    """

    integration: Any

    def variables(self) -> dict[str, int]: ...

    def read_array(self, name: str) -> np.ndarray: ...


@runtime_checkable
class HasVram(Protocol):
    """An env whose display memory (VRAM, OAM, palette, I/O registers) reads through
    `memory.regions(...)` (the GBA's bus), so screens decode into tiles and sprites."""

    memory: Any


@runtime_checkable
class HasButtons(Protocol):
    """An env whose actions are button combinations: `action_masks[i]` is the bitmask of the
    buttons action `i` presses (empty for a MultiBinary action space)."""

    action_masks: list[int]
