"""A game folder's savestates (issue 26, item 6): `*.state` files in the folder or in its own
`savestates/` folder are loaded by name, on the real core; the bundled games keep theirs in the
top-level `savestates/` (installed as `metabonk_gym.savestates`), which is searched first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from metabonk_gym.errors import UnknownStateError
from metabonk_gym.gamedata import bundled_game_folder
from metabonk_gym.gba.integration import Integration, savestates_dir

GBA = "MetaBonk/GBA-v0"


def _folder(root: Path) -> Path:
    """A copy of BonkQuest's data and ROM, without its savestates."""
    folder = root / "MyQuest"
    folder.mkdir()
    source = bundled_game_folder("BonkQuest")
    for name in ("data.json", "scenario.json", "metadata.json", "metabonk.json", "rom.gba"):
        shutil.copy(source / name, folder / name)
    return folder


def test_the_folders_savestates_folder_is_searched(tmp_path: Path, make_env) -> None:
    folder = _folder(tmp_path)
    before = Integration.from_folder(folder)
    assert "vault" not in before.state_names()
    with pytest.raises(UnknownStateError, match="unknown state 'vault'"):
        before.resolve_state("vault")
    (folder / "savestates").mkdir()
    shutil.copy(savestates_dir("BonkQuest") / "room3.state", folder / "savestates" / "vault.state")
    shutil.copy(savestates_dir("BonkQuest") / "room2.state", folder / "hall.state")
    found = Integration.from_folder(folder)
    assert {"hall", "vault"} <= set(found.state_names())
    assert found.resolve_state("vault") == folder / "savestates" / "vault.state"
    env = make_env(GBA, integration=str(folder), state="vault")
    _, info = env.reset(seed=0)
    assert info["room"] == 3  # the state was loaded into the core, not only listed
    _, info = env.reset(seed=0, options={"state": "hall"})
    assert info["room"] == 2


def test_a_state_in_the_folder_wins_over_its_savestates_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "savestates").mkdir()
    shutil.copy(savestates_dir("BonkQuest") / "room3.state", folder / "savestates" / "hall.state")
    shutil.copy(savestates_dir("BonkQuest") / "room2.state", folder / "hall.state")
    assert Integration.from_folder(folder).resolve_state("hall") == folder / "hall.state"


def test_the_bundled_games_states_come_from_the_top_level_savestates() -> None:
    quest = Integration.bundled("BonkQuest")
    assert quest.savestate_dirs[0] == savestates_dir("BonkQuest")
    assert quest.savestate_files()["room2"] == savestates_dir("BonkQuest") / "room2.state"
