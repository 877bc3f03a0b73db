"""The `game.py` contract: a game folder's code, found through the env's game folder, never by name.

The bundled games' modules give what the think stack and the agents look for; the example of
docs/new-game.md ("game.py") runs as a user's game folder (BonkQuest's ROM under another name);
a folder without `game.py` gets the generic adapter and follower and no scripted expert.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import gymnasium as gym
import pytest
from metabonk_gym.wrappers.text_map import TextMap

from metabonk_gym.agents.registry import make_agent
from metabonk_gym.errors import UntrustedGameCodeError
from metabonk_gym.experts.base import Agent, AgentError
from metabonk_gym.gamedata import BUNDLED_GAMES, GameData, bundled_game_folder
from metabonk_gym.games import game_for
from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.distill import load_dataset
from metabonk_gym.think.follower import DirectiveFollower, make_follower
from metabonk_gym.think.games import GameAdapter, adapter_for, adapter_for_name
from metabonk_gym.think.view import GameView

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "new-game.md"
#: What a user's folder copies from BonkQuest: the integration, not its code or its presets.
INTEGRATION_FILES = ("data.json", "metabonk.json", "scenario.json", "metadata.json", "tiles.json")


def doc_game_py() -> str:
    """The `MyQuest/game.py` python block of docs/new-game.md."""
    match = re.search(r"^```python\n# MyQuest/game\.py\n(.*?)^```$", DOC.read_text(), re.M | re.S)
    assert match is not None, f"{DOC} has no python block starting with '# MyQuest/game.py'"
    return match.group(1)


def user_folder(root: Path, name: str, game_py: str | None) -> Path:
    """BonkQuest's integration and ROM under another name, with `game_py` as its game.py."""
    source = bundled_game_folder("BonkQuest")
    folder = root / name
    folder.mkdir()
    for file in (*INTEGRATION_FILES, "rom.gba", "rom.sha"):
        shutil.copyfile(source / file, folder / file)
    manifest = json.loads((folder / "metabonk.json").read_text())
    (folder / "metabonk.json").write_text(json.dumps({**manifest, "name": name}))
    if game_py is not None:
        (folder / "game.py").write_text(game_py)
    return folder


#: The bundled games with code of their own; the public games (HatWizard, MeteoRain, uCity) are
#: data only, as a user's integration of a game nobody here wrote.
GAMES_WITH_CODE = [
    name for name in BUNDLED_GAMES if (bundled_game_folder(name) / "game.py").is_file()
]


def test_the_bundled_games_with_code_are_ours() -> None:
    assert set(GAMES_WITH_CODE) == {"BonkQuest", "BonkArena", "Megabonk"}


@pytest.mark.parametrize("name", GAMES_WITH_CODE)
def test_bundled_game_modules_follow_the_contract(name: str) -> None:
    game = GameData(bundled_game_folder(name))
    module = game.module()
    assert module is not None and game.module() is module  # imported once per folder
    assert issubclass(module.Adapter, GameAdapter) and module.Adapter is not GameAdapter
    assert issubclass(module.Follower, DirectiveFollower)
    adapter = adapter_for_name(name)
    assert type(adapter) is module.Adapter and adapter.spec.game == name
    assert adapter.game == game and adapter.game_card() == game.game_card() is not None
    if name != "Megabonk":  # the GBA games have a scripted expert
        assert callable(module.Expert.act) and callable(module.Expert.reset)


def test_the_env_finds_its_games_code_through_its_folder(make_env) -> None:
    env = make_env("MetaBonk/BonkArena-v0")
    module = env.unwrapped.game_data.module()
    assert module is GameData(bundled_game_folder("BonkArena")).module()
    assert type(adapter_for(env)) is module.Adapter
    assert type(make_follower(env)) is module.Follower
    assert type(make_agent("scripted", env)) is module.Expert


def test_the_docs_game_py_runs_as_a_users_game(tmp_path: Path) -> None:
    folder = user_folder(tmp_path, "MyQuest", doc_game_py())
    env = gym.make("MetaBonk/GBA-v0", integration=folder)
    try:
        game = game_for("MetaBonk/GBA-v0", integration=folder)
        assert game is not None and game.name == "MyQuest"
        module = game.module()
        assert module is not None and env.unwrapped.game_data.module() is module
        adapter = adapter_for(env)
        assert type(adapter) is module.Adapter and adapter.spec.actions == ("go_to", "wait")
        assert type(make_follower(env)) is DirectiveFollower  # the folder gives no Follower
        expert = make_agent("scripted", env, seed=0)
        assert isinstance(expert, module.Expert) and isinstance(expert, Agent)
        obs, info = env.reset(seed=0)
        start_x = info["player_x"]
        expert.reset(obs, info)
        for _ in range(40):
            obs, _, terminated, truncated, info = env.step(expert.act(obs, info))
            assert not (terminated or truncated)
        assert info["player_x"] > start_x, "the expert walks east"
        agent = make_think_agent(
            env, model_path="oracle", log_dir=tmp_path / "log", think_every=5, cooldown_steps=0
        )
        obs, info = env.reset(seed=0)
        for _ in range(20):
            action = agent.act(obs, info)
            assert env.action_space.contains(action)
            obs, _, _, _, info = env.step(action)
        directive = agent.directive
        assert directive.source == "oracle" and directive.action in ("go_to", "wait")
        view = GameView.capture(env, info, 0, obs)
        assert adapter.advise(view) is not None
        agent.close()
        # the decision log names the game folder, so distilling it uses the folder's adapter;
        # its game.py is code, so only when the user names the folder (or trusts the log)
        with pytest.raises(UntrustedGameCodeError, match="--trust-game-folder"):
            load_dataset(tmp_path / "log")
        data = load_dataset(tmp_path / "log", integration=folder)
        assert data.game == "MyQuest" and data.spec == adapter.spec and len(data.actions) >= 2
    finally:
        env.close()


def test_a_folder_without_game_py_gets_the_generic_code(tmp_path: Path) -> None:
    folder = user_folder(tmp_path, "PlainQuest", None)
    env = gym.make("MetaBonk/GBA-v0", integration=folder)
    try:
        assert env.unwrapped.game_data.module() is None
        assert type(adapter_for(env)) is GameAdapter
        assert type(make_follower(env)) is DirectiveFollower
        with pytest.raises(AgentError, match="defines no Expert class"):
            make_agent("scripted", env)
        agent = make_think_agent(env, model_path="oracle")  # the oracle falls back safely
        obs, info = env.reset(seed=0)
        agent.act(obs, info)
        assert agent.directive.source == "fallback" and agent.directive.action == "wait"
        agent.close()
    finally:
        env.close()


def test_the_text_map_title_comes_from_the_folders_text_map_yaml(tmp_path: Path) -> None:
    for env_id, title in (
        ("MetaBonk/BonkQuest-v0", "BonkQuest: room=1 hp=5 max_hp=5 keys=0"),
        ("MetaBonk/BonkArena-v0", "BonkArena: wave=1 hp=100 max_hp=100 level=1"),
    ):
        env = TextMap(gym.make(env_id))
        _, info = env.reset(seed=0)
        assert info["text_map"].splitlines()[0] == title
        env.close()
    folder = user_folder(tmp_path, "PlainQuest", None)  # no text_map.yaml: hp and max_hp
    env = TextMap(gym.make("MetaBonk/GBA-v0", integration=folder))
    _, info = env.reset(seed=0)
    assert info["text_map"].splitlines()[0] == "PlainQuest: hp=5 max_hp=5"
    env.close()
