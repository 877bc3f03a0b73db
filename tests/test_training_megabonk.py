"""PPO, evaluation and the CLI on `MetaBonk/Megabonk-v0` against real lockstep `bonklink-sim`
games (child processes, real TCP on loopback), real SB3 and real TensorBoard files."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from metabonk_gym.cli.main import app
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.errors import RewardSpecError
from metabonk_gym.rundir import read_model_metadata
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.envs import make_env, probe_env
from metabonk_gym.training.errors import ConfigError, GameUnreachableError
from metabonk_gym.training.megabonk import SimSwarm, free_port_block
from metabonk_gym.training.ppo import train_ppo

pytestmark = pytest.mark.net

MEGABONK = "MetaBonk/Megabonk-v0"
#: Tiny PPO: 2 envs x 32 steps per rollout; 25-step episodes (100 game ticks) so that episodes end.
FAST = {
    "n_envs": 2,
    "n_steps": 32,
    "batch_size": 32,
    "n_epochs": 1,
    "net_arch": [16],
    "max_episode_steps": 25,
    "video_every": 0,
    "checkpoint_every": 0,
}
runner = CliRunner()


@pytest.fixture(scope="module")
def games() -> Iterator[SimSwarm]:
    """Two lockstep games on consecutive ports, no frames (the policy reads the state)."""
    with SimSwarm(2, seed=0, jpeg_hz=0) as swarm:
        yield swarm


@pytest.fixture(scope="module")
def trained(games: SimSwarm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("megabonk") / "run"
    train_ppo(
        MEGABONK, run_dir, overrides={**FAST, "total_steps": 320, "base_port": games.base_port}
    )
    return run_dir


def scalars(run_dir: Path) -> dict[str, list[float]]:
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_ppo_logs_game_variables_and_saves_the_model(trained: Path) -> None:
    meta = read_model_metadata(trained / "model.zip")
    assert meta["env_id"] == MEGABONK and meta["num_timesteps"] == 320
    config = meta["config"]
    assert (config["policy"], config["obs_type"], config["frameskip"]) == ("MlpPolicy", "state", 4)

    tags = scalars(trained)
    for tag in (
        "game/survival_time",
        "game/game_time",
        "game/hp",
        "game/kills",
        "game/level",
        "reward_terms/survival",
        "reward_terms/health",
        "episode/return_mean",
        "train/loss",
    ):
        assert tag in tags, tag
    assert "episode/win_rate" not in tags  # Megabonk has no win
    # 25 agent steps of 4 ticks at 60 Hz: at most 100/60 game seconds per episode, some played
    survival = tags["game/survival_time"]
    assert all(0.0 <= s <= 100 / 60 + 1e-3 for s in survival) and max(survival) > 0.5
    # the survival term pays 1 per game second (the "survival" preset has no kill bonus)
    assert "reward_terms/kill" not in tags or max(tags["reward_terms/kill"]) == 0.0
    assert max(tags["reward_terms/survival"]) == pytest.approx(max(survival), abs=0.05)


def test_env_i_talks_to_base_port_plus_i(tmp_path: Path) -> None:
    with SimSwarm(3, seed=1, jpeg_hz=0) as swarm:
        train_ppo(
            MEGABONK,
            tmp_path / "run",
            overrides={**FAST, "n_envs": 3, "total_steps": 96, "base_port": swarm.base_port},
        )
        stats = swarm.stop()
    # every game was played (connected to and stepped); 96 agent steps of 4 ticks over 3 envs
    assert [s["clients"] >= 1 and s["actions"] >= 32 for s in stats] == [True] * 3
    assert sum(s["actions"] for s in stats) >= 96 * 4


def test_action_repeat_and_scaled_observations() -> None:
    # a fresh game (the run starts at reset) that reports the input it applied (HINP)
    swarm = SimSwarm(1, seed=3, jpeg_hz=0, input_snapshot=True)
    cfg = resolve_config(MEGABONK, overrides={"base_port": swarm.start()})
    env = make_env(MEGABONK, cfg)
    try:
        obs, info = env.reset()
        assert env.observation_space.contains(obs) and obs.shape == (51,)
        assert np.abs(obs).max() <= 10.0 and info["survival_time"] == 0.0
        start = info["game_time"]
        action = np.zeros(10, np.float32)
        action[[4, 5, 6, 7]] = -1.0
        _, reward, terminated, _, info = env.step(action)
        assert not terminated
        assert info["game_time"] - start == pytest.approx(4 / 60, abs=1e-4)  # 4 ticks per step
        assert sum(info["reward_terms"].values()) == pytest.approx(reward)
        assert info["reward_terms"]["survival"] == pytest.approx(4 / 60, abs=1e-4)
        assert info["survival_time"] == pytest.approx(4 / 60, abs=1e-4)
        # sticks, fire and ability are held for the 4 ticks; interact and click on the first only
        press = np.array([0.5, -0.5, 0, 0, 1, 1, 1, 1, 0, 0], np.float32)
        _, _, _, _, info = env.step(press)
        ticks = info["human_ticks"]
        assert ticks.shape == (4, 10)
        assert ticks[:, :2].tolist() == [[0.5, -0.5]] * 4 and ticks[:, 4:6].tolist() == [[1, 1]] * 4
        assert ticks[0, 6:8].tolist() == [1.0, 1.0]
        assert ticks[1:, 6:8].tolist() == [[-1.0, -1.0]] * 3
        # the step's input merges its ticks: a press on any tick is a press of the step
        assert info["human_action"][6:8].tolist() == [1.0, 1.0]
    finally:
        env.close()
        swarm.stop()


def test_evaluate_model_and_random(trained: Path, games: SimSwarm) -> None:
    limit = {"base_port": games.base_port, "max_episode_steps": 20}
    model = evaluate(MEGABONK, str(trained / "model.zip"), episodes=2, seed=5, overrides=limit)
    rand = evaluate(MEGABONK, "random", episodes=2, seed=5, overrides=limit)
    for report in (model, rand):
        assert report["n_episodes"] == 2 and len(report["survival_times"]) == 2
        for episode, survival in zip(report["episodes"], report["survival_times"]):
            assert episode["length"] <= 20 and (episode["terminated"] or episode["truncated"])
            assert 0.0 < survival <= 20 * 4 / 60 + 1e-3
            assert episode["variables"]["survival_time"] == survival
            assert {"kills", "level", "hp", "game_time"} <= set(episode["variables"])
        assert report["mean_survival_time"] == pytest.approx(np.mean(report["survival_times"]))
    assert model["agent"].endswith("model.zip") and rand["agent"] == "random"


def test_frames_with_a_multi_input_policy(tmp_path: Path) -> None:
    """obs_type rgb: Dict(pixels, state), 2 stacked, for SB3's MultiInputPolicy; eval stacks too;
    episode videos from the game's frames."""
    overrides = {
        **FAST,
        "n_envs": 1,
        "total_steps": 64,
        "obs_type": "rgb",
        "policy": "MultiInputPolicy",
        "frame_stack": 2,
        "features_dim": 32,
        "video_every": 32,
        "video_length": 8,
    }
    with SimSwarm(1, seed=2) as swarm:  # frames at the plugin's default 10 Hz
        run = tmp_path / "run"
        train_ppo(MEGABONK, run, overrides={**overrides, "base_port": swarm.base_port})
        report = evaluate(
            MEGABONK,
            str(run / "model.zip"),
            episodes=1,
            overrides={"base_port": swarm.base_port, "max_episode_steps": 10},
        )
    from stable_baselines3 import PPO

    space = PPO.load(run / "model.zip", device="cpu").observation_space
    assert space["pixels"].shape == (6, 45, 80) and space["state"].shape == (102,)
    assert report["episodes"][0]["length"] == 10
    # env 0's frames (the game's own 320x180) as an episode video
    assert sorted((run / "videos").glob("step_*.mp4"))
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"images": 0})
    acc.Reload()
    assert acc.Images("video/episode")[0].encoded_image_string[:6] == b"GIF89a"


