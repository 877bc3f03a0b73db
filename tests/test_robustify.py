"""`metabonk robustify` (issue 34): a run resumes where its newest checkpoint left it (PPO's
weights, the curriculum's start point and history, TensorBoard in the same folder); Ctrl-C saves
a checkpoint with the position and `--resume` continues it; a bad resume is one line and changes
nothing; the clone of the demonstration replays it in the training envs (the clean replay wins);
bigger moves skip points when success is high, on a toy.

The real parts: HatWizard's level 1-1 explored on the mGBA core until a cell wins (a few
thousand frames), its best path robustified by the project's PPO.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import typer
import yaml
from metabonk_gym.cli.errors import guard_commands
from metabonk_gym.cli.explore import register
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from typer.testing import CliRunner

from metabonk_gym.rundir import RunDir, read_model_metadata
from metabonk_gym.training.backward import (
    BackwardCallback,
    BackwardSettings,
    run_robustify,
    stored_settings,
)
from metabonk_gym.training.backward_demo import Demo, load_demo_archive
from metabonk_gym.training.errors import ConfigError, RunDirError
from metabonk_gym.training.explore import ExploreSettings, run_explore

HAT = "MetaBonk/HatWizard-v0"
SMALL = {"n_envs": 2, "n_steps": 64, "batch_size": 64, "n_epochs": 1, "checkpoint_every": 64}


@pytest.fixture(scope="module")
def hat_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An explorer's folder whose best cell wins HatWizard's level 1-1."""
    out = tmp_path_factory.mktemp("hat") / "explore"
    settings = ExploreSettings(
        n_envs=2, max_frames=60_000, stop_when_won=True, state="level1", seed=0
    )
    result = run_explore(HAT, out, settings)
    assert result.won, result
    return out


def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    guard_commands(app)
    return app


def scalar_steps(run: Path, tag: str) -> list[int]:
    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0}).Reload()
    return [e.step for e in events.Scalars(tag)]


def test_a_run_resumes_where_its_checkpoint_left_it(hat_archive: Path, tmp_path: Path) -> None:
    run = tmp_path / "robust"
    settings = BackwardSettings(
        every=50, window=2, threshold=0.5, total_steps=256, max_stride=4,
        bc_epochs=1, bc_passes=3, overrides=dict(SMALL),
    )  # fmt: skip
    first = run_robustify(hat_archive, run, settings)
    # the clone replayed the demonstration in the training envs: the clean replay won
    assert first.bc["bc_clean_success"] is True, first.bc
    assert first.demo_steps < first.bc["bc_frames"] <= 3 * first.demo_steps
    saved = read_model_metadata(run / "model.zip")["backward"]
    assert saved["point"] == first.reached_point and saved["history"] == first.moves
    assert json.loads((run / "run.json").read_text())["backward_settings"]["every"] == 50

    # another total only: the run's own settings (every=50), not these defaults (every=10)
    second = run_robustify(hat_archive, run, BackwardSettings(total_steps=512), resume=True)
    assert second.resumed_from == first.num_timesteps
    assert second.num_timesteps >= 512 and second.points == first.points
    assert second.moves[: len(first.moves)] == first.moves  # the history goes on
    assert second.reached_point <= first.reached_point  # never forward again
    assert second.bc == first.bc  # cloned once, at the start
    steps = scalar_steps(run, "backward/start_step")
    assert min(steps) < first.num_timesteps < max(steps)  # one TensorBoard folder, continued

    # bad resumes: one line each, the run unchanged
    before = (run / "model.zip").read_bytes()
    with pytest.raises(RunDirError, match="already has"):
        run_robustify(hat_archive, run, BackwardSettings(total_steps=512), resume=True)
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(RunDirError, match="robustifies the archive in"):
        run_robustify(other, run, BackwardSettings(total_steps=1024), resume=True)
    with pytest.raises(RunDirError, match="does not exist"):
        run_robustify(hat_archive, tmp_path / "none", BackwardSettings(), resume=True)
    assert (run / "model.zip").read_bytes() == before
    # a new run into it is refused too
    with pytest.raises(RunDirError, match="--resume"):
        run_robustify(hat_archive, run, BackwardSettings(total_steps=64))


