"""The rule baselines: `first` answers option 1, `random` a seeded random
option; as agents `think:first` and `think:random` they play in a real `metabonk ladder` on
BonkQuest's riddle quest beside the oracle, and `bench think-model` asks them the model's
questions. On the riddle quest's first seeds the oracle wins every game and both rules none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.agents.registry import check_agent_spec, think_options
from metabonk_gym.bench.think_model import model_figures
from metabonk_gym.think.baselines import (
    FirstOptionStrategist,
    RandomOptionStrategist,
    RuleEngine,
)
from metabonk_gym.think.engines import EngineError, ThinkRequest
from metabonk_gym.think.games import GameAdapter, adapter_for
from metabonk_gym.think.view import GameView

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


def test_first_answers_option_one_and_random_repeats_with_its_seed(make_env) -> None:
    env = make_env(state="riddles_room3")
    env.reset(seed=1)
    adapter = adapter_for(env)
    view = GameView.capture(env, None, 0)
    options = adapter.options(view)
    assert len(options) >= 5  # four marks, a chest, exploring
    first = FirstOptionStrategist(adapter).request(view, [], "start").result()
    assert first.directive == options[0] and first.raw == "1"
    picks = {}
    for seed in (0, 1):
        rule = RandomOptionStrategist(adapter, seed=seed)
        picks[seed] = [str(rule.request(view, [], "start").result().raw) for _ in range(12)]
        again = RandomOptionStrategist(adapter, seed=seed)
        repeat = [str(again.request(view, [], "start").result().raw) for _ in range(12)]
        assert repeat == picks[seed]
    assert picks[0] != picks[1]
    assert {int(p) for p in picks[0] + picks[1]} <= set(range(1, len(options) + 1))


def test_a_game_without_options_gets_the_fallback() -> None:
    adapter = GameAdapter()
    view = GameView(game="Demo", step=0, frame_source=np.zeros((160, 240, 3), np.uint8), info={})
    result = FirstOptionStrategist(adapter).request(view, [], "start").result()
    assert result.category == "invalid" and result.directive.source == "fallback"
    with pytest.raises(EngineError, match="choice profile"):
        RuleEngine(FirstOptionStrategist(adapter)).complete(ThinkRequest("s", "u", {}), 0.0)


def test_the_rules_are_agents_without_a_file() -> None:
    assert think_options("think:first") == {"engine": "first"}
    assert think_options("think:random") == {"engine": "random"}
    assert think_options("think:fallback") == {"engine": "fallback"}
    assert check_agent_spec("think:random") == "think:random"


def test_think_first_and_random_run_in_the_ladder_beside_the_oracle(tmp_path: Path) -> None:
    out = tmp_path / "ladder"
    cli = runner.invoke(
        app,
        ["ladder", QUEST, "--agents", "oracle,think:first,think:random,think:fallback"]
        + ["--state", "riddles"]
        + ["--episodes", "3", "--max-steps", "600", "--no-video", "--out", str(out)],
    )
    assert cli.exit_code == 0, cli.output
    data = json.loads((out / "ladder.json").read_text())
    rates = {c["agent"]: c["win_rate"] for c in data["cells"]}
    assert rates == {
        "think:oracle": 1.0,
        "think:first": 0.0,
        "think:random": 0.0,
        "think:fallback": 0.0,  # the follower alone
    }
    for cell in data["cells"]:
        assert cell["state"] == "riddles" and cell["seeds"] == [0, 1, 2]
        assert cell["kind"] == "think"
    ranked = [c["agent"] for c in data["cells"]]
    assert ranked[0] == "think:oracle"


def test_bench_think_model_asks_a_rule_the_models_questions() -> None:
    figures = model_figures("first", episodes=1, state="riddles", first_seed=0)
    assert figures["model"] == "first" and figures["state"] == "riddles"
    assert figures["schema_valid"] == 1.0 and figures["timeouts"] == 0
    # the first rule is the first option: the two agreements are one figure
    assert figures["oracle_agreement"] == figures["first_option_agreement"]
    assert figures["oracle_agreement"] < 1.0  # on the riddle quest the first option misleads


def test_bench_think_play_puts_each_strategist_beside_the_others_in_the_record(
    tmp_path: Path,
) -> None:
    record = tmp_path / "think-model.json"
    common = ["--starts", "riddles", "--seeds", "2", "--max-steps", "600", "--figures", str(record)]
    for model in ("oracle", "first"):
        cli = runner.invoke(app, ["bench", "think-play", "--model", model, *common])
        assert cli.exit_code == 0, cli.output
    raw = json.loads(record.read_text())
    figures = {f["id"]: f for f in raw["figures"]}
    oracle, first = figures["play-riddles-oracle"], figures["play-riddles-first"]
    assert (oracle["value"], oracle["met"], oracle["target"]) == (1.0, True, ">= 0.95")
    assert (first["value"], first["met"], first["target"]) == (0.0, True, "<= 0.3")
    assert first["seeds"] == {"first": 0, "count": 2}
    assert first["command"].startswith("metabonk bench think-play --model first")
    # the rule's figure names the oracle's, measured before it, as its baseline
    assert first["text"].startswith(f"0/2 (oracle {oracle['short']}, random not measured")
    assert oracle["short"].startswith("2/2 (")


def test_bench_think_model_figures_of_a_rule_have_no_latency_target(tmp_path: Path) -> None:
    record = tmp_path / "think-model.json"
    cli = runner.invoke(
        app,
        ["bench", "think-model", "--model", "first", "--state", "riddles", "--episodes", "1"]
        + ["--figures", str(record)],
    )
    assert cli.exit_code == 0, cli.output
    (figure,) = json.loads(record.read_text())["figures"]
    assert figure["id"] == "agreement-riddles-first" and figure["target"] is None
    assert 0.0 < figure["value"] < 1.0 and figure["seeds"] == {"first": 100, "count": 1}
