"""DreamerV3 through sheeprl (`metabonk train dreamer`, issue 17): a tiny run for real through the
CLI, its run directory and checkpoints (readable with `weights_only=True`), `--resume`, and the
refusals (a used directory, a checkpoint that would need unpickling, actions that are not Discrete)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import sheeprl  # noqa: E402,F401  (the world extra; CI installs it: a missing one fails)
import torch
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

QUEST = "MetaBonk/BonkQuest-v0"
TINY = [
    "--downscale", "4", "--learning-starts", "64", "--batch-size", "2", "--sequence-length", "16",
    "--replay-ratio", "0.1", "--checkpoint-every", "100", "--log-every", "50",
    "--env-kwarg", "max_episode_steps=60",  # episodes end within the run: game scalars
]  # fmt: skip
runner = CliRunner()


@pytest.fixture(scope="module")
def dreamer_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("dreamer") / "run"
    result = runner.invoke(
        app, ["train", "dreamer", QUEST, "--out", str(run), "--steps", "200", *TINY]
    )
    assert result.exit_code == 0, result.output
    return run


def test_a_tiny_dreamer_trains_and_checkpoints(dreamer_run: Path) -> None:
    config = (dreamer_run / "config.yaml").read_text()
    assert "dreamer_v3" in config and QUEST in config
    state = json.loads((dreamer_run / "run.json").read_text())
    assert state["status"] == "finished" and state["num_timesteps"] == 200
    checkpoints = sorted(p.name for p in (dreamer_run / "sheeprl" / "checkpoint").iterdir())
    assert checkpoints == ["ckpt_100_0.ckpt", "ckpt_200_0.ckpt"]
    assert list((dreamer_run / "sheeprl").glob("events.out.tfevents.*")), "TensorBoard events"
    # tensors and plain values only: no replay buffer or other pickled object inside
    ckpt = torch.load(dreamer_run / "sheeprl" / "checkpoint" / "ckpt_200_0.ckpt", weights_only=True)
    assert {"world_model", "actor", "critic"} <= set(ckpt) and "rb" not in ckpt
    assert any(torch.is_tensor(v) and v.abs().sum() > 0 for v in ckpt["actor"].values())
    # `train ppo`'s episode and game scalars, in `train ppo`'s folder
    scalars = _scalars(dreamer_run / "tensorboard")
    assert [s for s, _ in scalars["episode/length_mean"]] == [60, 120, 180]
    assert {v for _, v in scalars["episode/length_mean"]} == {60.0}
    assert "episode/return_mean" in scalars and "game/rooms_visited" in scalars
    assert scalars["episode/count"][-1] == (180, 3.0)


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_resume_continues_from_the_newest_checkpoint(dreamer_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(dreamer_run, run)
    before = torch.load(run / "sheeprl" / "checkpoint" / "ckpt_200_0.ckpt", weights_only=True)
    result = runner.invoke(
        app, ["train", "dreamer", QUEST, "--out", str(run), "--resume", "--steps", "300"]
    )
    assert result.exit_code == 0, result.output
    assert "resuming" in result.output and "step 200" in result.output
    after = torch.load(run / "sheeprl" / "checkpoint" / "ckpt_300_0.ckpt", weights_only=True)
    assert after["iter_num"] > before["iter_num"]
    assert json.loads((run / "run.json").read_text())["num_timesteps"] == 300
    steps = [s for s, _ in _scalars(run / "tensorboard")["episode/length_mean"]]
    assert steps[:3] == [60, 120, 180] and steps[3] > 200  # the curves continue after step 200


def test_the_trained_policy_plays_the_env(dreamer_run: Path) -> None:
    from metabonk_gym.worldmodel.dreamer import DreamerPolicy, evaluate_dreamer

    result = evaluate_dreamer(dreamer_run, episodes=2, max_steps=30)
    assert result["checkpoint_steps"] == 200 and result["mean_length"] == 30
    policy = DreamerPolicy(dreamer_run)
    assert policy.n_actions == 6
    frame = np.zeros((40, 60, 3), np.uint8)
    assert policy.frame(frame).shape == (3, 64, 64)
    actions = {policy(frame) for _ in range(5)}
    assert actions <= set(range(6))


def test_metabonk_eval_and_play_load_a_dreamer_run(dreamer_run: Path, tmp_path: Path) -> None:
    """`metabonk eval RUN_DIR` and `play --agent RUN_DIR` take a Dreamer run as they take a
    model zip; another game's env is refused with one line."""
    report = tmp_path / "report.json"
    result = runner.invoke(
        app,
        [
            "eval",
            QUEST,
            str(dreamer_run),
            "--episodes",
            "2",
            "--max-steps",
            "15",
            "--out",
            str(report),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert data["n_episodes"] == 2 and [e["length"] for e in data["episodes"]] == [15, 15]
    assert data["run"]["kind"] == "dreamer"  # agents.runs.find_run (issue 22)
    ladder = runner.invoke(
        app,
        ["ladder", QUEST, "--agents", f"random,{dreamer_run}", "--episodes", "1"]
        + ["--max-steps", "10", "--no-video", "--out", str(tmp_path / "ladder")],
    )
    assert ladder.exit_code == 0, ladder.output
    cells = json.loads((tmp_path / "ladder" / "ladder.json").read_text())["cells"]
    assert {c["kind"] for c in cells} == {"random", "dreamer"}
    other = runner.invoke(
        app, ["eval", "MetaBonk/BonkArena-v0", str(dreamer_run), "--episodes", "1"]
    )
    assert other.exit_code == 2 and "was trained on MetaBonk/BonkQuest-v0" in other.output
    played = runner.invoke(
        app,
        ["play", QUEST, "--agent", str(dreamer_run), "--episodes", "1", "--max-steps", "10"],
    )
    assert played.exit_code == 0, played.output


def test_bad_input_is_refused_with_one_line(dreamer_run: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["train", "dreamer", QUEST, "--out", str(dreamer_run), "--steps", "10"]
    )
    assert result.exit_code == 2 and "already holds a run" in result.output
    # a checkpoint that would unpickle an object is refused before sheeprl sees it
    run = tmp_path / "run"
    shutil.copytree(dreamer_run, run)
    newest = run / "sheeprl" / "checkpoint" / "ckpt_200_0.ckpt"
    state = torch.load(newest, weights_only=True)
    state["rb"] = Path("/tmp")  # any object that is not a tensor or a plain value
    torch.save(state, newest)
    result = runner.invoke(app, ["train", "dreamer", QUEST, "--out", str(run), "--resume"])
    assert result.exit_code == 2 and "would unpickle code, so it is refused" in result.output
    other = runner.invoke(
        app,
        [
            "train",
            "dreamer",
            QUEST,
            "--out",
            str(tmp_path / "x"),
            "--env-kwarg",
            "action_space=multibinary",
        ],
    )
    assert other.exit_code == 2 and "Dreamer here needs Discrete" in other.output
    assert not (tmp_path / "x").exists()
