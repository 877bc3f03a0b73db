"""TileTokens: keys and spaces, both paths, semantic classes, stable tokens, gymnasium's checker and
FrameStackObservation, and the pixel tokenizer's vocabulary."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import FrameStackObservation
from metabonk_gym.wrappers import PixelTokenizer, TileTokens
from metabonk_gym.wrappers.pixel_tokens import OOV, cell_hashes
from strict_checker import check_env_strict


def _check(env: gym.Env) -> None:
    """gymnasium's checker on a wrapped env (its close check would open a second emulator)."""
    check_env_strict(
        env,
        # a wrapper's observation space differs from the unwrapped env's on purpose
        allowed=(r"different from the unwrapped version",),
        skip_render_check=True,
        skip_close_check=True,
    )


class StripesEnv(gym.Env):
    """A non-GBA RGB env: vertical stripes that shift by one cell per step."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (32, 48, 3), np.uint8)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> np.ndarray:
        cols = (np.arange(48) // 8 + self.t) % 3
        frame = np.zeros((32, 48, 3), np.uint8)
        frame[:, :, 0] = (cols * 80)[None, :]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, False, {}


def test_vram_path_keys_spaces_and_classes(make_env) -> None:
    env = TileTokens(make_env("MetaBonk/BonkQuest-v0"))
    assert env.source == "vram"
    obs, info = env.reset(seed=0)
    assert set(obs) == {"pixels", "tiles", "sprites", "sprite_map", "classes"}
    assert obs in env.observation_space
    assert obs["tiles"].dtype == np.int32 and obs["tiles"].shape == (20, 30)
    names = env.class_names
    classes = obs["classes"]
    assert names[classes[info["player_y"], info["player_x"]]] == "player"
    assert names[classes[1, 0]] == "wall" and {names[c] for c in classes[0]} <= {"hud", "text"}
    assert names[classes[info["key_y"], info["key_x"]]] == "key"
    sprites = obs["sprites"]
    count = int((sprites[:, 2] > 0).sum())
    assert count == 1 + info["num_enemies"]  # the player and each enemy
    assert (sprites[count:] == 0).all()
    assert obs["sprite_map"][info["player_y"], info["player_x"]] == sprites[0, 4]


def test_vram_tokens_are_stable_across_episodes_and_processes(make_env) -> None:
    env = TileTokens(make_env("MetaBonk/BonkQuest-v0"))
    first = env.reset(seed=4)[0]["tiles"]
    env.step(1)
    again = env.reset(seed=4)[0]["tiles"]
    assert (first == again).all()
    env.close()
    import metabonk_gym

    envs = metabonk_gym.make_vec("MetaBonk/BonkQuest-v0", 2, wrappers=[TileTokens])
    try:
        obs, _ = envs.reset(seed=[4, 4])
        assert obs["tiles"].shape == (2, 20, 30)
        assert (obs["tiles"][0] == first).all() and (obs["tiles"][1] == first).all()
    finally:
        envs.close()


def test_buckets_fold_tokens(make_env) -> None:
    env = TileTokens(make_env("MetaBonk/BonkQuest-v0"), buckets=256)
    obs, _ = env.reset(seed=0)
    assert obs["tiles"].max() < 256 and obs in env.observation_space
    assert len(np.unique(obs["tiles"])) > 5


@pytest.mark.parametrize("source", ["vram", "pixels"])
def test_env_checker(make_env, source: str) -> None:
    _check(TileTokens(make_env("MetaBonk/BonkQuest-v0"), source=source))


def test_frame_stack_observation_stacks_every_key(make_env) -> None:
    env = FrameStackObservation(TileTokens(make_env("MetaBonk/BonkQuest-v0")), stack_size=3)
    obs, _ = env.reset(seed=0)
    assert obs["tiles"].shape == (3, 20, 30) and obs["pixels"].shape == (3, 160, 240, 3)
    obs, *_ = env.step(4)
    assert (obs["tiles"][0] == obs["tiles"][1]).all()  # padded with the reset observation
    _check(env)


def test_pixel_path_on_a_non_gba_env() -> None:
    env = TileTokens(StripesEnv(), vocabulary_size=3)
    assert env.source == "pixels" and set(env.observation_space.spaces) == {"pixels", "tiles"}
    obs, _ = env.reset(seed=0)
    assert obs["tiles"].shape == (4, 6) and obs["tiles"][0].tolist() == [
        1,
        2,
        0,
        1,
        2,
        0,
    ]  # cap: 2 ids
    obs, *_ = env.step(0)
    assert obs["tiles"][0].tolist() == [2, 0, 1, 2, 0, 1]
    _check(TileTokens(StripesEnv()))


def test_pixel_tokenizer_is_deterministic_and_saves(tmp_path) -> None:
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 4, (16, 24, 3)).astype(np.uint8) * 60 for _ in range(5)]
    a, b = PixelTokenizer(), PixelTokenizer()
    assert all((a(f) == b(f)).all() for f in frames)
    a.save(tmp_path / "vocab.json")
    frozen = PixelTokenizer(vocabulary=tmp_path / "vocab.json", grow=False)
    assert all((frozen(f) == a(f)).all() for f in frames)
    unseen = np.full((16, 24, 3), 7, np.uint8)
    assert (frozen(unseen) == OOV).all() and len(frozen) == len(a)
    # the hash sees every byte of a cell
    frame = np.zeros((8, 8, 3), np.uint8)
    other = frame.copy()
    other[7, 7, 2] = 1
    assert cell_hashes(frame)[0, 0] != cell_hashes(other)[0, 0]


def test_pixel_tokenizer_bad_input(tmp_path) -> None:
    with pytest.raises(ValueError, match="capacity"):
        PixelTokenizer(capacity=1)
    with pytest.raises(FileNotFoundError, match="vocabulary not found"):
        PixelTokenizer(vocabulary=tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a vocabulary"):
        PixelTokenizer(vocabulary=tmp_path / "bad.json")
    with pytest.raises(TypeError, match="uint8"):
        cell_hashes(np.zeros((8, 8, 3), np.float32))
    with pytest.raises(ValueError, match="source"):
        TileTokens(StripesEnv(), source="ram")
    with pytest.raises(TypeError, match="source='pixels'"):
        TileTokens(StripesEnv(), source="vram")


def test_vram_classes_agree_with_the_games_ram_map(make_env) -> None:
    """BonkQuest keeps its room as semantic ids in RAM (`room_tiles`, metabonk.json
    `tile_classes`): the classes decoded from VRAM name the same thing in every cell."""
    env = TileTokens(make_env("MetaBonk/BonkQuest-v0"))
    tile_classes = env.unwrapped.integration.extension["tile_classes"]
    for state in ("room1", "room3", "room5"):
        obs, _ = env.reset(seed=1, options={"state": state})
        room = env.unwrapped.read_array("room_tiles")
        from_ram = np.vectorize(lambda t: tile_classes[str(t)])(room)
        from_vram = np.array(env.class_names)[obs["classes"]]
        sprites = obs["sprite_map"] != 0
        rows = slice(1, 20)  # row 0 is the HUD bar over the room's top wall
        agree = (from_ram[rows] == from_vram[rows]) | sprites[rows]
        assert agree.all(), list(zip(from_ram[rows][~agree], from_vram[rows][~agree]))[:5]
