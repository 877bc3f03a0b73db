"""`metabonk tune pbt`: Ray Tune population-based training of RLlib PPO on a real two-node Ray
cluster on this machine: two members, one exploit step, TensorBoard per member, and the best
member's policy evaluated by `metabonk eval`; PBT file errors are one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from metabonk_gym.cli.main import app
from ray.cluster_utils import Cluster
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from metabonk_gym.training.rundir import read_model_metadata
from metabonk_gym.training.tune import PBTSpec, tune_pbt

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


def test_a_bad_pbt_file_is_a_one_line_error(tmp_path: Path) -> None:
    pbt = tmp_path / "pbt.yaml"
    pbt.write_text("population_size: 2\nmutations:\n  learning_rat: [0.0001, 0.001]\n")
    cli = runner.invoke(
        app, ["tune", "pbt", QUEST, "--pbt", str(pbt), "--run-dir", str(tmp_path / "r")]
    )
    assert cli.exit_code == 2
    assert "did you mean 'learning_rate'" in cli.output and not (tmp_path / "r").exists()


def test_state_mutations_need_a_game_with_start_states(tmp_path: Path) -> None:
    spec = PBTSpec.from_dict({"population_size": 2, "mutations": {"state": ["a", "b"]}})
    from metabonk_gym.training.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot choose its start state"):
        tune_pbt("MetaBonk/Megabonk-v0", tmp_path / "r", spec=spec)
    assert not (tmp_path / "r").exists()
