"""The `metabonk` training commands end to end: train ppo/bc/config, curriculum, eval, record, play."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.rundir import RunDir

QUEST = "MetaBonk/BonkQuest-v0"
FAST = [
    "--set",
    "n_steps=32",
    "--set",
    "batch_size=32",
    "--set",
    "n_epochs=1",
    "--set",
    "downscale=8",
    "--set",
    "frame_stack=2",
    "--set",
    "features_dim=32",
    "--set",
    "max_episode_steps=30",
]
runner = CliRunner()


def invoke(*args: str) -> object:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.mark.parametrize(
    "command",
    [
        ["train", "ppo"],
        ["train", "bc"],
        ["train", "config"],
        ["curriculum"],
        ["eval"],
        ["play"],
        ["record"],
    ],
)
def test_help(command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0 and "Usage" in result.output


def test_train_ppo_resume_and_errors(tmp_path: Path) -> None:
    run_dir = str(tmp_path / "run")
    first = invoke(
        "train",
        "ppo",
        QUEST,
        "--run-dir",
        run_dir,
        "--total-steps",
        "64",
        "--n-envs",
        "2",
        "--checkpoint-every",
        "64",
        "--video-every",
        "0",
        "--no-progress",
        "--json",
        *FAST,
    )
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["num_timesteps"] == 64
    again = invoke(
        "train",
        "ppo",
        QUEST,
        "--run-dir",
        run_dir,
        "--resume",
        "--total-steps",
        "128",
        "--no-progress",
        "--json",
    )
    assert again.exit_code == 0 and json.loads(again.output)["num_timesteps"] == 128

    before = sorted(p.name for p in Path(run_dir).rglob("*"))
    bad = invoke("train", "ppo", QUEST, "--run-dir", run_dir, "--set", "gama=0.9")
    assert bad.exit_code == 2 and "did you mean 'gamma'" in bad.output
    exists = invoke("train", "ppo", QUEST, "--run-dir", run_dir, "--no-progress")
    assert exists.exit_code == 2 and "pass --resume" in exists.output
    unknown = invoke("train", "ppo", "MetaBonk/Nope-v0", "--run-dir", str(tmp_path / "x"))
    assert unknown.exit_code == 2 and "unknown env id" in unknown.output
    assert (
        sorted(p.name for p in Path(run_dir).rglob("*")) == before and not (tmp_path / "x").exists()
    )

    shown = invoke("train", "config", QUEST, "--set", "n_envs=3")
    assert shown.exit_code == 0 and "n_envs: 3" in shown.output and "reward: room1" in shown.output


def test_record_bc_eval_commands(tmp_path: Path) -> None:
    dataset = f"test/cli-{uuid.uuid4().hex[:8]}-v0"
    recorded = invoke(
        "record",
        QUEST,
        "--dataset",
        dataset,
        "--episodes",
        "2",
        "--downscale",
        "8",
        "--set",
        "frame_stack=2",
    )
    assert recorded.exit_code == 0, recorded.output
    assert "2 episodes" in recorded.output
    bc_dir = str(tmp_path / "bc")
    bc = invoke(
        "train",
        "bc",
        QUEST,
        "--dataset",
        dataset,
        "--run-dir",
        bc_dir,
        "--epochs",
        "2",
        "--no-progress",
        "--json",
        *FAST,
    )
    assert bc.exit_code == 0, bc.output
    report_path = tmp_path / "report.json"
    ev = invoke(
        "eval",
        QUEST,
        str(Path(bc_dir) / "model.zip"),
        "--episodes",
        "2",
        "--seed",
        "5",
        "--out",
        str(report_path),
        "--video",
        str(tmp_path / "videos"),
        "--ladder",
        str(tmp_path / "l.json"),
    )
    assert ev.exit_code == 0, ev.output
    report = json.loads(report_path.read_text())
    assert [e["seed"] for e in report["episodes"]] == [5, 6] and "hp" in report["episodes"][0][
        "variables"
    ]
    assert (tmp_path / "videos" / "best.mp4").is_file() and "ladder" in ev.output
    missing = invoke("eval", QUEST, str(tmp_path / "nope.zip"))
    assert missing.exit_code == 2 and "model file not found" in missing.output
    no_data = invoke(
        "train", "bc", QUEST, "--dataset", "test/none-v0", "--run-dir", str(tmp_path / "b2")
    )
    assert no_data.exit_code == 2 and "not found" in no_data.output


def test_curriculum_and_play_commands(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "stages:\n  - {name: one, state: room1, promote: {mean_return: -99, window: 1}, max_steps: 64}\n"
    )
    result = invoke(
        "curriculum",
        QUEST,
        "--plan",
        str(plan),
        "--run-dir",
        str(tmp_path / "c"),
        "--n-envs",
        "2",
        "--no-progress",
        *FAST,
        "--set",
        "video_every=0",
        "--set",
        "checkpoint_every=0",
    )
    assert result.exit_code == 0, result.output
    assert RunDir(tmp_path / "c").read_state()["stages"][0]["promoted"] is True
    missing = invoke(
        "curriculum", QUEST, "--plan", str(tmp_path / "none.yaml"), "--run-dir", str(tmp_path / "d")
    )
    assert missing.exit_code == 2 and "plan file not found" in missing.output

    played = invoke("play", QUEST, "--agent", "scripted", "--no-window", "--episodes", "2")
    assert played.exit_code == 0 and played.output.count("True") >= 2
    bad_agent = invoke("play", QUEST, "--agent", "wizard", "--no-window")
    assert bad_agent.exit_code == 2 and "unknown agent 'wizard'" in bad_agent.output


def test_ctrl_c_in_a_real_process_saves_and_exits_130(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "metabonk_gym.cli.main",
        "train",
        "ppo",
        QUEST,
        "--run-dir",
        str(run_dir),
        "--total-steps",
        "100000",
        "--n-envs",
        "2",
        "--video-every",
        "0",
        "--no-progress",
        *FAST,
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while not list((run_dir / "tensorboard").glob("events.*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # some rollouts in
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
        out, _ = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"no exit 90 s after Ctrl-C:\n{out.decode()}") from None
    assert proc.returncode == 130, out.decode()
    checkpoints = RunDir(run_dir).list_checkpoints()
    assert checkpoints and (run_dir / "model.zip").is_file()
    assert RunDir(run_dir).read_state()["status"] == "interrupted"


def test_predictor_is_mounted_when_observe_provides_it() -> None:
    import importlib
    import importlib.util

    spec = importlib.util.find_spec("metabonk_gym.cli.observe")
    provided = spec is not None and hasattr(
        importlib.import_module("metabonk_gym.cli.observe"), "predictor_command"
    )
    result = invoke("train", "--help")
    assert ("predictor" in result.output) == provided
    assert "learning" in invoke("bench", "--help").output
