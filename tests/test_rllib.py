"""RLlib training (`metabonk train ppo --engine rllib`) on a real two-node Ray cluster started on
this machine (`ray.cluster_utils.Cluster`): env runners placed on the second node, the SB3 path's
TensorBoard scalars, checkpoints, `--resume`, `metabonk eval` on the policy, Megabonk against two
`bonklink-sim` games, and the errors (unreachable cluster, a runner killed mid-run, a runner that
cannot build its env, an env id nobody can import)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from metabonk_gym.cli.main import app
from ray.cluster_utils import Cluster
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.rundir import read_model_metadata
from metabonk_gym.training.megabonk import SimSwarm, free_port_block
from metabonk_gym.training.rllib import RayError, RayOptions, list_checkpoints, train_rllib

QUEST = "MetaBonk/BonkQuest-v0"
MEGABONK = "MetaBonk/Megabonk-v0"
#: Tiny PPO: 2 envs x 32 steps per iteration, 20-step episodes so that some end.
FAST = {
    "n_envs": 2,
    "n_steps": 32,
    "batch_size": 32,
    "n_epochs": 1,
    "max_episode_steps": 20,
    "video_every": 0,
    "checkpoint_every": 64,
}
#: Runners need this custom resource, which only the second node offers.
ON_SECOND_NODE = {"runner_node": 1.0}
runner = CliRunner()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head node and a second node (the only one with `runner_node`), this process connected."""
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "include_dashboard": False},
    )
    c.add_node(num_cpus=2, resources={"runner_node": 4})
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def second_node_id() -> str:
    nodes = [n for n in ray.nodes() if n["Alive"] and "runner_node" in n["Resources"]]
    assert len(nodes) == 1
    return str(nodes[0]["NodeID"])


def opts(**kwargs: Any) -> RayOptions:
    return RayOptions(
        num_env_runners=1, envs_per_runner=2, runner_resources=ON_SECOND_NODE, **kwargs
    )


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


