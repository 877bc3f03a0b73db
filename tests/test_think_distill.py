"""Decision logs -> `metabonk distill` -> a distilled strategist; TensorBoard scalars; the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.directive import Directive
from metabonk_gym.think.distill import DistilledStrategist, distill
from metabonk_gym.think.follower import make_follower
from metabonk_gym.think.games import adapter_for_name
from metabonk_gym.think.log import DecisionLogNotFoundError, read_decisions
from metabonk_gym.think.metrics import ThinkStats, log_think_scalars
from metabonk_gym.think.pause_to_think import PauseToThink
from metabonk_gym.think.view import GameView


@pytest.fixture(scope="module")
def oracle_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two BonkQuest episodes of oracle directives (thinking every 4 steps), logged with frames."""
    import gymnasium as gym

    folder = tmp_path_factory.mktemp("log")
    env = PauseToThink(
        gym.make("MetaBonk/BonkQuest-v0"), engine="oracle", log_dir=folder, think_every=4
    )
    try:
        follower = make_follower(env)
        for seed in (0, 1):
            obs, info = env.reset(seed=seed)
            for i in range(400):
                action = follower.act(
                    GameView.capture(env, info, i, obs), Directive(**info["directive"])
                )
                obs, _, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
    finally:
        env.close()
    return folder


def test_distilled_policy_is_trained_saved_and_runnable(
    make_env, oracle_log: Path, tmp_path: Path
) -> None:
    records = read_decisions(oracle_log)
    assert len(records) > 50 and all(r["outcome"] is not None for r in records)
    figures = distill(oracle_log, tmp_path / "policy.pt", epochs=25)
    assert figures["samples"] == len(records) and figures["split"] == "val"
    assert figures["action_accuracy"] > 0.5  # 5 oracle actions; chance is far lower
    env = make_env("MetaBonk/BonkQuest-v0")
    agent = make_think_agent(env, model_path=tmp_path / "policy.pt")
    assert isinstance(agent.director.strategist, DistilledStrategist)
    obs, info = env.reset(seed=3)
    agent.reset(obs, info)
    for _ in range(30):
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
    think = agent.info()
    assert think["calls"] >= 1 and agent.directive.source in ("distilled", "fallback")
    agent.close()
    with pytest.raises(Exception, match="was distilled for BonkQuest, not BonkArena"):
        DistilledStrategist(tmp_path / "policy.pt", adapter_for_name("BonkArena"))


def test_distill_command_writes_a_policy(oracle_log: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["distill", str(oracle_log), "--out", str(tmp_path / "p.pt"), "--epochs", "2"]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "p.pt").is_file() and "action_accuracy" in result.output
    # the distilled net (with the follower) as a ladder agent (issue 22): think:POLICY.pt
    out = tmp_path / "ladder"
    ladder = runner.invoke(
        app,
        ["ladder", "MetaBonk/BonkQuest-v0", "--agents", f"random,think:{tmp_path / 'p.pt'}"]
        + ["--episodes", "1", "--max-steps", "10", "--no-video", "--out", str(out)],
    )
    assert ladder.exit_code == 0, ladder.output
    cells = json.loads((out / "ladder.json").read_text())["cells"]
    assert sorted(c["kind"] for c in cells) == ["random", "think"]


def test_distill_without_a_log_is_a_one_line_error(tmp_path: Path) -> None:
    """A folder without decisions.jsonl: the library raises a MetabonkError naming the file and
    the fix; the command prints it on one line and exits with 2, no traceback."""
    with pytest.raises(DecisionLogNotFoundError, match="no decision log at .*decisions.jsonl"):
        read_decisions(tmp_path)
    result = CliRunner().invoke(app, ["distill", str(tmp_path / "empty")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines == [
        f"error: no decision log at {tmp_path / 'empty' / 'decisions.jsonl'}; pass the log_dir= "
        "folder of a PauseToThink run, or record one with PauseToThink(env, ..., log_dir=FOLDER)"
    ]
    assert not isinstance(result.exception, FileNotFoundError)


def test_tensorboard_scalars_are_written(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    stats = ThinkStats()
    for latency, category in ((0.1, None), (0.2, None), (0.9, "timeout"), (0.3, "invalid")):
        stats.record_call(latency, category)
    stats.record_end("done")
    stats.record_end("expired")
    scalars = log_think_scalars(tmp_path / "tb", stats, step=7)
    assert scalars["think/fallback_rate"] == 0.5 and scalars["think/directive_success_rate"] == 0.5
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {
        "think/calls",
        "think/latency_p50_s",
        "think/latency_p95_s",
        "think/fallback_rate",
        "think/directive_success_rate",
    } <= tags
    assert (
        events.Scalars("think/calls")[0].step == 7 and events.Scalars("think/calls")[0].value == 4.0
    )
    # the info["think"] dict of any env works as the source too
    assert log_think_scalars(tmp_path / "tb2", stats.as_info(), step=1) == scalars


def test_cli_commands(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["serve-vlm", str(tmp_path / "missing.gguf")])
    assert result.exit_code == 2 and "model file not found" in result.output
    result = runner.invoke(
        app, ["bench", "think", "--seeds", "1", "--calls", "0", "--out", str(tmp_path / "b.json")]
    )
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "b.json").read_text())
    assert figures["oracle_win_rate"] == 1.0
