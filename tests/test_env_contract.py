"""Every env speaks one contract: the same core options, info names and observation keys.

Each test runs on every kind of env the suite has, all real: a GBA game on the embedded mGBA
core, the same game on SkyEmu's HTTP protocol (the peer server of `metabonk_gym.skyemu`, in a
child process), and Megabonk over BonkLink against the `bonklink-sim` game (real TCP).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from metabonk_gym.wrappers import ButtonHistory
from strict_checker import check_env_strict

import metabonk_gym
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.contract import CONTRACT_INFO, PIXELS
from metabonk_gym.errors import MetabonkError
from metabonk_gym.gamedata import GameData
from metabonk_gym.gba.backends import EmulatorBackend, RetroCore, SkyEmuBackend
from metabonk_gym.gba.integration import Integration
from metabonk_gym.gba.skyemu_peer import PeerProcess
from metabonk_gym.registration import ENV_IDS, EnvTraits, UnknownEnvError, env_traits
from metabonk_gym.utils import find_wrapper

ARENA = "MetaBonk/BonkArena-v0"
MEGABONK = "MetaBonk/Megabonk-v0"
KINDS = ["gba-embedded", "gba-skyemu", "megabonk"]


@pytest.fixture(scope="module")
def arena_peer() -> Iterator[PeerProcess]:
    with PeerProcess(Integration.bundled("BonkArena").rom_path) as peer:
        yield peer


@pytest.fixture(scope="module")
def sim() -> Iterator[BonkLinkSim]:
    with BonkLinkSim(port=0, mode="lockstep", seed=2) as server:
        yield server


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """(env id, the kwargs that point it at its game) for each kind of env."""
    if request.param == "gba-embedded":
        return ARENA, {}
    if request.param == "gba-skyemu":
        return ARENA, {"backend": "skyemu", "skyemu_url": request.getfixturevalue("arena_peer").url}
    server = request.getfixturevalue("sim")
    return MEGABONK, {"port": server.port, "connect_timeout": 5.0, "reset_timeout": 20.0}


def check_info(info: dict[str, Any]) -> None:
    missing = [key for key in CONTRACT_INFO if key not in info]
    assert not missing, f"info lacks {missing}"
    assert isinstance(info["reward_terms"], dict)
    assert not {"health", "max_health"} & set(info), "hp/max_hp are the names"


def check_layout(obs: Any, space: gym.Space, obs_type: str) -> None:
    assert space.contains(obs)
    if obs_type == "state":
        assert isinstance(space, gym.spaces.Box) and space.dtype == np.float32
        assert len(space.shape) == 1
        return
    pixels = obs[PIXELS] if isinstance(obs, dict) else obs
    if isinstance(obs, dict):
        assert not {"frame", "image"} & set(obs), "the screen is 'pixels' in Dict observations"
    assert pixels.dtype == np.uint8 and pixels.ndim == 3
    assert pixels.shape[-1] == (3 if obs_type == "rgb" else 1)


@pytest.mark.parametrize("obs_type", ["rgb", "grayscale", "state"])
def test_same_core_options_and_info_names(kind: tuple[str, dict], obs_type: str) -> None:
    env_id, where = kind
    env = gym.make(
        env_id,
        **where,
        frameskip=2,
        obs_type=obs_type,
        downscale=2,
        reward="sparse",
        max_episode_steps=3,
        render_mode="rgb_array",
    )
    try:
        base = env.unwrapped
        assert (base.frameskip, base.obs_type, base.downscale) == (2, obs_type, 2)
        obs, info = env.reset(seed=0)
        check_layout(obs, env.observation_space, obs_type)
        check_info(info)
        assert info["reward_terms"] == {} and not info["won"] and not info["lost"]
        for step in range(3):  # noqa: B007 (checked after the loop)
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            check_layout(obs, env.observation_space, obs_type)
            check_info(info)
            assert set(info["reward_terms"]) == {"won", "lost"}  # the generic "sparse" preset
            assert reward == sum(info["reward_terms"].values())
            if terminated:
                break
        assert terminated or (truncated and step == 2)  # gym.make's max_episode_steps
        frame = env.render()
        assert isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[2] == 3
        assert isinstance(base.game_data, GameData) and base.game_data.presets()
        assert base.info_names and set(base.info_names) <= set(base.variable_names)
    finally:
        env.close()


def test_frameskip_counts_game_time(kind: tuple[str, dict]) -> None:
    """One step of frameskip k advances the game k frames (ticks) on every env."""
    env_id, where = kind
    clock = "time_frames" if env_id == ARENA else "game_time"
    per_frame = 1 if env_id == ARENA else 1 / 60
    advanced = []
    for skip in (1, 3):
        env = gym.make(env_id, **where, frameskip=skip, obs_type="state")
        try:
            _, info = env.reset(seed=1)
            _, _, _, _, after = env.step(env.action_space.sample() * 0)
            advanced.append(round((after[clock] - info[clock]) / per_frame))
        finally:
            env.close()
    assert advanced == [1, 3]


def test_dict_observations_put_the_screen_under_pixels(kind: tuple[str, dict]) -> None:
    env_id, where = kind
    env = gym.make(env_id, **where, obs_type="rgb")
    wrapped = not isinstance(env.observation_space, gym.spaces.Dict)
    if wrapped:
        env = ButtonHistory(env, n=2)  # a wrapper that turns a screen into a Dict
    try:
        obs, _ = env.reset(seed=0)
        assert PIXELS in obs and not {"frame", "image"} & set(obs)
        found = find_wrapper(env, ButtonHistory)
        assert (found is env) if wrapped else (found is None)
        assert find_wrapper(env, type(env.unwrapped)) is env.unwrapped
    finally:
        env.close()


BAD = [
    ({"frameskip": 0}, "frameskip must be an int >= 1"),
    ({"frameskip": 1.5}, "frameskip must be an int >= 1"),
    ({"obs_type": "rbg"}, "obs_type must be 'rgb', 'grayscale' or 'state'"),
    ({"downscale": 0}, "downscale must be"),
    ({"downscale": "2"}, "downscale must be an int"),
    ({"reward": "no-such-preset"}, "unknown reward 'no-such-preset'"),
    ({"render_mode": "ansi"}, "render_mode must be"),
]


@pytest.mark.parametrize(
    ("bad", "message"),
    BAD,
    ids=[next(iter(b)) + "=" + repr(next(iter(b.values()))) for b, _ in BAD],
)
def test_bad_values_give_the_same_clear_errors(
    kind: tuple[str, dict], bad: dict, message: str
) -> None:
    env_id, where = kind
    with pytest.raises((ValueError, MetabonkError), match=message):
        gym.make(env_id, **where, **bad).close()


def test_user_integration_reports_the_contract_names(tmp_path: Path) -> None:
    """A game whose RAM map has no hp or won: the names are there all the same (None, False)."""
    src = Integration.bundled("BonkArena").folder
    folder = tmp_path / "Plain"
    folder.mkdir()
    data = json.loads((src / "data.json").read_text())
    for name in ("hp", "max_hp", "won", "lost"):
        del data["info"][name]
    (folder / "data.json").write_text(json.dumps(data))
    env = gym.make("MetaBonk/GBA-v0", integration=folder, rom=src / "rom.gba", check_hash=False)
    try:
        _, info = env.reset(seed=0)
        assert (info["hp"], info["max_hp"], info["won"], info["lost"]) == (None, None, False, False)
        _, _, _, _, info = env.step(0)
        check_info(info)
    finally:
        env.close()


def test_obs_type_state_without_a_declared_vector_says_how_to_fix() -> None:
    with pytest.raises(MetabonkError, match="declares no state_vector.*use 'rgb' or 'grayscale'"):
        gym.make("MetaBonk/BonkQuest-v0", obs_type="state")


# ------------------------------------------------------------------ registration and backends


def test_traits_are_data_on_every_registration() -> None:
    assert set(ENV_IDS) <= set(metabonk_gym.ENV_IDS)
    for env_id in ENV_IDS:
        traits = env_traits(env_id)
        assert isinstance(traits, EnvTraits)
        assert env_traits(f"metabonk_gym:{env_id}") == traits  # the module prefix is accepted
        spec = gym.spec(env_id)
        assert traits.deterministic == (not spec.nondeterministic)
        if traits.port_per_env:
            assert traits.default_base_port is not None and not traits.one_per_process
    assert env_traits("MetaBonk/Megabonk-v0").game == "Megabonk"
    assert env_traits("MetaBonk/GBA-v0").game is None
    assert env_traits("CartPole-v1") == EnvTraits(deterministic=True)
    with pytest.raises(
        UnknownEnvError, match="unknown env id 'MetaBonk/Nope-v0'.*MetaBonk/BonkQuest-v0"
    ):
        env_traits("MetaBonk/Nope-v0")


def test_backends_satisfy_the_protocol(arena_peer: PeerProcess) -> None:
    env = gym.make(ARENA)
    try:
        assert isinstance(env.unwrapped.backend, RetroCore)
        assert isinstance(env.unwrapped.backend, EmulatorBackend)
    finally:
        env.close()
    env = gym.make(ARENA, backend="skyemu", skyemu_url=arena_peer.url)
    try:
        env.reset(seed=0)
        assert isinstance(env.unwrapped.backend, SkyEmuBackend)
        assert isinstance(env.unwrapped.backend, EmulatorBackend)
        palette = env.unwrapped.memory.regions([(0x05000000, 0x400)])[0]
        assert palette.shape == (0x400,) and palette.any()
    finally:
        env.close()
    assert not isinstance(object(), EmulatorBackend)


def test_memory_view_matches_the_variables() -> None:
    env = gym.make(ARENA)
    try:
        env.reset(seed=0)
        base = env.unwrapped
        hp = base.integration.variables["hp"]
        assert base.memory.value(hp.address, hp.type) == base.read_variable("hp")
        (region,) = base.memory.regions([(hp.address, 1)])
        assert int(region[0]) == base.read_variable("hp")
        assert base.memory.read(hp.address, 1) == bytes([base.read_variable("hp")])
    finally:
        env.close()


def test_megabonk_state_through_make(sim: BonkLinkSim) -> None:
    """The issue's example: `gym.make("MetaBonk/Megabonk-v0", obs_type="state")`."""
    env = gym.make(MEGABONK, port=sim.port, obs_type="state")
    try:
        obs, info = env.reset()
        assert obs.shape == (51,) and obs.dtype == np.float32 and np.abs(obs).max() <= 10.0
        assert env.unwrapped.last_observation is obs
        assert info["survival_time"] == 0.0
    finally:
        env.close()


@pytest.mark.parametrize("obs_type", ["grayscale", "state"])
def test_gymnasium_env_checker_passes(kind: tuple[str, dict], obs_type: str) -> None:
    env_id, where = kind
    env = gym.make(env_id, **where, obs_type=obs_type, downscale=2, frameskip=2)
    try:  # its warnings fail the test
        check_env_strict(env.unwrapped, skip_render_check=True, skip_close_check=True)
    finally:
        env.close()
