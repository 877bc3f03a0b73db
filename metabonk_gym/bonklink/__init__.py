"""Megabonk through the BonkLink v1 plugin protocol: codec, env, and a reference game server.

Importing this package is cheap; the env, the server and the vector helper load on use.

* :mod:`.codec` - every message of the protocol, byte for byte;
* :mod:`.env` - ``MegabonkEnv`` (registered as ``MetaBonk/Megabonk-v0``);
* :mod:`.sim` - ``BonkLinkSim``, the ``bonklink-sim`` stand-in game server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gymnasium.vector import AsyncVectorEnv

__all__ = ["ENTRY_POINT", "ENV_ID", "REGISTRATION", "make_vec"]

ENV_ID = "MetaBonk/Megabonk-v0"
ENTRY_POINT = "metabonk_gym.bonklink.env:MegabonkEnv"
#: Keyword arguments for ``gymnasium.register``: a live game is nondeterministic, which tells
#: gymnasium's env checker not to expect a seeded reset to reproduce observations.
REGISTRATION: dict[str, Any] = {
    "id": ENV_ID,
    "entry_point": ENTRY_POINT,
    "nondeterministic": True,
}


def make_vec(
    n: int,
    base_port: int = 5560,
    *,
    vector_kwargs: dict[str, Any] | None = None,
    **env_kwargs: Any,
) -> AsyncVectorEnv:
    """``n`` Megabonk envs in an ``AsyncVectorEnv``, env ``i`` talking to ``base_port + i``.

    Each env runs in its own process (``spawn`` by default: forking a process that holds
    threads or torch is unsafe); ``vector_kwargs`` go to ``AsyncVectorEnv``, ``env_kwargs``
    to every :class:`~metabonk_gym.bonklink.env.MegabonkEnv`.
    """
    from functools import partial

    from gymnasium.vector import AsyncVectorEnv

    from metabonk_gym.bonklink.env import MegabonkEnv

    if n < 1:
        raise ValueError("n must be at least 1")
    if "port" in env_kwargs:
        raise TypeError("make_vec takes base_port; env i uses base_port + i")
    fns = [partial(MegabonkEnv, port=base_port + i, **env_kwargs) for i in range(n)]
    options: dict[str, Any] = {"context": "spawn"}
    options.update(vector_kwargs or {})
    return AsyncVectorEnv(fns, **options)
