"""`RamFeatures`: named RAM values appended to a state-vector observation, one-hot encoded.

Why: an integration's `state_vector` (metabonk.json) is shared by every run of the game, so a
run that needs one more fact (BonkArena's level-up menu: which three upgrades it offers) adds it
here, in its own config's `wrappers:` list, instead of changing the vector for everyone. Each
named RAM array or variable (the env's `read_array` / `read_variable`, as the integration
declares them) becomes `one_hot` floats per element: 1.0 at the element's value, zeros for a
value outside `0..one_hot-1`.

>>> import gymnasium as gym
>>> env = gym.make("MetaBonk/BonkArena-v0", obs_type="state")
>>> wrapped = RamFeatures(env, one_hot={"menu_options": 8, "menu_cursor": 3})
>>> wrapped.observation_space.shape
(72,)
>>> obs, _ = wrapped.reset(seed=0)
>>> obs.shape, float(obs[45:].sum()) <= 4.0
((72,), True)
>>> wrapped.close()
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from metabonk_gym.wrappers.registry import config_wrapper


@config_wrapper(dict_obs=False)
class RamFeatures(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """Appends one-hot encodings of RAM arrays or variables to a 1-D float observation.

    Args:
        env: an env with a 1-D `Box` observation (a GBA env's `obs_type="state"`) whose
            unwrapped env reads RAM (`read_array`, `read_variable`).
        one_hot: RAM name -> number of classes; an array gives that many floats per element,
            a variable that many floats.
    """

    def __init__(self, env: gym.Env, one_hot: Mapping[str, int] | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, one_hot=one_hot)
        gym.ObservationWrapper.__init__(self, env)
        space = env.observation_space
        if not isinstance(space, spaces.Box) or len(space.shape) != 1:
            raise ValueError(
                f"RamFeatures needs a 1-D Box observation (obs_type: state), not {space}"
            )
        base: Any = env.unwrapped
        if not (hasattr(base, "read_array") and hasattr(base, "read_variable")):
            raise ValueError("RamFeatures needs an env that reads RAM (a GBA env)")
        self.base = base
        self.one_hot = {str(k): int(v) for k, v in (one_hot or {}).items()}
        self._arrays: dict[str, bool | None] = {}
        self.widths: dict[str, int] = {}
        for name, classes in self.one_hot.items():
            if classes < 1:
                raise ValueError(f"one_hot[{name!r}] must be >= 1, not {classes}")
            self.widths[name] = len(self._values(name)) * classes
        extra = sum(self.widths.values())
        low = np.concatenate([space.low, np.zeros(extra, np.float32)]).astype(np.float32)
        high = np.concatenate([space.high, np.ones(extra, np.float32)]).astype(np.float32)
        self.observation_space = spaces.Box(low, high, dtype=np.float32)

    def _values(self, name: str) -> np.ndarray:
        """The RAM name's current value(s) as a 1-D int array (`ValueError` for an unknown name)."""
        if self._arrays.get(name) is None:
            try:
                self.base.read_array(name)
                self._arrays[name] = True
            except (KeyError, ValueError):
                try:
                    self.base.read_variable(name)
                except (KeyError, ValueError) as err:
                    raise ValueError(
                        f"RamFeatures: {name!r} is neither a RAM array nor a variable of this "
                        "integration"
                    ) from err
                self._arrays[name] = False
        if self._arrays[name]:
            return np.asarray(self.base.read_array(name)).astype(np.int64).ravel()
        return np.array([int(self.base.read_variable(name))], np.int64)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        parts = [np.asarray(observation, np.float32)]
        for name, classes in self.one_hot.items():
            values = self._values(name)
            block = np.zeros((len(values), classes), np.float32)
            inside = (values >= 0) & (values < classes)
            block[np.flatnonzero(inside), values[inside]] = 1.0
            parts.append(block.ravel())
        return np.concatenate(parts)
