"""metabonk-gym: GBA games (embedded mGBA core or SkyEmu) and Megabonk (BonkLink) as Gymnasium envs.

Importing the package registers the envs under the `MetaBonk/` namespace:

>>> import gymnasium as gym, metabonk_gym
>>> sorted(i for i in gym.registry if i.startswith("MetaBonk/"))  # doctest: +NORMALIZE_WHITESPACE
['MetaBonk/BonkArena-v0', 'MetaBonk/BonkQuest-v0', 'MetaBonk/GBA-v0', 'MetaBonk/HatWizard-v0',
 'MetaBonk/Megabonk-v0', 'MetaBonk/MeteoRain-v0', 'MetaBonk/uCity-v0']

Without the import, `gym.make("metabonk_gym:MetaBonk/BonkQuest-v0")` imports it first (this is
how Ray RLlib's env runners, which do not share the driver's imports, find the envs).
"""

from __future__ import annotations

from metabonk_gym.registration import ENV_IDS, register_envs
from metabonk_gym.vector import make_vec

__version__ = "0.2.0"
__all__ = ["ENV_IDS", "__version__", "make_vec", "register_envs"]

register_envs()
