"""Savestates: shipped files, saving from a running env, and loading them back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metabonk_gym.gba.integration import Integration, savestates_dir

EXPECTED = {
    "BonkQuest": ["room1", "room2", "room3", "room4", "room5"],
    "BonkArena": ["start", "wave5"],
}


@pytest.mark.parametrize("game", sorted(EXPECTED))
def test_shipped_savestates_exist(game: str) -> None:
    files = Integration.bundled(game).savestate_files()
    for name in EXPECTED[game]:
        assert name in files and files[name].parent == savestates_dir(game)


@pytest.mark.parametrize(("game", "name"), [("BonkQuest", "room3"), ("BonkArena", "wave5")])
def test_shipped_state_matches_the_named_start_with_seed_zero(
    make_env, game: str, name: str
) -> None:
    env = make_env(f"MetaBonk/{game}-v0")
    _, from_start = env.reset(seed=0, options={"state": name, "game_seed": 0})
    ram_start = env.unwrapped.read_memory(0x02000000, 0x200)
    _, from_file = env.reset(options={"state": savestates_dir(game) / f"{name}.state"})
    ram_file = env.unwrapped.read_memory(0x02000000, 0x200)
    from_start.pop("game_seed"), from_file.pop("game_seed")
    assert from_start == from_file
    assert ram_start == ram_file


def test_save_state_then_reset_from_it_replays_identically(make_env, tmp_path: Path) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    env.reset(seed=4)
    for action in [4, 4, 2, 2, 4]:
        env.step(action)
    path = tmp_path / "mine.state"
    env.unwrapped.save_state(path)
    expected = [env.step(a)[0] for a in (1, 3, 3, 0)]
    env.reset(options={"state": path})
    replay = [env.step(a)[0] for a in (1, 3, 3, 0)]
    assert all(np.array_equal(a, b) for a, b in zip(expected, replay))
    assert not list(tmp_path.glob("*.tmp")), "atomic write leaves no temp file"


def test_state_saved_into_the_game_folder_is_found_by_name(make_env, tmp_path: Path) -> None:
    integration = Integration.bundled("BonkArena")
    env = make_env("MetaBonk/BonkArena-v0")
    env.reset(seed=0)
    for _ in range(30):
        env.step(1)
    target = savestates_dir("BonkArena") / "pytest-temp.state"
    try:
        env.unwrapped.save_state(target)
        assert "pytest-temp" in integration.state_names()
        _, info = env.reset(options={"state": "pytest-temp"})
        assert info["time_frames"] > 0
    finally:
        target.unlink(missing_ok=True)
