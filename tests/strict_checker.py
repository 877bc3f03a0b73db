"""gymnasium's env checker with its warnings as failures.

`gymnasium.utils.env_checker.check_env` reports most problems (observations outside their
space, wrong dtypes, a reset that ignores its seed, ...) as `UserWarning`s, so a test that only
calls it passes whatever it finds. `check_env_strict` turns every warning it raises into an
error, except those named in `allowed` (a regex each, with the reason at the call site).

>>> import gymnasium as gym
>>> check_env_strict(gym.make("CartPole-v1").unwrapped)  # its unbounded observations
Traceback (most recent call last):
...
AssertionError: gymnasium's env checker warned: ...
>>> check_env_strict(gym.make("CartPole-v1").unwrapped, allowed=("infinity",))
"""

from __future__ import annotations

import re
import warnings
from typing import Any

from gymnasium.utils.env_checker import check_env


def check_env_strict(env: Any, *, allowed: tuple[str, ...] = (), **kwargs: Any) -> None:
    """`check_env(env, **kwargs)`, failing on any warning it raises but those matching `allowed`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, **kwargs)
    problems = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not any(re.search(pattern, str(w.message)) for pattern in allowed)
        and not issubclass(w.category, DeprecationWarning | PendingDeprecationWarning)
    ]
    assert not problems, "gymnasium's env checker warned: " + "; ".join(problems)
