"""Run directories as agents (issue 22, item 6): tiny runs of `train ppo` (with a `wrappers:`
stack), `train bc`, `curriculum` and a run stopped before its `model.zip` load from their
directories in `eval`, `play`, `record` and `ladder`, with the env options and wrapper stack they
trained with; `--goal` says what `won` scores; bad input is one line and writes nothing. RLlib,
PBT and Dreamer runs are trained by their own test modules (test_rllib.py, test_tune_pbt.py,
test_dreamer.py), which check `find_run` and `eval RUN_DIR` on them too."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.agents.record import play, record
from metabonk_gym.agents.runs import agent_path, find_run
from metabonk_gym.experts.base import AgentError
from metabonk_gym.training.bc import train_bc
from metabonk_gym.training.curriculum import run_curriculum
from metabonk_gym.training.ppo import train_ppo

QUEST = "MetaBonk/BonkQuest-v0"
ARENA = "MetaBonk/BonkArena-v0"
#: Tiny settings: 20x30 frames, 2 envs, short episodes.
SMALL = {
    "n_envs": 2,
    "n_steps": 16,
    "batch_size": 32,
    "n_epochs": 1,
    "downscale": 8,
    "frame_stack": 2,
    "features_dim": 32,
    "max_episode_steps": 30,
    "checkpoint_every": 32,
    "video_every": 0,
}
STACK = [{"name": "button_history", "n": 3}]
runner = CliRunner()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny run of each SB3-side trainer, and a PPO run without its final model.zip."""
    root = tmp_path_factory.mktemp("runs")
    out: dict[str, Path] = {}
    out["ppo"] = root / "ppo"
    train_ppo(QUEST, out["ppo"], overrides={**SMALL, "total_steps": 64, "wrappers": STACK})
    out["stopped"] = root / "stopped"
    shutil.copytree(out["ppo"], out["stopped"])
    (out["stopped"] / "model.zip").unlink()
    dataset = f"test/runs-{uuid.uuid4().hex[:8]}-v0"
    with pytest.MonkeyPatch.context() as mp:  # never ~/.minari (as conftest's autouse fixture)
        mp.setenv("MINARI_DATASETS_PATH", str(root / "minari"))
        record(QUEST, "scripted", dataset, episodes=2, seed=1, overrides=SMALL)
        out["bc"] = root / "bc"
        train_bc(QUEST, dataset, out["bc"], overrides={**SMALL, "bc_epochs": 2})
    plan = root / "plan.yaml"
    plan.write_text(
        "stages:\n  - name: only\n    state: room1\n    promote: {win_rate: 1.0, window: 50}\n"
        "    max_steps: 32\n"
    )
    out["curriculum"] = root / "curriculum"
    run_curriculum(QUEST, plan, out["curriculum"], overrides={**SMALL, "checkpoint_every": 0})
    return out


def test_each_run_kind_is_recognised_from_its_files(runs: dict[str, Path]) -> None:
    kinds = {name: find_run(path).kind for name, path in runs.items()}
    assert kinds == {"ppo": "ppo", "stopped": "ppo", "bc": "bc", "curriculum": "curriculum"}
    assert find_run(runs["ppo"]).weights == runs["ppo"] / "model.zip"
    # a run stopped before its model.zip: its newest checkpoint
    stopped = find_run(runs["stopped"])
    assert stopped.weights.parent.name == "checkpoints" and stopped.weights.suffix == ".zip"
    assert find_run(runs["ppo"]).to_dict()["wrappers"] == "button_history(n=3)"
    assert find_run(runs["bc"]).to_dict()["wrappers"] == "none"
    assert all(find_run(p).env_id == QUEST for p in runs.values())
    assert agent_path("scripted") == "scripted"


@pytest.mark.parametrize("kind", ["ppo", "stopped", "bc", "curriculum"])
def test_every_run_evaluates_plays_and_records_from_its_directory(
    runs: dict[str, Path], kind: str, tmp_path: Path
) -> None:
    run = runs[kind]
    report = evaluate(QUEST, str(run), episodes=1, seed=2, overrides={"max_episode_steps": 12})
    assert report["agent"] == str(run) and report["run"]["kind"] == find_run(run).kind
    assert report["episodes"][0]["length"] > 0
    played = play(QUEST, str(run), episodes=1, seed=2, overrides={"max_episode_steps": 8})
    assert played.episodes[0].length == 8
    dataset = f"test/from-{kind}-{uuid.uuid4().hex[:8]}-v0"
    cli = runner.invoke(
        app,
        ["record", QUEST, "--agent", str(run), "--dataset", dataset, "--episodes", "1"]
        + ["--max-steps", "6"],
    )
    assert cli.exit_code == 0, cli.output


