"""Env ids of the suite, and the facts training needs about each as data (`EnvTraits`).

Entry points are strings, so specs serialise to JSON (Minari needs it). Code that must treat envs
differently (vector engine, ports, start states) asks `env_traits(env_id)`, never the id itself.

>>> env_traits("MetaBonk/BonkQuest-v0").game
'BonkQuest'
>>> t = env_traits("metabonk_gym:MetaBonk/Megabonk-v0")
>>> t.port_per_env, t.default_base_port, t.one_per_process, t.deterministic
(True, 5560, False, False)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gymnasium.envs.registration import register, registry

from metabonk_gym.bonklink import DEFAULT_PORT
from metabonk_gym.errors import UnknownEnvError as UnknownEnvError  # re-exported

GBA_ENTRY_POINT = "metabonk_gym.gba.env:GBAEnv"
MEGABONK_ENTRY_POINT = "metabonk_gym.bonklink.env:MegabonkEnv"


@dataclass(frozen=True)
class EnvTraits:
    """What training and tools need to know about an env, declared with its registration.

    Args:
        game: the bundled game folder's name (`metabonk_gym/games/<game>/`), None for an env
            whose game comes from its `integration=` folder (`MetaBonk/GBA-v0`).
        one_per_process: the env runs an emulator that stable-retro allows once per process
            (the embedded mGBA core): further copies in one process run on private copies of
            stable-retro (`metabonk_gym.gba.backends.core_copies`), and tools without them (RLlib's
            vectorisation) give each copy its own process; False: copies share a process freely
            (TCP clients such as Megabonk's).
        port_per_env: copy `i` of a vector env talks to a game on port `base_port + i`
            (the env takes `port=`); `make_vec` sets it from `base_port`.
        default_base_port: the first port when `port_per_env` and no `base_port` is given.
        deterministic: the same seed and actions give the same trajectory (emulators: yes;
            a live game: no).
        start_states: `reset(options={"state": ..., "game_seed": ...})` picks the start and the
            game's seed (so `state=`, `game_seeds` and curricula of start states apply).
        ram_variables: `env.unwrapped.read_variable(name)` reads any game variable, not only
            those in `info` (goals and shaping may name them).
        sticky_actions: the env takes `sticky_action_prob=`.
        can_win: the game can be won (`info["won"]` may become true), so win rates mean
            something; a survivor run (Megabonk) only ends.
        tick_hz: the game's own ticks per second when one env step is `frameskip` of them
            (video step rate = tick_hz / frameskip); None: the env's `render_fps` is its tick rate.
        human_input: "snapshot": the game reports the input of the person playing it in
            `info["human_action"]` and the env takes `send_actions=False` to only watch, so
            `record --agent human` records the person at the game (no window of ours).
        action_parts: for a Box action space, its parts as (name, kind, indices): kind
            "stick" (a 2-d direction), "button" (pressed when > 0) or "point" (a 2-d position);
            IDMs and their figures read it. Empty: Discrete actions.
    """

    game: str | None = None
    one_per_process: bool = False
    port_per_env: bool = False
    default_base_port: int | None = None
    deterministic: bool = True
    start_states: bool = False
    ram_variables: bool = False
    sticky_actions: bool = False
    can_win: bool = True
    tick_hz: float | None = None
    human_input: str | None = None
    action_parts: tuple[tuple[str, str, tuple[int, ...]], ...] = ()


GBA_TRAITS = EnvTraits(
    one_per_process=True,
    deterministic=True,
    start_states=True,
    ram_variables=True,
    sticky_actions=True,
)
MEGABONK_TRAITS = EnvTraits(
    game="Megabonk",
    one_per_process=False,
    port_per_env=True,
    default_base_port=DEFAULT_PORT,
    deterministic=False,
    can_win=False,
    tick_hz=60.0,
    human_input="snapshot",
    action_parts=(
        ("move", "stick", (0, 1)),
        ("aim", "stick", (2, 3)),
        ("fire", "button", (4,)),
        ("ability", "button", (5,)),
        ("interact", "button", (6,)),
        ("click", "button", (7,)),
        ("click_pos", "point", (8, 9)),
    ),
)

#: id -> (gymnasium registration kwargs, traits).
ENV_IDS: dict[str, dict[str, Any]] = {
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
    # Public games nobody here wrote (gbadev.org archive; licences in each game folder).
    "MetaBonk/HatWizard-v0": {
        "entry_point": GBA_ENTRY_POINT,
        "kwargs": {"game": "HatWizard"},
        "max_episode_steps": 4500,
    },
    "MetaBonk/MeteoRain-v0": {
        "entry_point": GBA_ENTRY_POINT,
        "kwargs": {"game": "MeteoRain"},
        "max_episode_steps": 4500,
    },
    "MetaBonk/uCity-v0": {
        "entry_point": GBA_ENTRY_POINT,
        "kwargs": {"game": "uCity"},
        "max_episode_steps": 3000,
    },
    # A live game is nondeterministic: the env checker must not expect seeded resets to repeat.
    "MetaBonk/Megabonk-v0": {
        "entry_point": MEGABONK_ENTRY_POINT,
        "nondeterministic": True,
    },
}

TRAITS: dict[str, EnvTraits] = {
    "MetaBonk/BonkQuest-v0": replace(GBA_TRAITS, game="BonkQuest"),
    "MetaBonk/BonkArena-v0": replace(GBA_TRAITS, game="BonkArena"),
    "MetaBonk/GBA-v0": GBA_TRAITS,
    "MetaBonk/HatWizard-v0": replace(GBA_TRAITS, game="HatWizard"),
    "MetaBonk/MeteoRain-v0": replace(GBA_TRAITS, game="MeteoRain", can_win=False),
    "MetaBonk/uCity-v0": replace(GBA_TRAITS, game="uCity", can_win=False),
    "MetaBonk/Megabonk-v0": MEGABONK_TRAITS,
}


def short_id(env_id: str) -> str:
    """`env_id` without a `module:` prefix (`metabonk_gym:MetaBonk/BonkQuest-v0` -> the id).

    >>> short_id("metabonk_gym:MetaBonk/GBA-v0")
    'MetaBonk/GBA-v0'
    """
    return env_id.split(":")[-1]


def env_traits(env_id: str) -> EnvTraits:
    """The traits of a registered env id (a `module:` prefix is accepted).

    Ids registered by others get traits from their gymnasium spec (deterministic unless it says
    otherwise); an id nobody registered raises `UnknownEnvError` listing the suite's ids.
    """
    name = short_id(env_id)
    if name in TRAITS:
        return TRAITS[name]
    if name in registry:
        return EnvTraits(deterministic=not registry[name].nondeterministic)
    raise UnknownEnvError(
        f"unknown env id {env_id!r}; MetaBonk envs: {', '.join(ENV_IDS)} (see `metabonk list`)"
    )


def register_envs() -> None:
    """Register every id once (importing twice is harmless)."""
    for env_id, spec in ENV_IDS.items():
        if env_id not in registry:
            register(id=env_id, **spec)