def test_cli_train_and_eval(games: SimSwarm, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    sets = [f"--set={k}={json.dumps(v)}" for k, v in FAST.items() if k != "n_envs"]
    port = str(games.base_port)
    result = runner.invoke(
        app,
        ["train", "ppo", MEGABONK, "--run-dir", str(run_dir), "--n-envs", "2"]
        + ["--base-port", port, "--total-steps", "64", "--no-progress", "--json", *sets],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["num_timesteps"] == 64 and (run_dir / "model.zip").is_file()
    shown = runner.invoke(
        app,
        ["eval", MEGABONK, str(run_dir / "model.zip"), "--episodes", "1"]
        + ["--base-port", port, "--max-steps", "5"],
        catch_exceptions=False,
    )
    assert shown.exit_code == 0, shown.output
    assert "survival s" in shown.output and "mean survival" in shown.output


def test_no_game_listening_is_a_quick_clear_error(tmp_path: Path) -> None:
    port = free_port_block(2)  # nothing listens there
    start = time.monotonic()
    with pytest.raises(GameUnreachableError) as caught:
        train_ppo(MEGABONK, tmp_path / "run", overrides={**FAST, "base_port": port})
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message
    assert f"metabonk bonklink-sim --lockstep --instances 2 --port {port}" in message
    assert not (tmp_path / "run").exists()

    assert time.monotonic() - start < 10  # the default: retries for 5 s, then the error
    quick = {"env_kwargs": {"connect_timeout": 1.0}}  # the retry window follows connect_timeout
    with pytest.raises(GameUnreachableError, match=f"127.0.0.1:{port}"):
        evaluate(MEGABONK, "random", episodes=1, overrides={"base_port": port, **quick})

    result = runner.invoke(
        app,
        ["train", "ppo", MEGABONK, "--run-dir", str(tmp_path / "cli"), "--base-port", str(port)]
        + ["--set", "env_kwargs={connect_timeout: 1}"],
    )
    assert result.exit_code == 2 and f"127.0.0.1:{port}" in result.output
    assert "bonklink-sim --lockstep" in result.output and not (tmp_path / "cli").exists()
    assert time.monotonic() - start < 15


def test_only_the_second_game_missing_names_its_port(games: SimSwarm, tmp_path: Path) -> None:
    with pytest.raises(GameUnreachableError, match=f":{games.base_port + 2} \\(env 2 of 3"):
        train_ppo(
            MEGABONK,
            tmp_path / "run",
            overrides={
                **FAST,
                "n_envs": 3,
                "base_port": games.base_port,
                "env_kwargs": {"connect_timeout": 1.0},
            },
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"state": "room1"}, "state is not supported"),
        ({"game_seeds": [1]}, "cannot seed"),
        ({"obs_type": "grayscale"}, "policy: MultiInputPolicy"),
        ({"env_kwargs": {"port": 5560}}, "set base_port instead"),
        ({"sticky_action_prob": 0.2}, "sticky_action_prob is not supported"),
    ],
)
def test_megabonk_config_errors(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_config(MEGABONK, overrides=overrides)


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        (
            {"obs_type": "rgb", "policy": "MultiInputPolicy", "downscale": 4},
            ConfigError,
            "too small",
        ),
        ({"reward": "explore"}, RewardSpecError, "unknown reward 'explore' for Megabonk"),
        ({"reward": {"speed": {"type": "delta", "variable": "speed"}}}, RewardSpecError, "speed"),
        (
            {"goal": {"variable": "rooms_visited"}},
            ConfigError,
            "not a variable of MetaBonk/Megabonk",
        ),
        ({"env_kwargs": {"warp": 9}}, ConfigError, "does not take these env_kwargs"),
    ],
)
def test_megabonk_errors_found_by_the_env(overrides: dict, error: type, message: str) -> None:
    """Errors the env itself finds: before any game is reached (nothing listens here)."""
    cfg = resolve_config(MEGABONK, overrides={**overrides, "base_port": free_port_block(4)})
    with pytest.raises(error, match=message):
        probe_env(MEGABONK, cfg)


def test_gba_envs_reject_megabonk_settings() -> None:
    with pytest.raises(ConfigError, match="needs policy"):
        resolve_config("MetaBonk/BonkArena-v0", overrides={"policy": "MultiInputPolicy"})
    with pytest.raises(ConfigError, match="obs_type state needs policy MlpPolicy"):
        resolve_config("MetaBonk/BonkQuest-v0", overrides={"obs_type": "state"})
    kwargs = resolve_config("MetaBonk/BonkArena-v0").env_kwargs_for_make("MetaBonk/BonkArena-v0")
    assert kwargs["frameskip"] == 4 and "port" not in kwargs
    megabonk = resolve_config(MEGABONK, overrides={"base_port": 7000})
    kwargs = megabonk.env_kwargs_for_make(MEGABONK, index=3)
    assert kwargs["port"] == 7003 and kwargs["frameskip"] == 4 and kwargs["obs_type"] == "state"
