"""`metabonk tune pbt`: Ray Tune population-based training of RLlib PPO (and of SB3 members, the
`train ppo` path, with a wrapper stack) on a real two-node Ray cluster on this machine: two
members, one exploit step, TensorBoard per member, and the best member's policy evaluated by
`metabonk eval` with the same stack; PBT file errors are one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
import yaml
from metabonk_gym.cli.main import app
from ray.cluster_utils import Cluster
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.rundir import read_model_metadata
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.pbt_sb3 import check_checkpoint_stack
from metabonk_gym.training.tune import PBTSpec, tune_pbt
from metabonk_gym.training.wrapstack import run_wrappers

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=2)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.mark.slow
def test_two_members_exploit_once_and_the_best_policy_evaluates(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = PBTSpec.from_dict(
        {
            "population_size": 2,
            "perturbation_interval": 128,
            "total_steps": 256,
            "mutations": {"learning_rate": [1e-4, 1e-3], "state": ["room1", "room2"]},
            "quantile_fraction": 0.5,
            "train": {
                "n_envs": 1,
                "n_steps": 64,
                "batch_size": 64,
                "n_epochs": 1,
                "max_episode_steps": 20,
                "video_every": 0,
            },
            "ray": {"num_env_runners": 0},
        }
    )
    run_dir = tmp_path / "pbt"
    result = tune_pbt(QUEST, run_dir, spec=spec)
    assert result.exploits >= 1
    assert len(result.members) == 2 and all(m["steps"] >= 256 for m in result.members)
    assert len({m["member"] for m in result.members}) == 2
    # each member's own TensorBoard folder, with the SB3 path's scalar names
    folders = sorted(p for p in (run_dir / "members").iterdir() if p.is_dir())
    assert len(folders) == 2
    for folder in folders:
        acc = EventAccumulator(str(folder))
        acc.Reload()
        assert {"episode/return_mean", "episode/win_rate", "time/total_timesteps"} <= set(
            acc.Tags()["scalars"]
        )
    best = run_dir / "best" / "model.zip"
    meta = read_model_metadata(best)
    assert meta["engine"] == "rllib" and meta["config"]["lr_schedule"] == "constant"
    assert json.loads((run_dir / "best" / "best.json").read_text())["member"] == result.best_member
    out = tmp_path / "report.json"
    cli = runner.invoke(app, ["eval", QUEST, str(best), "--episodes", "1", "--out", str(out)])
    assert cli.exit_code == 0, cli.output
    assert json.loads(out.read_text())["episodes"][0]["length"] > 0
    # the PBT run directory and its best/ folder load as agents too (issue 22)
    for folder in (run_dir, run_dir / "best"):
        cli = runner.invoke(app, ["eval", QUEST, str(folder), "--episodes", "1", "--out", str(out)])
        assert cli.exit_code == 0, cli.output
        run = json.loads(out.read_text())["run"]
        assert run["kind"] == "pbt" and run["weights"] == str(best)


#: The SB3 members' stack: VRAM tile tokens beside the frame, every key frame-stacked (2).
STACK = [{"name": "tile_tokens", "buckets": 64, "sprites": False}]


@pytest.mark.slow
def test_sb3_members_train_with_a_wrapper_stack_and_the_best_evaluates_with_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    spec = PBTSpec.from_dict(
        {
            "population_size": 2,
            "perturbation_interval": 128,
            "total_steps": 256,
            "mutations": {"learning_rate": [1e-4, 1e-3], "ent_coef": [0.0, 0.02]},
            "quantile_fraction": 0.5,
            "engine": "sb3",
            "train": {
                "n_envs": 1,
                "n_steps": 64,
                "batch_size": 64,
                "n_epochs": 1,
                "features_dim": 32,
                "frame_stack": 2,
                "max_episode_steps": 20,
                "video_every": 0,
                "wrappers": STACK,
            },
        }
    )
    run_dir = tmp_path / "pbt"
    result = tune_pbt(QUEST, run_dir, spec=spec)
    assert result.exploits >= 1  # a member continued from the other's checkpoint
    assert len(result.members) == 2 and all(m["steps"] >= 256 for m in result.members)
    assert json.loads((run_dir / "run.json").read_text())["engine"] == "sb3-pbt"
    # each member: its own run directory with the stack and its hyperparameters now
    folders = sorted(p for p in (run_dir / "members").iterdir() if p.is_dir())
    assert len(folders) == 2
    for folder in folders:
        assert run_wrappers(folder) == STACK
        config = yaml.safe_load((folder / "config.yaml").read_text())
        assert config["policy"] == "MultiInputPolicy" and config["frame_stack"] == 2
        acc = EventAccumulator(str(folder / "tensorboard"))
        acc.Reload()
        assert {"episode/return_mean", "train/learning_rate"} <= set(acc.Tags()["scalars"])
        # the rate it trained with last is its config's (after an exploit: the perturbed one)
        last = acc.Scalars("train/learning_rate")[-1].value
        assert last == pytest.approx(config["learning_rate"], rel=1e-5)
    rates = {m["member"]: m["hyperparameters"]["learning_rate"] for m in result.members}
    assert len(set(rates.values())) == 2 and set(rates) == {f.name for f in folders}
    # best/: the best member's policy and config, the stack recorded in both
    best = run_dir / "best"
    assert run_wrappers(best) == STACK
    meta = read_model_metadata(best / "model.zip")
    assert meta["config"]["wrappers"] == STACK and meta["config"]["policy"] == "MultiInputPolicy"
    assert meta["engine"] == "sb3-pbt" and meta["config"]["lr_schedule"] == "constant"
    best_rate = json.loads((best / "best.json").read_text())["hyperparameters"]["learning_rate"]
    assert yaml.safe_load((best / "config.yaml").read_text())["learning_rate"] == best_rate
    # eval and ladder of best/ rebuild the stack (Dict keys of tile tokens, stacked twice)
    out = tmp_path / "report.json"
    for folder in (run_dir, best):
        cli = runner.invoke(app, ["eval", QUEST, str(folder), "--episodes", "1", "--out", str(out)])
        assert cli.exit_code == 0, cli.output
        report = json.loads(out.read_text())
        assert report["run"]["kind"] == "pbt" and report["episodes"][0]["length"] > 0
        assert report["run"]["wrappers"].startswith("tile_tokens(")
    cli = runner.invoke(
        app,
        ["ladder", QUEST, "--agents", f"{best},random", "--episodes", "1",
         "--out", str(tmp_path / "ladder"), "--no-video", "--max-steps", "30"],
    )  # fmt: skip
    assert cli.exit_code == 0, cli.output
    cells = json.loads((tmp_path / "ladder" / "ladder.json").read_text())["cells"]
    assert {c["kind"] for c in cells} == {"pbt", "random"}
    # another stack for this policy, in eval or for a member continuing from it: one line
    with pytest.raises(ConfigError, match="was trained with wrappers tile_tokens") as info:
        other = {"wrappers": [{"name": "button_history", "n": 2}]}
        evaluate(QUEST, str(best), episodes=1, overrides=other, out=tmp_path / "x.json")
    assert "\n" not in str(info.value) and not (tmp_path / "x.json").exists()
    with pytest.raises(ConfigError, match="was trained with wrappers tile_tokens") as info:
        check_checkpoint_stack(best / "model.zip", [{"name": "button_history", "n": 2}])
    assert "\n" not in str(info.value)
    check_checkpoint_stack(best / "model.zip", STACK)  # its own stack passes


def test_a_bad_pbt_file_is_a_one_line_error(tmp_path: Path) -> None:
    pbt = tmp_path / "pbt.yaml"
    pbt.write_text("population_size: 2\nmutations:\n  learning_rat: [0.0001, 0.001]\n")
    cli = runner.invoke(
        app, ["tune", "pbt", QUEST, "--pbt", str(pbt), "--run-dir", str(tmp_path / "r")]
    )
    assert cli.exit_code == 2
    assert "did you mean 'learning_rate'" in cli.output and not (tmp_path / "r").exists()


def test_sb3_members_refuse_rllib_options_and_unknown_engines(tmp_path: Path) -> None:
    spec = PBTSpec.from_dict({"engine": "sb3", "ray": {"num_env_runners": 2}})
    with pytest.raises(ConfigError, match="num_env_runners .* do not apply"):
        tune_pbt(QUEST, tmp_path / "r", spec=spec)
    pbt = tmp_path / "pbt.yaml"
    pbt.write_text("population_size: 2\n")
    cli = runner.invoke(
        app,
        [
            "tune",
            "pbt",
            QUEST,
            "--pbt",
            str(pbt),
            "--engine",
            "sb4",
            "--run-dir",
            str(tmp_path / "r"),
        ],
    )
    assert cli.exit_code == 2 and "did you mean 'sb3'" in cli.output
    assert not (tmp_path / "r").exists()


def test_state_mutations_need_a_game_with_start_states(tmp_path: Path) -> None:
    spec = PBTSpec.from_dict({"population_size": 2, "mutations": {"state": ["a", "b"]}})
    from metabonk_gym.training.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot choose its start state"):
        tune_pbt("MetaBonk/Megabonk-v0", tmp_path / "r", spec=spec)
    assert not (tmp_path / "r").exists()