@pytest.fixture(scope="module")
def quest_run(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    run_dir = tmp_path_factory.mktemp("rllib") / "run"
    result = train_rllib(QUEST, run_dir, overrides={**FAST, "total_steps": 192}, ray=opts())
    return run_dir, result


@pytest.mark.slow
def test_runners_on_the_second_node_log_the_sb3_scalars(quest_run: tuple[Path, Any]) -> None:
    run_dir, result = quest_run
    assert result.extra["runner_nodes"] == [second_node_id()]
    assert result.num_timesteps >= 192 and result.episodes >= 2
    tags = scalars(run_dir)
    for tag in (
        "episode/return_mean",
        "episode/length_mean",
        "episode/win_rate",
        "episode/count",
        "game/rooms_visited",
        "game/hp",
        "reward_terms/shaping",
        "train/value_loss",
        "train/policy_gradient_loss",
        "time/fps",
    ):
        assert tag in tags, f"{tag} missing; have {sorted(tags)}"
    assert max(step for step, _ in tags["time/total_timesteps"]) == result.num_timesteps
    assert tags["episode/length_mean"][-1][1] == pytest.approx(20.0)  # max_episode_steps
    state = json.loads((run_dir / "run.json").read_text())
    assert state["engine"] == "rllib" and state["status"] == "finished"


@pytest.mark.slow
def test_checkpoints_hold_rllib_state_and_an_sb3_policy(quest_run: tuple[Path, Any]) -> None:
    from metabonk_gym.rundir import RunDir

    run_dir, result = quest_run
    found = list_checkpoints(RunDir(run_dir))
    assert [s for s, _ in found][-1] == result.num_timesteps
    newest = found[-1][1]
    assert (newest / "rllib_checkpoint.json").is_file() and (newest / "model.zip").is_file()
    meta = read_model_metadata(run_dir / "model.zip")
    assert meta["engine"] == "rllib" and meta["env_id"] == QUEST
    assert meta["num_timesteps"] == result.num_timesteps


@pytest.mark.slow
def test_eval_and_play_load_the_policy(quest_run: tuple[Path, Any]) -> None:
    run_dir, _ = quest_run
    out = run_dir.parent / "report.json"
    cli = runner.invoke(
        app, ["eval", QUEST, str(run_dir / "model.zip"), "--episodes", "2", "--out", str(out)]
    )
    assert cli.exit_code == 0, cli.output
    report = json.loads(out.read_text())
    assert len(report["episodes"]) == 2 and report["episodes"][0]["length"] > 0
    again = evaluate(QUEST, str(run_dir / "model.zip"), episodes=1, seed=3)
    assert again["episodes"][0]["length"] > 0
    # the run directory itself (issue 22: it was "unknown agent"), recognised as an RLlib run
    whole = runner.invoke(app, ["eval", QUEST, str(run_dir), "--episodes", "1", "--out", str(out)])
    assert whole.exit_code == 0, whole.output
    assert json.loads(out.read_text())["run"]["kind"] == "rllib"
    play = runner.invoke(
        app,
        [
            "play",
            QUEST,
            "--agent",
            str(run_dir / "model.zip"),
            "--episodes",
            "1",
            "--max-steps",
            "10",
            "--no-window",
        ],
    )
    assert play.exit_code == 0, play.output


@pytest.mark.slow
def test_resume_continues_the_step_count_and_curves(quest_run: tuple[Path, Any]) -> None:
    run_dir, first = quest_run
    result = train_rllib(QUEST, run_dir, resume=True, overrides={"total_steps": 320}, ray=opts())
    assert result.num_timesteps >= 320
    steps = [s for s, _ in scalars(run_dir)["time/total_timesteps"]]
    later = [s for s in steps if s > first.num_timesteps]
    assert later and min(later) == first.num_timesteps + 64  # one iteration after the checkpoint
    bad = runner.invoke(
        app,
        [
            "train",
            "ppo",
            QUEST,
            "--engine",
            "rllib",
            "--run-dir",
            str(run_dir),
            "--resume",
            "--set",
            "gamma=0.5",
            "--total-steps",
            "999",
        ],
    )
    assert bad.exit_code == 2 and "cannot change gamma" in bad.output


@pytest.mark.slow
def test_a_killed_runner_is_replaced_and_the_run_finishes(cluster: Cluster, tmp_path: Path) -> None:
    killed: list[int] = []

    def kill_runner(algorithm: Any, result: dict) -> None:
        if killed:
            return
        pids = algorithm.env_runner_group.foreach_env_runner(
            lambda _r: os.getpid(), local_env_runner=False
        )
        os.kill(pids[0], signal.SIGKILL)  # a runner this test's run started
        killed.append(pids[0])

    start = time.monotonic()
    result = train_rllib(
        QUEST,
        tmp_path / "run",
        overrides={**FAST, "total_steps": 256, "checkpoint_every": 0},
        ray=opts(sample_timeout_s=30.0),
        on_iteration=kill_runner,
    )
    assert killed and result.num_timesteps >= 256
    assert time.monotonic() - start < 240
    assert result.extra["runner_nodes"] == [second_node_id()]  # the replacement, same node


@pytest.mark.slow
@pytest.mark.net
def test_megabonk_runners_play_two_listed_games(cluster: Cluster, tmp_path: Path) -> None:
    with SimSwarm(2, seed=0, jpeg_hz=0) as swarm:
        games = [f"127.0.0.1:{swarm.base_port}", f"127.0.0.1:{swarm.base_port + 1}"]
        result = train_rllib(
            MEGABONK,
            tmp_path / "run",
            overrides={**FAST, "net_arch": [16], "total_steps": 128, "checkpoint_every": 0},
            ray=opts(games=games),
        )
        stats = swarm.stop()
    assert result.extra["runner_nodes"] == [second_node_id()]
    assert [s["actions"] > 0 for s in stats] == [True, True], stats
    assert "game/survival_time" in scalars(tmp_path / "run")


@pytest.mark.slow
def test_cli_appo_with_a_learner_actor_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    run_dir = tmp_path / "appo"
    cli = runner.invoke(
        app,
        [
            "train",
            "appo",
            QUEST,
            "--address",
            cluster.address,
            "--run-dir",
            str(run_dir),
            "--num-env-runners",
            "1",
            "--envs-per-runner",
            "2",
            "--num-learners",
            "1",
            "--total-steps",
            "128",
            "--set",
            "n_steps=32",
            "--set",
            "batch_size=32",
            "--set",
            "n_epochs=1",
            "--set",
            "video_every=0",
            "--no-progress",
            "--json",
        ],
    )
    assert cli.exit_code == 0, cli.output
    meta = read_model_metadata(run_dir / "model.zip")
    assert meta["rllib_algo"] == "appo" and meta["num_timesteps"] >= 128
    assert json.loads((run_dir / "run.json").read_text())["ray"]["num_learners"] == 1


def test_unreachable_address_is_a_quick_one_line_error(tmp_path: Path) -> None:
    port = free_port_block(1)
    start = time.monotonic()
    cli = runner.invoke(
        app,
        [
            "train",
            "ppo",
            QUEST,
            "--engine",
            "rllib",
            "--address",
            f"127.0.0.1:{port}",
            "--run-dir",
            str(tmp_path / "run"),
            "--total-steps",
            "64",
        ],
    )
    assert cli.exit_code == 2
    assert time.monotonic() - start < 30
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in cli.output
    assert "ray start --head" in cli.output and not (tmp_path / "run").exists()


def test_an_env_id_nobody_can_import_is_refused_before_ray_starts(tmp_path: Path) -> None:
    cli = runner.invoke(
        app,
        [
            "train",
            "ppo",
            "no_such_pkg:Nope/Thing-v0",
            "--engine",
            "rllib",
            "--run-dir",
            str(tmp_path / "run"),
        ],
    )
    assert cli.exit_code == 2 and "Nope/Thing-v0" in cli.output
    assert "Traceback" not in cli.output and not (tmp_path / "run").exists()


def test_ray_flags_need_the_rllib_engine(tmp_path: Path) -> None:
    cli = runner.invoke(
        app, ["train", "ppo", QUEST, "--num-env-runners", "2", "--run-dir", str(tmp_path / "r")]
    )
    assert cli.exit_code == 2 and "need --engine rllib" in cli.output


@pytest.mark.slow
@pytest.mark.net
def test_runners_that_cannot_reach_their_game_stop_the_run_clearly(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The driver sees the game, the runner does not (it went away): a one-line RayError."""
    with SimSwarm(1, seed=0, jpeg_hz=0) as swarm:
        game = f"127.0.0.1:{swarm.base_port}"

        def stop_game(*_args: Any, **_kwargs: Any) -> None:
            swarm.stop()

        from metabonk_gym.training import rllib as rllib_module

        original = rllib_module.register_env

        def register_then_stop() -> None:
            original()
            stop_game()

        rllib_module.register_env = register_then_stop  # the game dies between probe and runners
        try:
            start = time.monotonic()
            with pytest.raises(RayError) as info:
                train_rllib(
                    MEGABONK,
                    tmp_path / "run",
                    overrides={
                        **FAST,
                        "n_envs": 1,
                        "batch_size": 32,
                        "total_steps": 64,
                        "env_kwargs": {"connect_timeout": 2.0},
                    },
                    ray=RayOptions(
                        num_env_runners=1,
                        envs_per_runner=1,
                        games=[game],
                        runner_resources=ON_SECOND_NODE,
                        sample_timeout_s=20.0,
                    ),
                )
        finally:
            rllib_module.register_env = original
    message = str(info.value)
    assert "\n" not in message and time.monotonic() - start < 120
    assert (
        "cannot reset its envs" in message and f"could not connect to BonkLink at {game}" in message
    )
    assert not (tmp_path / "run").exists()
