"""Curricula: stages with promotion rules in TensorBoard, and swarm mode's milestone states."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from stable_baselines3.common.callbacks import BaseCallback
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import metabonk_gym  # noqa: F401
from metabonk_gym.rundir import RunDir
from metabonk_gym.training.curriculum import load_plan, run_curriculum
from metabonk_gym.training.errors import ConfigError, RunDirError

QUEST = "MetaBonk/BonkQuest-v0"


class InterruptAt(BaseCallback):
    """Raises KeyboardInterrupt at a step count, as Ctrl-C would."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.steps:
            raise KeyboardInterrupt
        return True


FAST = {
    "n_envs": 2,
    "n_steps": 16,
    "batch_size": 32,
    "n_epochs": 1,
    "downscale": 8,
    "frame_stack": 2,
    "features_dim": 32,
    "max_episode_steps": 12,
    "checkpoint_every": 0,
    "video_every": 0,
    "lr_schedule": "constant",
}


def test_stages_promote_and_log(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "config: {n_epochs: 1}\n"
        "stages:\n"
        "  - name: first\n"
        "    state: room1\n"
        "    game_seeds: [1, 2]\n"
        "    promote: {mean_return: -100, window: 2}\n"  # met as soon as 2 episodes ended
        "    max_steps: 200\n"
        "  - name: second\n"
        "    state: room2\n"
        "    reward: explore\n"
        "    goal: null\n"
        "    promote: {win_rate: 1.0, window: 50}\n"  # out of reach: the budget ends it
        "    max_steps: 64\n"
    )
    stopped = run_curriculum(
        QUEST, plan, tmp_path / "run", overrides=FAST, callbacks=[InterruptAt(60)]
    )
    assert stopped.interrupted and [s["name"] for s in stopped.stages] == ["first"]
    result = run_curriculum(QUEST, plan, tmp_path / "run", resume=True)  # continues stage "second"
    first, second = result.stages
    assert first["promoted"] and first["episodes"] >= 2 and first["steps"] < 200
    assert not second["promoted"] and second["steps"] >= 64
    assert (tmp_path / "run" / "model.zip").is_file()
    state = RunDir(tmp_path / "run").read_state()
    assert state["status"] == "stopped" and [s["name"] for s in state["stages"]] == [
        "first",
        "second",
    ]
    acc = EventAccumulator(str(tmp_path / "run" / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"curriculum/stage", "curriculum/first/return_mean", "train/loss"} <= set(tags)
    assert {e.value for e in acc.Scalars("curriculum/stage")} == {0.0, 1.0}
    with pytest.raises(RunDirError, match="already ended \\(stopped\\)"):
        run_curriculum(QUEST, plan, tmp_path / "run", resume=True)


def test_swarm_saves_milestone_states(tmp_path: Path) -> None:
    result = run_curriculum(
        QUEST,
        {"swarm": {"total_steps": 96}},
        tmp_path / "swarm",
        overrides={**FAST, "max_episode_steps": 30},
        swarm=True,
        milestone="player_x",  # a random walk keeps beating it
    )
    assert result.num_timesteps >= 96 and result.milestones
    best = result.milestones[-1]
    assert Path(best["state"]).is_file()
    env = gym.make(QUEST, state=best["state"])
    try:
        _, info = env.reset(seed=0)
        assert info["player_x"] == best["value"]
    finally:
        env.close()


class ResetProbe(BaseCallback):
    """When training ends (the vector env still open), resets every env through `env_method`, as
    PPO's auto-reset would at an episode's end, and keeps each env's first info."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[dict] = []
        self.start_states: list[str | None] = []

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self.start_states = self.training_env.get_attr("start_state")
        self.starts = [info for _, info in self.training_env.env_method("reset")]


def test_swarm_moves_every_env_start_to_the_milestone(tmp_path: Path) -> None:
    probe = ResetProbe()
    result = run_curriculum(
        QUEST,
        {"swarm": {"total_steps": 64}},
        tmp_path / "swarm",
        overrides={**FAST, "max_episode_steps": 30},
        swarm=True,
        milestone="player_x",
        callbacks=[probe],
    )
    assert result.milestones, "a random walk beats its first player_x"
    best = result.milestones[-1]
    assert probe.start_states == [best["state"], best["state"]], "every env, not only the one there"
    assert len(probe.starts) == FAST["n_envs"]
    for info in probe.starts:
        assert info["player_x"] == best["value"]
        assert info["room"] == 1 and info["lost"] == 0
    where = {(i["room"], i["player_x"], i["player_y"], i["hp"]) for i in probe.starts}
    assert len(where) == 1, f"both envs start from the same saved state, not {where}"
    env = gym.make(QUEST, state=best["state"])
    try:  # the game variables are those of the milestone state itself
        _, info = env.reset(seed=0)
        info.pop("game_seed")
        assert info == {k: probe.starts[0][k] for k in info}
    finally:
        env.close()


def test_bad_plans(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown keys \\['promot'\\]"):
        load_plan({"stages": [{"name": "a", "promot": {}}]})
    with pytest.raises(ConfigError, match="unknown keys \\['downscale'\\]"):
        load_plan({"stages": [{"name": "a", "downscale": 2}]})
    with pytest.raises(ConfigError, match="non-empty list 'stages'"):
        load_plan({"stages": []})
    with pytest.raises(ConfigError, match="did you mean 'gamma'"):
        load_plan({"config": {"gama": 0.9}, "stages": [{"name": "a"}]})
    from metabonk_gym.errors import UnknownStateError

    plan = {"stages": [{"name": "a", "state": "room1"}, {"name": "b", "state": "room9"}]}
    with pytest.raises(UnknownStateError, match="room9"):
        run_curriculum(QUEST, plan, tmp_path / "run", overrides=FAST)
    assert not (tmp_path / "run").exists()
