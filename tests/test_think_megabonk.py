"""Megabonk in the think stack: the adapter (radar, triggers, checks), the Box-action follower,
the oracle, `PauseToThink` with the oracle and with a tiny GGUF, and `metabonk play --agent think`,
all against the real lockstep `bonklink-sim` over TCP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import gymnasium as gym
import jsonschema
import numpy as np
import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.bonklink.actions import click_from_plugin, to_wire
from metabonk_gym.bonklink.env import MegabonkEnv
from metabonk_gym.bonklink.game import LEVEL_UP, card_rects
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.directive import Directive, DirectiveError
from metabonk_gym.think.engines import OpenAIEngine
from metabonk_gym.think.follower import make_follower
from metabonk_gym.think.games import adapter_for
from metabonk_gym.think.log import read_decisions
from metabonk_gym.think.oracle import OracleStrategist
from metabonk_gym.think.pause_to_think import PauseToThink
from metabonk_gym.think.prompts import PromptBuilder, system_prompt
from metabonk_gym.think.strategist import ModelStrategist
from metabonk_gym.think.testing import write_tiny_pair
from metabonk_gym.think.view import GameView

pytestmark = pytest.mark.net

#: The game's own code (its folder's game.py, as the think stack loads it).
GAME = GameData(bundled_game_folder("Megabonk")).module()
MegabonkAdapter, MegabonkFollower = GAME.Adapter, GAME.Follower

#: What each of the stand-in game's upgrades changes (`ArenaGame._apply_upgrade`).
EFFECTS = {
    "Damage +25%": "damage_mult",
    "Attack Speed +20%": "fire_rate_mult",
    "Move Speed +10%": "speed_mult",
    "Max HP +20": "max_health",
    "Heal 40%": "health",
    "Projectiles +1": "projectile_count",
    "Area +30%": "area_mult",
    "Range +20%": "range_mult",
}


@pytest.fixture
def sim() -> Iterator[BonkLinkSim]:
    server = BonkLinkSim(port=0, mode="lockstep", seed=3)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_pair(tmp_path_factory.mktemp("gguf"))


def megabonk(port: int, **kwargs: Any) -> MegabonkEnv:
    return MegabonkEnv(
        port=port, connect_timeout=10, frame_wait=kwargs.pop("frame_wait", 0.0), **kwargs
    )


def view_of(info: dict[str, Any], step: int = 0) -> GameView:
    return GameView("Megabonk", step, np.zeros((90, 160, 3), np.uint8), info)


def gameplay_info(**kwargs: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "hp": 100.0,
        "max_hp": 100.0,
        "game_time": 10.0,
        "position": np.array([5.0, 0.0, -3.0], np.float32),
        "enemies": np.zeros((0, 4), np.float32),
        "menu": "Gameplay",
        "options": [],
    }
    info.update(kwargs)
    return info


def enemies_at(*points: tuple[float, float]) -> np.ndarray:
    return np.array([[x, 0.0, z, 10.0] for x, z in points], np.float32)


def valid_for(adapter: MegabonkAdapter, directive: dict[str, Any], view: GameView | None) -> None:
    """Schema-valid, and (given the view it was asked about) what that state allows."""
    jsonschema.validate(
        {k: v for k, v in directive.items() if k not in ("source", "reason")},
        adapter.spec.schema(),
    )
    if view is not None:
        adapter.check(Directive(**directive), view)


# ---------------------------------------------------------------------- the adapter
def test_adapter_is_picked_for_the_env_and_reads_its_info() -> None:
    env = MegabonkEnv(port=1, max_options=3)
    adapter = adapter_for(env)
    assert isinstance(adapter, MegabonkAdapter) and adapter.spec.n_options == 3
    assert adapter.spec.actions == ("attack", "flee", "wander", "go_to", "choose_upgrade", "wait")
    prompt = system_prompt(adapter, adapter.game_card())
    assert "Megabonk" in prompt and "radar of 21 x 21 cells" in prompt
    assert "Game Boy" not in prompt and "30 x 20" not in prompt
    # one enemy 4 units east and 2 north of the player at (5, -3): radar cell (12, 9)
    info = gameplay_info(enemies=enemies_at((9.0, -1.0), (5.0, -40.0)), level=2, kills=7)
    view = view_of(info)
    state = adapter.state(view)
    assert state["hp"] == 100.0 and state["enemies"] == 2 and state["level"] == 2
    json.dumps(state)  # the decision log writes it
    rows = adapter.text_map(view).splitlines()[2:]  # type: ignore[union-attr]
    assert rows[9][3 + 12] == "E" and rows[10][3 + 10] == "@"
    assert "E" not in "".join(rows[:9] + rows[10:])  # the far enemy is off the radar
    text = PromptBuilder(adapter).user_text(view, [], "start")
    assert "enemy 4.5 units away at cell x=12, y=9" in text
    assert adapter.goals(view)[0].startswith("survive")


def test_triggers_status_and_checks() -> None:
    adapter = MegabonkAdapter(n_options=4)
    full, small_hit = view_of(gameplay_info()), view_of(gameplay_info(hp=97.0))
    assert adapter.events(None, full) == ["start"]
    assert adapter.events(full, small_hit) == []  # a tick of contact is no reason to think
    assert adapter.events(small_hit, view_of(gameplay_info(hp=74.0))) == ["hp_drop"]
    assert adapter.events(full, view_of(gameplay_info(hp=85.0))) == ["hp_drop"]  # a big hit
    options = ["Damage +25%", "Heal 40%", "Area +30%"]
    menu = view_of(gameplay_info(menu=LEVEL_UP, options=options))
    assert adapter.events(full, menu) == ["menu"]
    pick = Directive("upgrade", "", "choose_upgrade", {"option": 2}, 60, 1.0)
    adapter.check(pick, menu)
    with pytest.raises(DirectiveError, match="offers options 0..2"):
        adapter.check(Directive("upgrade", "", "choose_upgrade", {"option": 3}, 60, 1.0), menu)
    with pytest.raises(DirectiveError, match="no menu is open"):
        adapter.check(pick, full)
    assert adapter.status(pick, menu, menu) == "running"
    assert adapter.status(pick, menu, full) == "done"
    flee = Directive("run", "", "flee", None, 60, 1.0)
    assert adapter.status(flee, full, menu) == "done"  # a level-up interrupts
    go = Directive("east", "", "go_to", {"x": 13, "y": 10}, 600, 1.0)  # 6 units east
    moved = gameplay_info(position=np.array([10.5, 0.0, -3.0], np.float32))
    assert adapter.status(go, full, view_of(gameplay_info())) == "running"
    assert adapter.status(go, full, view_of(moved)) == "done"


def test_a_strategist_answer_the_menu_rules_out_is_an_invalid_fallback() -> None:
    """A real HTTP server answering a schema-valid directive with an option the menu lacks."""
    answer = {
        "goal": "upgrade",
        "reasoning": "",
        "action": "choose_upgrade",
        "target": {"option": 3},
        "duration_frames": 60,
        "confidence": 1.0,
    }
    body = json.dumps({"choices": [{"message": {"content": json.dumps(answer)}}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    adapter = MegabonkAdapter(n_options=4)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    strategist = ModelStrategist(OpenAIEngine(url), PromptBuilder(adapter), timeout_s=10)
    try:
        three = view_of(gameplay_info(menu=LEVEL_UP, options=["A", "B", "C"]))
        result = strategist.request(three, [], "menu").result()
        assert result.category == "invalid" and "offers options 0..2" in str(result.error)
        assert result.directive.source == "fallback"
        four = view_of(gameplay_info(menu=LEVEL_UP, options=["A", "B", "C", "D"]))
        result = strategist.request(four, [], "menu").result()
        assert result.category is None and result.directive.option == 3
    finally:
        strategist.close()
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------- the follower
def test_follower_steers_aims_and_clicks_in_the_env_space(sim: BonkLinkSim) -> None:
    env = megabonk(sim.port)
    follower = make_follower(env)
    assert isinstance(follower, MegabonkFollower)
    space = env.action_space
    east = gameplay_info(enemies=enemies_at((7.0, -3.0)))  # 2 units east of the player
    flee = follower.act(view_of(east), Directive("run", "", "flee", None, 60, 1.0))
    assert space.contains(flee) and flee[0] < -0.5  # away: west
    assert flee[2] > 0.9 and flee[4] > 0  # aims east at it and fires
    far = gameplay_info(enemies=enemies_at((20.0, -3.0)))  # 15 units east
    follower.reset(0)
    attack = follower.act(view_of(far), Directive("kite", "", "attack", None, 60, 1.0))
    assert space.contains(attack) and attack[0] > 0.5 and attack[4] < 0  # closes in, no shot yet
    follower.reset(0)
    north = follower.act(
        view_of(gameplay_info()), Directive("n", "", "go_to", {"x": 10, "y": 2}, 600, 1.0)
    )
    assert space.contains(north) and north[1] > 0.9  # moveY is forward (+Z, radar north)
    # the level-up menu: a click on the chosen card, in the plugin's bottom-left pixels
    menu = view_of(gameplay_info(menu=LEVEL_UP, options=["A", "B", "C"]))
    follower.reset(0)
    click = follower.act(menu, Directive("u", "", "choose_upgrade", {"option": 2}, 60, 1.0))
    assert space.contains(click) and click[7] > 0
    wire = to_wire(click, "box", (320, 180))
    assert card_rects()[2].contains(*click_from_plugin(wire.click_x, wire.click_y, 320, 180))
    release = follower.act(menu, Directive("u", "", "choose_upgrade", {"option": 2}, 60, 1.0))
    assert release[7] < 0 and release[6] < 0  # a neutral tick between two presses
    submit = follower.act(menu, Directive("f", "", "flee", None, 60, 1.0))
    assert submit[6] > 0 and submit[7] < 0  # no option chosen: submit takes the default
    env.close()
    dict_env = megabonk(sim.port, action_type="dict")
    action = make_follower(dict_env).act(view_of(east), Directive("run", "", "flee", None, 60, 1.0))
    assert dict_env.action_space.contains(action) and action["move"][0] < -0.5
    dict_env.close()


def test_choose_upgrade_clicks_the_option_the_directive_names(sim: BonkLinkSim) -> None:
    env = megabonk(sim.port)
    agent = make_think_agent(env, model_path="oracle")
    follower = make_follower(env)
    obs, info = env.reset()
    agent.reset(obs, info)
    for _ in range(6000):  # play until a level-up menu opens
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        assert not (terminated or truncated)
        if info["menu"] == LEVEL_UP:
            break
    options = list(info["options"])
    assert info["menu"] == LEVEL_UP and len(options) == 3
    index = next(i for i in (2, 1) if options[i] != "Heal 40%")  # not 0: a click, not a submit
    game = sim.game
    before = {name: float(getattr(game, name)) for name in set(EFFECTS.values())}
    pick = Directive("upgrade", "", "choose_upgrade", {"option": index}, 60, 1.0)
    for step in range(4):
        obs, _, _, _, info = env.step(follower.act(view_of(info, step), pick))
        if info["menu"] == "Gameplay":
            break
    assert info["menu"] == "Gameplay"
    after = {name: float(getattr(game, name)) for name in before}
    changed = {name for name in before if after[name] != before[name]} - {"health"}
    assert changed == {EFFECTS[options[index]]} - {"health"}
    agent.close()
    env.close()


# ---------------------------------------------------------------------- oracle and PauseToThink
@pytest.mark.slow
def test_pause_to_think_with_the_oracle_plays_megabonk_episodes(
    sim: BonkLinkSim, tmp_path: Path
) -> None:
    inner = gym.wrappers.TimeLimit(megabonk(sim.port), max_episode_steps=500)
    env = PauseToThink(inner, engine="oracle", mode="pause", log_dir=tmp_path / "log")
    adapter = env.adapter
    assert isinstance(adapter, MegabonkAdapter)
    follower = make_follower(env)
    actions, menus, calls = set(), 0, 0
    for episode in range(3):
        obs, info = env.reset()
        follower.reset(episode)
        for step in range(1000):
            assert env.observation_space.contains(obs)
            view = GameView.capture(env, info, step, obs)
            asked = info["think"]["calls"] > calls  # a new directive, about this very view
            calls = info["think"]["calls"]
            valid_for(adapter, info["directive"], view if asked else None)
            actions.add(info["directive"]["action"])
            action = follower.act(view, Directive(**info["directive"]))
            assert env.action_space.contains(action)
            menus += info["menu"] == LEVEL_UP
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert truncated and not terminated  # the time limit, alive
    think = info["think"]
    assert think["calls"] >= 10 and think["fallbacks"] == 0 and think["last_error"] is None
    assert {"attack", "choose_upgrade"} <= actions and menus >= 1
    assert info["level"] >= 3  # the level-up menus were answered
    env.close()
    records = read_decisions(tmp_path / "log")
    assert len(records) == think["calls"] and all(r["state"]["max_hp"] > 0 for r in records)
    assert any(r["trigger"] == "menu" for r in records)


@pytest.mark.llm
def test_pause_to_think_with_a_tiny_vision_gguf_plays_megabonk(
    sim: BonkLinkSim, tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    env = PauseToThink(
        megabonk(sim.port, frame_wait=1.0),
        engine="llama_cpp",
        model_path=tiny[0],
        mmproj_path=tiny[1],
        timeout_s=60,
        think_every=15,
        cooldown_steps=15,
        log_dir=tmp_path / "log",
    )
    adapter = env.adapter
    assert isinstance(adapter, MegabonkAdapter)
    follower = make_follower(env)
    obs, info = env.reset()
    calls = 0
    for step in range(45):
        view = GameView.capture(env, info, step, obs)
        asked, calls = info["think"]["calls"] > calls, info["think"]["calls"]
        valid_for(adapter, info["directive"], view if asked else None)
        action = follower.act(view, Directive(**info["directive"]))
        assert env.action_space.contains(action)
        obs, _, terminated, truncated, info = env.step(action)
        assert not (terminated or truncated)
    think = info["think"]
    env.close()
    assert think["calls"] >= 3 and think["fallback_reasons"].get("timeout", 0) == 0
    records = read_decisions(tmp_path / "log")
    assert all(r["image_sent"] for r in records)
    assert any(r["fallback"] is None and r["directive"]["source"] == "model" for r in records)
    assert "You are at world x=" in records[0]["user"] and records[0]["state"]["max_hp"] == 100


def survival(seed: int, kind: str, limit: int) -> tuple[int, bool]:
    """Steps survived (up to `limit`) on a fresh sim with `seed`, and whether the run ended."""
    server = BonkLinkSim(port=0, mode="lockstep", seed=seed, jpeg_hz=0)
    port = server.start()
    env = megabonk(port)
    try:
        obs, info = env.reset()
        env.action_space.seed(seed)
        agent = make_think_agent(env, model_path="oracle") if kind == "think" else None
        if agent is not None:
            agent.reset(obs, info)
        for step in range(1, limit + 1):
            action = agent.act(obs, info) if agent is not None else env.action_space.sample()
            obs, _, terminated, truncated, info = env.step(action)
            assert not truncated
            if terminated:
                return step, True
        if agent is not None:
            agent.close()
        return limit, False
    finally:
        env.close()
        server.stop()


def test_oracle_and_follower_outlive_a_random_agent_on_the_same_seeds() -> None:
    limit = 5000  # ticks: 83 s of game time
    for seed in (0, 1, 2):
        random_steps, random_died = survival(seed, "random", limit)
        think_steps, think_died = survival(seed, "think", limit)
        assert random_died and random_steps < limit, (seed, random_steps)
        assert not think_died and think_steps == limit, (seed, think_steps)


def test_metabonk_play_megabonk_with_the_think_agent(sim: BonkLinkSim) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(
        app,
        [
            "play",
            "MetaBonk/Megabonk-v0",
            "--agent",
            "think",
            "--model",
            "oracle",
            "--episodes",
            "2",
            "--max-steps",
            "150",
            "--set",
            f"base_port={sim.port}",
        ],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    assert result.output.count("time limit") == 2 and "150" in result.output
    assert sim.stats.actions >= 2 * 150 * 4  # frameskip 4: four ticks a step
    assert time.monotonic() - started < 300


def test_oracle_strategist_answers_at_once_for_megabonk() -> None:
    adapter = MegabonkAdapter()
    oracle = OracleStrategist(adapter)
    quiet = oracle.request(view_of(gameplay_info()), [], "start").result().directive
    assert quiet.action == "wander" and quiet.source == "oracle"
    crowd = gameplay_info(enemies=enemies_at(*[(5.0 + d, -3.0) for d in (1, -1, 0.5, -0.5)]))
    assert oracle.request(view_of(crowd), [], "hp_drop").result().directive.action == "flee"
    menu = view_of(gameplay_info(menu=LEVEL_UP, options=["Move Speed +10%", "Projectiles +1"]))
    pick = oracle.request(menu, [], "menu").result().directive
    assert pick.action == "choose_upgrade" and pick.option == 1
    adapter.check(pick, menu)