def test_eval_of_a_run_directory_rebuilds_its_env_and_wrapper_stack(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "report.json"
    cli = runner.invoke(
        app,
        ["eval", QUEST, str(runs["ppo"]), "--episodes", "2", "--max-steps", "10"]
        + ["--out", str(out)],
    )
    assert cli.exit_code == 0, cli.output
    report = json.loads(out.read_text())
    # the run's frames (downscale 8, frame stack 2) and its wrapper stack, not the env defaults
    assert report["run"]["wrappers"] == "button_history(n=3)"
    assert [e["length"] for e in report["episodes"]] == [10, 10]
    assert "won scores --goal config" in cli.output
    config = tmp_path / "other-stack.yaml"
    config.write_text("wrappers: [{name: button_history, n: 5}]\n")
    other = runner.invoke(
        app,
        ["eval", QUEST, str(runs["ppo"]), "--episodes", "1"]
        + ["--config", str(config), "--out", str(tmp_path / "no.json")],
    )
    assert other.exit_code == 2 and len(other.output.strip().splitlines()) == 1, other.output
    assert "button_history" in other.output and not (tmp_path / "no.json").exists()


def test_goal_says_what_won_scores(tmp_path: Path) -> None:
    """`--goal config` scores BonkQuest's room1 goal (the scripted expert leaves room 1);
    `--goal game` the game's own win, which no episode reaches in 60 steps."""
    config = evaluate(QUEST, "scripted", episodes=2, seed=0, goal="config")
    assert config["scoring"]["goal"] == "config" and config["win_rate"] == 1.0
    assert "rooms_visited" in config["scoring"]["won_means"]
    game = evaluate(
        QUEST, "scripted", episodes=2, seed=0, goal="game", overrides={"max_episode_steps": 60}
    )
    assert game["scoring"]["goal"] == "game" and game["goal"] is None
    assert game["win_rate"] == 0.0 and game["scoring"]["won_means"].startswith("the game's own")
    assert [e["length"] for e in game["episodes"]] == [60, 60]  # played on past room 1
    cli = runner.invoke(app, ["eval", QUEST, "random", "--episodes", "1", "--goal", "nope"])
    assert cli.exit_code == 2 and "--goal must be one of config, game" in cli.output


def test_bad_run_directories_are_one_line_errors(runs: dict[str, Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AgentError, match="not a metabonk run directory"):
        find_run(empty)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "config.yaml").write_text("state: room1\n")
    with pytest.raises(AgentError, match="without a model yet"):
        find_run(fresh)
    for args in (
        ["eval", ARENA, str(runs["bc"]), "--episodes", "1"],  # a run of another game
        ["eval", QUEST, str(empty), "--episodes", "1"],
        ["play", ARENA, "--agent", str(runs["curriculum"]), "--episodes", "1"],
    ):
        cli = runner.invoke(app, args)
        assert cli.exit_code == 2 and len(cli.output.strip().splitlines()) == 1, cli.output
    cli = runner.invoke(app, ["eval", ARENA, str(runs["bc"]), "--episodes", "1"])
    assert f"trained on {QUEST}, not {ARENA}" in cli.output


def test_a_ladder_of_every_run_kind_plays_the_same_seeds(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """Run directories of every SB3-side trainer and the oracle + follower in one ladder, two
    cells at a time (one process each); every cell meets the same seeds and start."""
    from metabonk_gym.agents.ladder import parse_agents, run_ladder

    agents = [str(runs[k]) for k in ("ppo", "stopped", "bc", "curriculum")] + ["oracle"]
    ladder = run_ladder(
        [QUEST],
        parse_agents(",".join(agents)),
        tmp_path / "ladder",
        episodes=2,
        seed=5,
        overrides={"max_episode_steps": 15},
        videos=False,
        n_envs=2,
    )
    kinds = {c["agent"]: c["kind"] for c in ladder["cells"]}
    assert kinds == {
        str(runs["ppo"]): "ppo",
        str(runs["stopped"]): "ppo",
        str(runs["bc"]): "bc",
        str(runs["curriculum"]): "curriculum",
        "think:oracle": "think",
    }
    assert all(c["seeds"] == [5, 6] and c["state"] == "room1" for c in ladder["cells"])
    assert sorted(c["rank"] for c in ladder["cells"]) == [1, 2, 3, 4, 5]
    assert (tmp_path / "ladder" / "ladder.html").is_file()


def test_ladder_refuses_runs_of_another_game_and_other_stacks(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "ladder"
    for extra, message in (
        ([ARENA, "--agents", f"random,{runs['bc']}"], f"trained on {QUEST}, not {ARENA}"),
        (
            [QUEST, "--agents", f"random,{runs['ppo']}", "--set", "wrappers=[text_map]"],
            "was trained with wrappers button_history(n=3)",
        ),
    ):
        cli = runner.invoke(app, ["ladder", *extra, "--episodes", "1", "--out", str(out)])
        assert cli.exit_code == 2, cli.output
        assert len(cli.output.strip().splitlines()) == 1 and message in cli.output, cli.output
        assert not out.exists()
