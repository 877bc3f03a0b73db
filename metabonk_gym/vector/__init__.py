"""Vectorised envs: a shared-memory engine (`VecEngine`), gymnasium's `VectorEnv` API over it
(`SharedMemoryVectorEnv`), and `make_vec`, the one way to run several copies of any env.

>>> from metabonk_gym.vector import make_vec, SharedMemoryVectorEnv
>>> make_vec.__name__
'make_vec'
"""

from metabonk_gym.vector.engine import VecEngine
from metabonk_gym.vector.gym_env import SharedMemoryVectorEnv
from metabonk_gym.vector.make import (
    default_envs_per_worker,
    make_one,
    make_vec,
    per_env_kwargs,
)

__all__ = [
    "SharedMemoryVectorEnv",
    "VecEngine",
    "default_envs_per_worker",
    "make_one",
    "make_vec",
    "per_env_kwargs",
]
