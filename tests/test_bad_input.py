"""Bad input gets a clear error naming the problem and the fix, and loses nothing."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

from metabonk_gym.errors import (
    CorruptSavestateError,
    IntegrationError,
    MetabonkError,
    RewardSpecError,
    RomHashMismatchError,
    RomNotFoundError,
    UnknownStateError,
)
from metabonk_gym.gba.integration import Integration


@pytest.fixture
def user_integration(tmp_path: Path) -> Path:
    """A user's integration folder in stable-retro format (a copy of BonkArena's, no ROM inside)."""
    src = Integration.bundled("BonkArena").folder
    dst = tmp_path / "MyGame-GbAdvance"
    dst.mkdir()
    for name in ("data.json", "scenario.json", "metadata.json", "rom.sha"):
        shutil.copy(src / name, dst / name)
    (dst / "metadata.json").write_text("{}")
    return dst


def test_missing_rom_names_the_path_and_the_fix(user_integration: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.gba"
    with pytest.raises(RomNotFoundError, match=r"nope\.gba.*check the path"):
        gym.make("MetaBonk/GBA-v0", rom=missing, integration=user_integration)
    with pytest.raises(RomNotFoundError, match=r"rom\.gba.*pass rom=PATH"):
        gym.make("MetaBonk/GBA-v0", integration=user_integration)
    with pytest.raises(MetabonkError, match="needs integration=FOLDER"):
        gym.make("MetaBonk/GBA-v0")


def test_rom_hash_mismatch(user_integration: Path, tmp_path: Path) -> None:
    rom = tmp_path / "other.gba"
    rom.write_bytes(Integration.bundled("BonkQuest").rom_path.read_bytes())
    with pytest.raises(RomHashMismatchError, match="SHA-1.*check_hash=False"):
        gym.make("MetaBonk/GBA-v0", rom=rom, integration=user_integration)


def test_user_rom_with_default_actions(make_env, user_integration: Path) -> None:
    rom = Integration.bundled("BonkArena").rom_path
    env = make_env("MetaBonk/GBA-v0", rom=rom, integration=user_integration)
    assert env.action_space.n == 23  # the default button combinations for unknown games
    obs, info = env.reset(seed=0)
    assert "hp" in info  # every data.json variable is in info without a metabonk.json
    env.step(0)


def test_small_user_rom_runs_from_a_padded_copy(
    make_env, user_integration: Path, tmp_path: Path
) -> None:
    full = Integration.bundled("BonkArena").rom_path.read_bytes()
    small = tmp_path / "small.gba"
    small.write_bytes(full.rstrip(b"\xff"))
    assert small.stat().st_size <= 256 * 1024
    with pytest.warns(UserWarning, match="multiboot"):
        env = make_env("MetaBonk/GBA-v0", rom=small, integration=user_integration, check_hash=False)
    assert small.read_bytes() == full.rstrip(b"\xff"), "the user's ROM file is never modified"
    env.reset(seed=0)
    assert env.unwrapped.read_variable("magic") == 0x4B4E4F42, "the padded copy boots"


def test_malformed_integration_files(tmp_path: Path, user_integration: Path) -> None:
    (user_integration / "data.json").write_text("{not json")
    with pytest.raises(IntegrationError, match=r"data\.json is not valid JSON"):
        Integration.from_folder(user_integration, rom=Integration.bundled("BonkArena").rom_path)
    with pytest.raises(IntegrationError, match="does not exist"):
        Integration.from_folder(tmp_path / "missing")


def test_unknown_state_lists_valid_ones(make_env) -> None:
    with pytest.raises(UnknownStateError, match="unknown state 'room9'.*room1.*room5"):
        make_env("MetaBonk/BonkQuest-v0", state="room9")
    env = make_env("MetaBonk/BonkArena-v0")
    with pytest.raises(UnknownStateError, match="valid states:.*wave5"):
        env.reset(options={"state": "wave9"})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"garbage that is not gzip", "not a gzipped core state"),
        (gzip.compress(b"\x00" * 100, mtime=0), "bytes, but this core's states are"),
    ],
    ids=["not-gzip", "wrong-size"],
)
def test_corrupt_savestate(make_env, tmp_path: Path, content: bytes, message: str) -> None:
    bad = tmp_path / "bad.state"
    bad.write_bytes(content)
    env = make_env("MetaBonk/BonkArena-v0")
    env.reset(seed=0)
    with pytest.raises(CorruptSavestateError, match=message):
        env.reset(options={"state": bad})
    _, info = env.reset(seed=0)  # the env is still usable
    assert info["hp"] > 0


def test_savestate_of_another_rom_is_refused(make_env, tmp_path: Path) -> None:
    env = make_env("MetaBonk/BonkArena-v0")
    env.reset(seed=0)
    state = bytearray(env.unwrapped.save_state())
    state[8:12] = bytes(4)  # another ROM's CRC32
    other = tmp_path / "other.state"
    other.write_bytes(gzip.compress(bytes(state)))
    with pytest.raises(CorruptSavestateError, match="made for another ROM"):
        env.reset(options={"state": other})


def test_bad_reward_specs(make_env, tmp_path: Path) -> None:
    with pytest.raises(RewardSpecError, match="unknown reward 'fast'.*presets: default, explore"):
        make_env("MetaBonk/BonkArena-v0", reward="fast")
    with pytest.raises(RewardSpecError, match="unknown variables \\['lives'\\]"):
        make_env("MetaBonk/BonkArena-v0", reward={"l": {"type": "delta", "variable": "lives"}})
    with pytest.raises(RewardSpecError, match="unknown type 'bonus'"):
        make_env("MetaBonk/BonkArena-v0", reward={"b": {"type": "bonus"}})
    with pytest.raises(RewardSpecError, match="reward file not found"):
        make_env("MetaBonk/BonkArena-v0", reward=str(tmp_path / "r.yaml"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"frameskip": 0}, "frameskip"),
        ({"obs_type": "depth"}, "obs_type"),
        ({"action_space": "box"}, "action_space"),
        ({"downscale": 3}, "downscale"),
        ({"sticky_action_prob": 1.0}, "sticky_action_prob"),
        ({"render_mode": "ansi"}, "render_mode"),
        ({"backend": "bizhawk"}, "backend"),
    ],
)
def test_bad_options(kwargs: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        gym.make("MetaBonk/BonkArena-v0", **kwargs)
