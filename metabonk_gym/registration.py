"""Env ids of the suite. Entry points are strings, so specs serialise to JSON (Minari needs it)."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

GBA_ENTRY_POINT = "metabonk_gym.gba.env:GBAEnv"

ENV_IDS: dict[str, dict] = {
    "MetaBonk/BonkQuest-v0": {
        "entry_point": GBA_ENTRY_POINT,
        "kwargs": {"game": "BonkQuest"},
        "max_episode_steps": 5000,
    },
    "MetaBonk/BonkArena-v0": {
        "entry_point": GBA_ENTRY_POINT,
        "kwargs": {"game": "BonkArena"},
        # 5:00 of play is 4500 steps at frameskip 4, plus level-up menus.
        "max_episode_steps": 6000,
    },
    "MetaBonk/GBA-v0": {"entry_point": GBA_ENTRY_POINT},
    # A live game is nondeterministic: the env checker must not expect seeded resets to repeat.
    "MetaBonk/Megabonk-v0": {
        "entry_point": "metabonk_gym.bonklink.env:MegabonkEnv",
        "nondeterministic": True,
    },
}


def register_envs() -> None:
    """Register every id once (importing twice is harmless)."""
    for env_id, spec in ENV_IDS.items():
        if env_id not in registry:
            register(id=env_id, **spec)