def test_ctrl_c_saves_the_position_and_resume_continues(hat_archive: Path, tmp_path: Path) -> None:
    run = tmp_path / "robust"
    proc = subprocess.Popen(
        [sys.executable, "-m", "metabonk_gym.cli.main", "robustify", str(hat_archive),
         "--run-dir", str(run), "--total-steps", "1000000", "--every", "50", "--window", "2",
         "--max-stride", "2", *(a for k, v in SMALL.items() for a in ("--set", f"{k}={v}"))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not list((run / "checkpoints").glob("step_*.zip")):
            assert proc.poll() is None, proc.communicate()[0].decode()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 240 s"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=120)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, output[-3000:]
    assert "stopped by SIGINT" in output and "model saved" in output, output[-3000:]
    state = RunDir(run).read_state()
    assert state["status"] == "interrupted" and state.get("pid") is None
    path, meta = RunDir(run).resume_point()
    stopped = meta["num_timesteps"]
    assert "point" in meta["backward"], meta

    # --resume --set is refused (the run's own config trains on), then a resume runs
    result = CliRunner().invoke(
        cli(), ["robustify", str(hat_archive), "--run-dir", str(run), "--resume",
                "--total-steps", str(stopped + 64), "--set", "n_envs=4"],
    )  # fmt: skip
    assert result.exit_code == 2 and "drop --set" in result.output, result.output
    result = CliRunner().invoke(
        cli(), ["robustify", str(hat_archive), "--run-dir", str(run), "--resume",
                "--total-steps", str(stopped + 64)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output[-3000:]
    assert f'"resumed_from": {stopped}' in result.output, result.output[-3000:]
    assert RunDir(run).read_state()["status"] == "finished"


def test_stored_settings_are_checked() -> None:
    good = stored_settings({"backward_settings": {"every": 5, "max_stride": 4}}, 9, Path("r"))
    assert (good.every, good.max_stride, good.total_steps) == (5, 4, 9)
    for bad in ({}, {"backward_settings": [1]}, {"backward_settings": {"window": 0}},
                {"backward_settings": {"threshold": True}}):  # fmt: skip
        with pytest.raises(RunDirError, match="backward_settings"):
            stored_settings(bad, 9, Path("run.json"))


class Corridor(gym.Env):
    """Walk right from a start (a "state" named by its position) to the end of a corridor."""

    LENGTH = 24

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.start = self.position = self.steps = 0
        self._max_episode_steps = 100

    def set_start(self, state: str | None, game_seeds: Any = None) -> None:
        self.start = int(Path(state).name) if state else 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.position, self.steps = self.start, 0
        return np.array([self.position / self.LENGTH], np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        self.steps += 1
        success = self.position >= self.LENGTH
        obs = np.array([self.position / self.LENGTH], np.float32)
        return (
            obs,
            float(success),
            success,
            self.steps >= self._max_episode_steps,
            {"success": success},
        )


def corridor_demo() -> Demo:
    points = list(range(0, Corridor.LENGTH + 1, 2))
    return Demo(
        paths=[Path(str(p)) for p in points], steps=points,
        scores=[float(p == Corridor.LENGTH) for p in points], won=True, goal=None,
        state="0", game_seed=0,
    )  # fmt: skip


def test_quick_successes_skip_points_back() -> None:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    settings = BackwardSettings(threshold=0.6, window=8, max_stride=4, jump_rate=0.6)
    callback = BackwardCallback(corridor_demo(), settings, lambda _: None)
    model = PPO("MlpPolicy", DummyVecEnv([Corridor, Corridor]), n_steps=64, batch_size=64,
                n_epochs=4, seed=0)  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model.learn(3_000, callback=callback)
    finally:
        torch.set_num_threads(threads)
    points = [h["point"] for h in callback.history if not h["fresh_seeds"]]
    assert len(points) >= 3, callback.history
    jumps = [a - b for a, b in zip(points, points[1:])]
    assert max(jumps) > 1 and all(1 <= j <= 4 for j in jumps), points  # skipped, at most 4
    # the position survives a save: a callback made with it starts there
    again = BackwardCallback(corridor_demo(), settings, lambda _: None, callback.position())
    assert again.position() == callback.position()
    for bad in ({**callback.position(), "point": 99}, {**callback.position(), "stride": 9},
                {**callback.position(), "fresh_seeds": "no"}):  # fmt: skip
        with pytest.raises(RunDirError, match="backward position"):
            BackwardCallback(corridor_demo(), settings, lambda _: None, bad)


@pytest.fixture(scope="module")
def hat_archive_seed3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second winning HatWizard archive: another explorer seed and another game seed."""
    out = tmp_path_factory.mktemp("hat3") / "explore"
    settings = ExploreSettings(
        n_envs=2, max_frames=60_000, stop_when_won=True, state="level1", seed=3, game_seed=3
    )
    assert run_explore(HAT, out, settings).won
    return out


def test_more_archives_give_uniform_starts_and_must_be_given_again_to_resume(
    hat_archive: Path, hat_archive_seed3: Path, tmp_path: Path
) -> None:
    run = tmp_path / "robust"
    settings = BackwardSettings(every=20, total_steps=256, uniform_share=1.0, overrides=dict(SMALL))
    with pytest.raises(ConfigError, match="--uniform-share"):
        run_robustify(hat_archive, run, BackwardSettings(), also=[hat_archive_seed3])
    assert not run.exists()  # refused before anything was written
    first = run_robustify(hat_archive, run, settings, also=[hat_archive_seed3])
    assert not first.moves  # no curriculum: every start is a uniform draw
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("demo")) == ["demo", "demo-1"]
    assert len(list((run / "demo-1").glob("*.state"))) >= 2
    state = json.loads((run / "run.json").read_text())
    assert state["explore_also"] == [str(hat_archive_seed3.resolve())]
    with pytest.raises(RunDirError, match="--also"):
        run_robustify(hat_archive, run, BackwardSettings(total_steps=512), resume=True)
    again = run_robustify(
        hat_archive, run, BackwardSettings(total_steps=512), resume=True, also=[hat_archive_seed3]
    )
    assert again.num_timesteps >= 512


def test_the_callback_draws_from_every_demonstration() -> None:
    def demo(points: int, state: str) -> Demo:
        steps = list(range(0, 10 * points, 10))
        return Demo(
            [Path(f"{state}{i}") for i in steps], steps, [0.0] * points, True, None, state, 0
        )

    callback = BackwardCallback(
        demo(5, "a"), BackwardSettings(uniform_share=1.0), lambda _: None, others=[demo(9, "b")]
    )
    draws = [callback._draw() for _ in range(2000)]
    share_b = sum(d[0] == 1 for d in draws) / len(draws)
    assert 0.6 < share_b < 0.72  # 8 of the 12 points that are not an end
    assert {d[1] for d in draws if d[0] == 1} == set(range(8)) and all(not d[3] for d in draws)
    assert all(d[2] == (d[1] == 0) for d in draws)  # a path's first point: fresh game seeds


class Walk(gym.Env):
    """A toy whose info carries a position: action 1 steps right, 0 stays."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.x = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        self.x = 0
        return np.zeros(1, np.float32), {"x": self.x}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.x += int(action)
        return np.zeros(1, np.float32), 0.0, False, False, {"x": self.x, "reward_terms": {}}


def test_waypoints_pay_for_each_cell_of_the_path_passed_from_the_next_reset() -> None:
    from metabonk_gym.training.envs import WaypointReward

    env = WaypointReward(Walk(), weight=0.5, lookahead=3)
    env.set_waypoints([("x", 2)], [(0,), (1,), (2,), (3,), (4,)])  # cells of 2 positions each
    env.reset()
    assert env.waypoints and env.reached == 0  # pending until the reset: applied now
    rewards = [env.step(1)[1] for _ in range(3)]  # x 1, 2, 3 -> cells 0, 1, 1
    assert rewards == [0.5, 0.5, 0.0] and env.reached == 2
    for _ in range(4):  # x 4..7: cell 2 at x=4, 3 at x=6, then past the path
        env.step(1)
    assert env.reached == 4
    env.set_waypoints([("x", 1)], [(9,)])
    env.step(1)
    assert env.waypoints != [(9,)]  # not before the next reset
    env.reset()
    rewards = [env.step(1)[1] for _ in range(12)]  # (9,) is within 3 of none until x=9
    assert rewards.count(0.5) == 1 and env.reached == 1 and rewards[8] == 0.5
    _, _, _, _, info = env.step(1)
    assert info["reward_terms"]["waypoints"] == 0.0


def test_waypoints_skip_ahead_and_pay_for_what_they_skip() -> None:
    from metabonk_gym.training.envs import WaypointReward

    env = WaypointReward(Walk(), weight=1.0, lookahead=4)
    env.set_waypoints([("x", 1)], [(0,), (5,), (1,), (2,)])  # a loop the policy cuts
    env.reset()
    assert env.step(1)[1] == 3.0 and env.reached == 3  # x=1 is the third waypoint: 3 passed


def test_the_demonstrations_own_actions_pass_every_waypoint(
    hat_archive: Path, tmp_path: Path
) -> None:
    from metabonk_gym.training.backward_demo import archive_env_kwargs, record_demo
    from metabonk_gym.training.config import resolve_config
    from metabonk_gym.training.envs import make_env

    archive, best = load_demo_archive(hat_archive)
    kwargs = archive_env_kwargs(archive, hat_archive / "archive.npz", None)
    demo = record_demo(archive, best, tmp_path, 20, kwargs)
    ahead = demo.waypoints_after(0)
    assert demo.waypoint_columns and len(ahead) >= 3  # RAM cells: level, x, y
    cfg = resolve_config(HAT, overrides={"waypoint_reward": 0.5, "env_kwargs": kwargs})
    env = make_env(HAT, cfg)
    try:
        env.get_wrapper_attr("set_waypoints")(demo.waypoint_columns, ahead)
        env.reset(options={"state": demo.state, "game_seed": demo.game_seed})
        paid = [env.step(int(a))[4]["reward_terms"]["waypoints"] for a in demo.actions]
    finally:
        env.close()
    assert sum(paid) == pytest.approx(0.5 * len(ahead))  # each waypoint once, in order
    assert env.get_wrapper_attr("reached") == len(ahead)


def test_robustify_with_waypoints_pays_for_the_path(hat_archive: Path, tmp_path: Path) -> None:
    run = tmp_path / "robust"
    settings = BackwardSettings(
        every=20, total_steps=256, uniform_share=1.0, waypoint_reward=0.1, overrides=dict(SMALL)
    )
    result = run_robustify(hat_archive, run, settings)
    assert result.num_timesteps >= 256
    state = json.loads((run / "run.json").read_text())
    assert state["backward_settings"]["waypoint_reward"] == 0.1
    assert "waypoint_reward: 0.1" in (run / "config.yaml").read_text()


def test_pixel_cells_train_and_uniform_episodes_are_cut_to_segments(
    hat_archive: Path, tmp_path: Path
) -> None:
    run = tmp_path / "robust"
    cells = {"wrappers": ["pixel_cells"], "obs_type": "rgb", "downscale": 1, "features": "cells"}
    settings = BackwardSettings(
        every=20,
        total_steps=512,
        uniform_share=1.0,
        segment_steps=12,
        overrides={**SMALL, **cells},
    )
    result = run_robustify(hat_archive, run, settings)
    assert result.num_timesteps >= 512
    assert "pixel_cells" in (run / "config.yaml").read_text()
    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0}).Reload()
    lengths = [e.value for e in events.Scalars("episode/length_mean")]
    assert lengths and max(lengths) <= 12  # every drawn episode is a 12-step stretch at most


def test_wrappers_that_read_memory_are_refused_before_anything_is_written(
    hat_archive: Path, tmp_path: Path
) -> None:
    run = tmp_path / "robust"
    settings = BackwardSettings(overrides={**SMALL, "wrappers": ["ram_features"]})
    with pytest.raises(ConfigError, match="pixels only.*pixel_cells.*ram_features"):
        run_robustify(hat_archive, run, settings)
    assert not run.exists()
    with pytest.raises(ConfigError, match="segment_steps"):
        BackwardSettings(segment_steps=-1).check()


def test_an_archive_that_cannot_win_is_robustified_towards_its_score(tmp_path: Path) -> None:
    """MeteoRain has no win: the best cell's score (meteors landed while alive) is the goal."""
    out = tmp_path / "explore"
    explored = run_explore(
        "MetaBonk/MeteoRain-v0", out, ExploreSettings(n_envs=2, max_frames=8_000, seed=0)
    )
    assert not explored.won
    run = tmp_path / "robust"
    settings = BackwardSettings(every=20, total_steps=256, uniform_share=1.0, overrides=dict(SMALL))
    result = run_robustify(out, run, settings)
    assert not result.demo_won and result.num_timesteps >= 256
    goal = yaml.safe_load((run / "config.yaml").read_text())["goal"]
    archive, best = load_demo_archive(out)
    assert goal == {
        "variable": "score",
        "op": "greater-or-equal",
        "reference": int(archive.scores[best]),
    }
    assert goal["reference"] > 0  # the explorer lived long enough for meteors to land


def test_a_wall_clock_budget_counts_the_time_before_ppo(hat_archive: Path, tmp_path: Path) -> None:
    """The bench's budget stop runs from its creation: replaying and cloning the demonstration
    are spent from it, so a budget gone by the time PPO starts trains one rollout at most."""
    from metabonk_gym.bench.learning_spec import wall_clock_stop

    stop = wall_clock_stop(0.5 / 60)
    time.sleep(0.6)
    settings = BackwardSettings(every=20, total_steps=4096, bc_epochs=1, overrides=dict(SMALL))
    result = run_robustify(hat_archive, tmp_path / "robust", settings, callbacks=[stop])
    assert result.num_timesteps <= SMALL["n_envs"] * SMALL["n_steps"]
