"""Megabonk through the BonkLink v1 plugin protocol: codec, env, and a reference game server.

Importing this package is cheap; the env and the server load on use.

* :mod:`.codec` - every message of the protocol, byte for byte;
* :mod:`.env` - ``MegabonkEnv`` (registered as ``MetaBonk/Megabonk-v0``; vector envs through
  ``metabonk_gym.make_vec(ENV_ID, n, base_port=...)``);
* :mod:`.sim` - ``BonkLinkSim``, the ``bonklink-sim`` stand-in game server.

>>> ENV_ID, ENTRY_POINT.split(":")[1]
('MetaBonk/Megabonk-v0', 'MegabonkEnv')
"""

from __future__ import annotations

__all__ = ["DEFAULT_PORT", "ENTRY_POINT", "ENV_ID"]

ENV_ID = "MetaBonk/Megabonk-v0"
ENTRY_POINT = "metabonk_gym.bonklink.env:MegabonkEnv"
#: Where the game's BonkLink plugin listens unless told otherwise (the env, the sim, training:
#: env i of a vector env talks to `DEFAULT_PORT + i`).
DEFAULT_PORT = 5560
