"""The GBA env on the real embedded core: ids, spaces, options, determinism, memory, vectors."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from strict_checker import check_env_strict

import metabonk_gym
from metabonk_gym.errors import InvalidActionError, UnknownVariableError

QUEST_INFO = [
    "room",
    "player_x",
    "player_y",
    "hp",
    "keys",
    "score",
    "chests",
    "quest_stage",
    "rooms_visited",
    "won",
    "lost",
]
ARENA_INFO = [
    "hp",
    "max_hp",
    "xp",
    "level",
    "kills",
    "time_s",
    "enemies",
    "menu_open",
    "won",
    "lost",
]


def rollout(env: gym.Env, seed: int, actions: list[int]) -> tuple[list[np.ndarray], list[dict]]:
    obs, info = env.reset(seed=seed)
    frames, infos = [obs], [info]
    for action in actions:
        obs, _, terminated, truncated, info = env.step(action)
        frames.append(obs)
        infos.append({k: v for k, v in info.items() if k != "reward_terms"})
        if terminated or truncated:
            break
    return frames, infos


@pytest.mark.parametrize(
    ("env_id", "keys"),
    [("MetaBonk/BonkQuest-v0", QUEST_INFO), ("MetaBonk/BonkArena-v0", ARENA_INFO)],
)
def test_make_reset_step(make_env, env_id: str, keys: list[str]) -> None:
    env = make_env(env_id)
    obs, info = env.reset(seed=0)
    assert obs.shape == (160, 240, 3) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert set(keys) <= set(info)
    assert obs.std() > 5, "the screen should show the game, not a blank frame"
    obs2, reward, terminated, truncated, info2 = env.step(env.action_space.sample())
    assert isinstance(float(reward), float)
    assert not truncated
    assert abs(sum(info2["reward_terms"].values()) - reward) < 1e-6
    assert env.unwrapped.rom_path.name == "rom.gba" and env.unwrapped.rom_path.is_file()


def test_colon_id_imports_the_package_itself() -> None:
    code = (
        "import gymnasium as gym, sys\n"
        "assert 'metabonk_gym' not in sys.modules\n"
        "env = gym.make('metabonk_gym:MetaBonk/BonkQuest-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(obs.shape, info['room'])\n"
        "env.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(160, 240, 3) 1"


def test_same_seed_same_game_different_seed_different_layout(quest) -> None:
    rng = np.random.default_rng(7)
    actions = [int(a) for a in rng.integers(0, quest.action_space.n, 60)]
    frames_a, infos_a = rollout(quest, 123, actions)
    ram_a = quest.unwrapped.read_array("room_tiles")
    frames_b, infos_b = rollout(quest, 123, actions)
    ram_b = quest.unwrapped.read_array("room_tiles")
    assert infos_a == infos_b
    assert all(np.array_equal(a, b) for a, b in zip(frames_a, frames_b))
    assert np.array_equal(ram_a, ram_b)
    layouts = set()
    for seed in range(6):
        quest.reset(seed=seed)
        layouts.add(
            quest.unwrapped.read_array("room_tiles").tobytes()
            + bytes(quest.unwrapped.read_array("enemy_x"))
        )
    assert len(layouts) > 1, "the seed should vary key and enemy placement"


def test_reset_without_seed_continues_the_seeded_sequence(quest) -> None:
    quest.reset(seed=5)
    first = [quest.reset()[1]["game_seed"] for _ in range(3)]
    quest.reset(seed=5)
    second = [quest.reset()[1]["game_seed"] for _ in range(3)]
    assert first == second


@pytest.mark.parametrize("room", [1, 2, 3, 4, 5])
def test_named_room_starts(quest, room: int) -> None:
    _, info = quest.reset(seed=0, options={"state": f"room{room}"})
    assert info["room"] == room
    assert info["won"] == 0 and info["lost"] == 0


def test_state_kwarg_and_arena_starts(make_env) -> None:
    env = make_env("MetaBonk/BonkArena-v0", state="wave5")
    _, info = env.reset(seed=0)
    assert info["wave"] == 5
    _, info = env.reset(seed=0, options={"state": "start"})
    assert info["time_s"] == 0 and info["wave"] == 1


def test_frameskip_advances_the_game_frame_counter(make_env) -> None:
    for frameskip in (1, 4, 7):
        env = make_env("MetaBonk/BonkQuest-v0", frameskip=frameskip)
        env.reset(seed=0)
        before = env.unwrapped.read_variable("frame")
        env.step(0)
        assert env.unwrapped.read_variable("frame") - before == frameskip
        env.close()


def test_multibinary_grayscale_downscale(make_env) -> None:
    env = make_env(
        "MetaBonk/BonkQuest-v0", action_space="multibinary", obs_type="grayscale", downscale=2
    )
    assert env.action_space == gym.spaces.MultiBinary(10)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (80, 120, 1) and env.observation_space.contains(obs)
    right = np.zeros(10, dtype=np.int8)
    right[4] = 1  # RIGHT in KEYINPUT order
    x0 = env.unwrapped.read_variable("player_x")
    for _ in range(3):
        env.step(right)
    moved = env.unwrapped.read_variable("player_x") != x0
    left = np.zeros(10, dtype=np.int8)
    left[5] = 1
    for _ in range(3):
        env.step(left)
    assert moved or env.unwrapped.read_variable("player_x") != x0, (
        "the d-pad should move the player"
    )


def test_sticky_actions_are_deterministic_given_the_seed(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0", sticky_action_prob=0.5)
    actions = [1, 2, 3, 4] * 10
    _, infos_a = rollout(env, 3, actions)
    _, infos_b = rollout(env, 3, actions)
    assert infos_a == infos_b
    env.close()  # one emulator per process: the plain env opens after this one closes
    env2 = make_env("MetaBonk/BonkQuest-v0", sticky_action_prob=0.0)
    _, infos_c = rollout(env2, 3, actions)
    positions = lambda infos: [(i["player_x"], i["player_y"]) for i in infos]  # noqa: E731
    assert positions(infos_a) != positions(infos_c), "sticky actions should change the trajectory"


def test_max_episode_steps_truncates(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0", max_episode_steps=5)
    env.reset(seed=0)
    truncated = False
    for _ in range(5):
        _, _, terminated, truncated, _ = env.step(0)
    assert truncated and not terminated


def test_render_modes(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0", render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    assert np.array_equal(env.render(), obs)
    env.close()
    human = make_env("MetaBonk/BonkQuest-v0", render_mode="human")  # SDL dummy driver in tests
    human.reset(seed=0)
    human.step(0)
    assert human.render() is None


def test_read_memory_regions(quest) -> None:
    quest.reset(seed=0)
    unwrapped = quest.unwrapped
    assert unwrapped.read_memory(0x02000000, 4) == b"BONK"
    assert len(unwrapped.read_memory(0x06000000, 0x800)) == 0x800
    assert len(unwrapped.read_memory(0x07000000, 1024)) == 1024
    dispcnt = int.from_bytes(unwrapped.read_memory(0x04000000, 2), "little")
    assert dispcnt & 0x7 == 0, "the bundled games run in tile mode 0"
    frame = unwrapped.read_variable("frame")
    assert unwrapped.read_memory(0x02000004, 4) == frame.to_bytes(4, "little")
    with pytest.raises(ValueError, match="outside the GBA regions"):
        unwrapped.read_memory(0x01000000, 4)


def test_read_memory_iwram_and_palette(quest) -> None:
    quest.reset(seed=0)
    unwrapped = quest.unwrapped
    iwram = unwrapped.read_memory(0x03000000, 0x8000)  # all 32 KiB, in one block copy
    assert len(iwram) == 0x8000 and any(iwram), "IWRAM holds the stacks and code the game uses"
    # small reads take another path (8-byte words, then single bytes): they must agree
    assert unwrapped.read_memory(0x03007F00, 13) == iwram[0x7F00 : 0x7F00 + 13]
    assert unwrapped.read_memory(0x03007FF8, 8) == iwram[-8:]
    palette = unwrapped.read_memory(0x05000000, 0x400)  # 512 BGR555 colours: BG then OBJ
    colours = np.frombuffer(palette, dtype="<u2")
    assert len(colours) == 512 and len(set(colours[:256].tolist())) > 4, "the game set its colours"
    assert (colours & 0x8000).sum() == 0, "BGR555: bit 15 unused"
    assert unwrapped.read_memory(0x050003F0, 16) == palette[-16:]
    for address, size in ((0x03000000, 0x8001), (0x05000000, 0x401)):
        with pytest.raises(ValueError, match="outside the GBA regions"):
            unwrapped.read_memory(address, size)


def test_unknown_variable_and_invalid_actions(quest) -> None:
    quest.reset(seed=0)
    with pytest.raises(UnknownVariableError, match="unknown variable 'lives'.*hp"):
        quest.unwrapped.read_variable("lives")
    for bad in (-1, quest.action_space.n, 1.5, "up", None):
        with pytest.raises(InvalidActionError, match="Discrete"):
            quest.step(bad)
    quest.step(0)  # the env still works after refusing bad actions


def test_invalid_multibinary_actions(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0", action_space="multibinary")
    env.reset(seed=0)
    two = np.zeros(10, dtype=np.int8)
    two[4] = 2
    for bad in (np.zeros(9, dtype=np.int8), np.zeros(12, dtype=np.int8), two, np.zeros((2, 10)), 3):
        with pytest.raises(InvalidActionError, match="MultiBinary\\(10\\).*A, B, SELECT"):
            env.step(bad)
    right = np.zeros(10, dtype=np.int8)
    right[4] = 1
    x0 = env.unwrapped.read_variable("player_x")
    env.step(right.tolist())  # a list of 0/1 is fine too
    assert env.unwrapped.read_variable("player_x") == x0 + 1


def test_reward_dict_terms_are_reported(make_env) -> None:
    reward = {
        "right": {"type": "delta", "variable": "player_x", "weight": 2.0},
        "clock": {"type": "time_penalty", "weight": 0.25},
    }
    env = make_env("MetaBonk/BonkQuest-v0", reward=reward)
    env.reset(seed=0, options={"state": "room1", "game_seed": 1})
    _, r, _, _, info = env.step(4)  # RIGHT: one tile
    assert info["reward_terms"] == {"right": 2.0, "clock": -0.25}
    assert r == pytest.approx(1.75)
    _, r, _, _, info = env.step(0)
    assert info["reward_terms"] == {"right": 0.0, "clock": -0.25} and r == pytest.approx(-0.25)


def test_a_second_env_in_one_process_runs_on_its_own_core(quest) -> None:
    """stable-retro allows one emulator per process; a second env runs on a private copy of
    stable-retro (`core_copies`), so it opens and steps beside the first."""
    arena = gym.make("MetaBonk/BonkArena-v0")
    try:
        assert arena.unwrapped.backend._slot != quest.unwrapped.backend._slot
        obs, _ = arena.reset(seed=0)
        quest.reset(seed=0)
        arena.step(0)
        assert obs.shape == (160, 240, 3)
    finally:
        arena.close()


@pytest.mark.parametrize("env_id", ["MetaBonk/BonkQuest-v0", "MetaBonk/BonkArena-v0"])
def test_gymnasium_env_checker(make_env, env_id: str) -> None:
    """gymnasium's checker, whole. Its render and close checks build a second env while the first
    is open, which one emulator per process forbids, so they run after the first env closes."""
    import warnings

    from gymnasium.utils.passive_env_checker import env_render_passive_checker

    env = make_env(env_id)
    check_env_strict(env.unwrapped, skip_render_check=True, skip_close_check=True)
    env.close()
    for render_mode in env.unwrapped.metadata["render_modes"]:
        other = make_env(env_id, render_mode=render_mode)
        other.reset(seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # the render checker warns, too
            env_render_passive_checker(other)
        other.close()
        other.close()  # closing twice is allowed


@pytest.mark.parametrize("env_id", ["MetaBonk/BonkQuest-v0", "MetaBonk/BonkArena-v0"])
def test_sb3_env_checker(make_env, env_id: str) -> None:
    import warnings

    from stable_baselines3.common.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any SB3 complaint about the env fails the test
        check_env(make_env(env_id).unwrapped, warn=True)


def test_make_vec_shared_memory() -> None:
    envs = metabonk_gym.make_vec("MetaBonk/BonkQuest-v0", 2, frameskip=2, info_keys=("room",))
    try:
        assert isinstance(envs, gym.vector.VectorEnv)
        obs, infos = envs.reset(seed=10)
        assert obs.shape == (2, 160, 240, 3)
        assert list(infos["room"]) == [1, 1]
        obs, rewards, terminated, truncated, infos = envs.step(np.array([1, 2]))
        assert rewards.shape == (2,)
        assert infos["room"].tolist() == [1, 1] and infos["_room"].all()
    finally:
        envs.close()


def test_sb3_subproc_vec_env() -> None:
    from functools import partial

    from stable_baselines3.common.vec_env import SubprocVecEnv

    from metabonk_gym.vector import make_one as _make_env

    venv = SubprocVecEnv([partial(_make_env, "MetaBonk/BonkArena-v0", (), {}) for _ in range(2)])
    try:
        obs = venv.reset()
        assert obs.shape == (2, 160, 240, 3)
        obs, rewards, dones, infos = venv.step(np.array([0, 1]))
        assert "hp" in infos[0]
    finally:
        venv.close()
