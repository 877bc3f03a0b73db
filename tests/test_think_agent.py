"""System 1 and the playable think agent: A*, the follower, the oracle, prompts, `make_think_agent`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metabonk_gym.think.agent import ThinkAgent, make_think_agent
from metabonk_gym.think.directive import Directive
from metabonk_gym.think.follower import make_follower, path_cells
from metabonk_gym.think.games import adapter_for_name
from metabonk_gym.think.oracle import OracleStrategist
from metabonk_gym.think.prompts import HistoryItem, PromptBuilder, system_prompt
from metabonk_gym.think.view import GameView


def test_paths_use_x_y_cells_and_report_unreachable_goals() -> None:
    grid = np.ones((5, 5), bool)  # grid[y, x]
    grid[1:4, 2] = False  # a wall at x=2 with gaps at the top and bottom
    path = path_cells(grid, (0, 2), [(4, 2)])
    assert path is not None and path[0] == (0, 2) and path[-1] == (4, 2) and len(path) == 9
    grid[:, 2] = False
    assert path_cells(grid, (0, 2), [(4, 2)]) is None
    assert path_cells(grid, (0, 2), [(2, 2)]) == [(0, 2), (1, 2), (2, 2)]  # an impassable goal
    cost = np.zeros((5, 5))
    cost[2, 1] = 10.0  # an enemy next to the straight way: go around it
    detour = path_cells(np.ones((5, 5), bool), (0, 2), [(2, 2)], cost)
    assert detour is not None and detour[-1] == (2, 2) and (1, 2) not in detour


def run_episode(env, agent: ThinkAgent, seed: int, limit: int = 2000) -> dict:
    obs, info = env.reset(seed=seed)
    agent.reset(obs, info)
    for _ in range(limit):
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        if terminated or truncated:
            break
    return info


@pytest.mark.parametrize("seed", [11, 12])
def test_oracle_and_follower_win_bonkquest(make_env, seed: int) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    agent = make_think_agent(env, model_path="oracle")
    info = run_episode(env, agent, seed)
    assert info["won"] == 1 and info["lost"] == 0
    assert agent.info()["calls"] >= 8
    agent.close()


def test_follower_talks_opens_and_closes_dialogue(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    obs, info = env.reset(seed=0, options={"state": "room2"})
    follower = make_follower(env)
    talk = Directive("hear the sage", "", "talk", None, 600, 1.0)
    open_chest = Directive("open a chest", "", "open", None, 600, 1.0)
    for i in range(200):
        view = GameView.capture(env, info, i, obs)
        if view.get("talked"):
            break
        obs, _, _, _, info = env.step(follower.act(view, talk))
    assert info["talked"] >= 1 and info["dialogue_open"] == 1
    closed = False
    for i in range(2):  # the follower closes the box (releasing A first) whatever the directive
        obs, _, _, _, info = env.step(follower.act(GameView.capture(env, info, i, obs), open_chest))
        closed = closed or info["dialogue_open"] == 0
    assert closed
    for i in range(300):
        obs, _, _, _, info = env.step(follower.act(GameView.capture(env, info, i, obs), open_chest))
        if info["chests"]:
            break
    assert info["chests"] >= 1


def test_game_adapters_describe_the_state(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    obs, info = env.reset(seed=0)
    adapter = adapter_for_name("BonkQuest")
    view = GameView.capture(env, info, 0, obs)
    text_map = adapter.text_map(view)
    assert text_map is not None
    rows = text_map.splitlines()
    assert len(rows) == 2 + 20 and rows[2 + info["player_y"]][3 + info["player_x"]] == "@"
    assert rows[2 + info["key_y"]][3 + info["key_x"]] == "k"
    assert any("find the key" in g for g in adapter.goals(view))
    assert adapter.state(view)["room"] == 1 and "key_chest" not in adapter.state(view)
    features = adapter.features(
        Directive("k", "", "collect", {"x": info["key_x"], "y": info["key_y"]}, 100, 0.5), view, 50
    )
    assert (
        features.shape == (adapter.feature_size(),) and features[1] == 1.0 and features[-2] == 0.5
    )


def test_prompt_keeps_a_constant_system_prefix(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    obs, info = env.reset(seed=0)
    adapter = adapter_for_name("BonkQuest")
    card = env.unwrapped.integration.game_card()
    builder = PromptBuilder(adapter, card)
    first = builder.build(GameView.capture(env, info, 0, obs), [], "start", vision=True)
    obs, *_, info = env.step(4)
    history = [
        HistoryItem(
            Directive("key", "", "collect", {"x": 1, "y": 2}, 60, 0.9),
            {"status": "done", "frames": 40, "reward": 0.1, "hp_lost": 0},
        )
    ]
    second = builder.build(GameView.capture(env, info, 1, obs), history, "done", vision=False)
    assert first.system == second.system == system_prompt(adapter, card)
    assert (card or "")[:40] in first.system and '"enum":["go_to"' in first.system
    assert (
        first.image_png is not None
        and first.image_png.startswith(b"\x89PNG")
        and second.image_png is None
    )
    assert (
        "because: done" in second.user
        and 'collect {"x":1,"y":2} (key) -> done after 40 frames' in second.user
    )
    assert "## Map" in second.user and "## Goals" in second.user and "## State" in second.user


def test_make_think_agent_needs_a_strategist(make_env, tmp_path: Path) -> None:
    # without a model the default model is used (tests/test_think_real_model.py)
    env = make_env("MetaBonk/BonkQuest-v0")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "m.gguf")):
        make_think_agent(env, model_path=tmp_path / "m.gguf")
    agent = make_think_agent(env, model_path="oracle", log_dir=tmp_path / "log", cooldown_steps=2)
    assert (
        isinstance(agent.director.strategist, OracleStrategist)
        and agent.director.cooldown_steps == 2
    )
    obs, info = env.reset(seed=0)
    action, _ = agent.predict(obs, episode_start=np.array([True]))
    assert env.action_space.contains(int(action))
    agent.close()
    assert (tmp_path / "log" / "decisions.jsonl").is_file()


def test_arena_menu_navigation_takes_the_upgrade_the_directive_names(make_env) -> None:
    env = make_env("MetaBonk/BonkArena-v0")
    agent = make_think_agent(env, model_path="oracle")
    obs, info = env.reset(seed=0)
    agent.reset(obs, info)
    for _ in range(1500):
        if info["menu_open"]:
            break
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        assert not (terminated or truncated)
    assert info["menu_open"] == 1
    before = env.unwrapped.read_array("upgrades").copy()  # type: ignore[attr-defined]
    options = env.unwrapped.read_array("menu_options")  # type: ignore[attr-defined]
    action = agent.act(obs, info)  # the menu trigger asks the oracle first
    directive = agent.directive
    assert directive.action == "choose_upgrade" and directive.option is not None
    for _ in range(60):
        obs, _, _, _, info = env.step(action)
        if not info["menu_open"]:
            break
        action = agent.act(obs, info)
    assert info["menu_open"] == 0
    gained = env.unwrapped.read_array("upgrades") - before  # type: ignore[attr-defined]
    assert gained[int(options[directive.option])] == 1 and gained.sum() == 1
    agent.close()
