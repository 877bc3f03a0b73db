"""Wrapper stacks in training (issue 22): a `wrappers:` list trains, checkpoints, resumes and
evaluates with the same stack; PPO with `pause_to_think` (oracle, async) writes think scalars;
the `follow` reward term and the advice fade; bad names, options and stacks are one-line errors."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import metabonk_gym  # noqa: F401  (registers the envs)
from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.rundir import RunDir, read_model_metadata
from metabonk_gym.think.follower import make_follower
from metabonk_gym.think.pause_to_think import PauseToThink
from metabonk_gym.think.view import GameView
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.ppo import train_ppo
from metabonk_gym.training.wrapstack import apply_wrappers, run_wrappers

QUEST = "MetaBonk/BonkQuest-v0"
FAST = {
    "n_envs": 2,
    "n_steps": 32,
    "batch_size": 32,
    "n_epochs": 1,
    "features_dim": 32,
    "max_episode_steps": 40,
    "checkpoint_every": 64,
    "video_every": 0,
}
STACK = [
    {"name": "tile_tokens", "buckets": 64, "sprites": False},
    {"name": "button_history", "n": 2},
]


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_a_wrapper_stack_trains_checkpoints_resumes_and_evaluates(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = train_ppo(QUEST, run, overrides={**FAST, "total_steps": 128, "wrappers": STACK})
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["wrappers"] == STACK and config["policy"] == "MultiInputPolicy"
    assert run_wrappers(run) == STACK
    assert first.num_timesteps == 128 and RunDir(run).list_checkpoints()

    resumed = train_ppo(QUEST, run, overrides={"total_steps": 192}, resume=True)
    assert resumed.num_timesteps == 192
    meta = read_model_metadata(run / "model.zip")
    assert meta["config"]["wrappers"] == STACK and meta["num_timesteps"] == 192

    # eval rebuilds the run's stack from the model's config (Dict keys of both wrappers)
    report = evaluate(QUEST, str(run / "model.zip"), episodes=1, seed=3)
    assert len(report["episodes"]) == 1 and report["episodes"][0]["length"] > 0

    # another stack for this model: one line naming both stacks, nothing written
    with pytest.raises(ConfigError, match="was trained with wrappers tile_tokens") as info:
        evaluate(
            QUEST,
            str(run / "model.zip"),
            episodes=1,
            overrides={"wrappers": [{"name": "button_history", "n": 2}]},
            out=tmp_path / "report.json",
        )
    assert "\n" not in str(info.value) and not (tmp_path / "report.json").exists()
    # a resume may not change the stack either
    with pytest.raises(ConfigError, match="cannot change wrappers"):
        train_ppo(QUEST, run, overrides={"total_steps": 256, "wrappers": []}, resume=True)


def test_ppo_with_pause_to_think_writes_think_scalars(tmp_path: Path) -> None:
    stack = [
        {
            "name": "pause_to_think",
            "engine": "oracle",
            "mode": "async",
            "follow_weight": 0.1,
            "advice_fade": [64, 192],
        }
    ]
    run = tmp_path / "think"
    result = train_ppo(QUEST, run, overrides={**FAST, "total_steps": 256, "wrappers": stack})
    assert result.num_timesteps == 256
    found = scalars(run / "tensorboard")
    assert found["think/calls"][-1][1] > 0
    assert "think/latency_p50_s" in found and "think/fallback_rate" in found
    fade = dict(found["think/advice_scale"])
    # each rollout (64 steps) is logged at its end with the scale at its start
    assert fade[128] == 1.0 and fade[192] == pytest.approx(0.5) and fade[256] == 0.0
    weights = [v for _, v in found["think/follow_weight"]]
    assert weights[0] == pytest.approx(0.1) and weights[-1] < weights[0]


def _away(cell: tuple[int, int], tile: tuple[int, int]) -> str:
    dx, dy = tile[0] - cell[0], tile[1] - cell[1]
    if abs(dx) >= abs(dy):
        return "LEFT" if dx > 0 else "RIGHT"
    return "UP" if dy > 0 else "DOWN"


def test_follow_rises_toward_the_target_and_falls_away_from_it(make_env) -> None:
    env = PauseToThink(make_env(QUEST, state="room1"), engine="oracle", follow_weight=1.0)
    follower = make_follower(env)
    obs, info = env.reset(seed=0)
    assert env.directive["target"] is not None
    toward = []
    for i in range(12):
        view = GameView.capture(env, info, i, obs)
        obs, _, _, _, info = env.step(follower.act(view, env.director.directive))
        toward.append(info["reward_terms"]["follow"])
    obs, info = env.reset(seed=0)
    away = []
    for _ in range(12):
        directive = env.director.directive
        cell = env.adapter.player_cell(GameView.capture(env, info, 0, obs))
        action = follower.action_for(_away(cell, directive.tile))
        obs, _, _, _, info = env.step(action)
        away.append(info["reward_terms"]["follow"])
    assert sum(toward) >= 5 and min(toward) >= -1.0 and max(toward) <= 1.0
    assert sum(away) < 0 and max(away) <= 0


def test_a_finished_fade_plays_alone(make_env) -> None:
    env = PauseToThink(
        make_env(QUEST, state="room1"), engine="oracle", follow_weight=1.0, advice_fade=[0, 100]
    )
    env.set_train_step(100)  # the end of the fade: no advice
    obs, info = env.reset(seed=0)
    calls = info["think"]["calls"]
    for _ in range(5):
        obs, _, _, _, info = env.step(env.action_space.sample())
    assert not info["think"]["advised"] and info["directive"] == {}
    assert info["think"]["calls"] == calls == 0
    assert not np.any(obs["directive"]) and info["reward_terms"]["follow"] == 0.0
    env.set_train_step(0)  # the start: every episode advised
    obs, info = env.reset(seed=1)
    assert info["think"]["advised"] and info["think"]["calls"] == 1 and np.any(obs["directive"])


@pytest.mark.parametrize(
    ("wrappers", "message"),
    [
        (
            [{"name": "tile_token"}],
            r"unknown wrapper 'tile_token' \(did you mean 'tile_tokens'\?\)",
        ),
        ([{"name": "TileTokens", "bucket": 8}], r"no option 'bucket' \(did you mean 'buckets'\?\)"),
        ([{"name": "pause_to_think", "engin": "oracle"}], r"did you mean 'engine'"),
        ({"name": "tile_tokens"}, "wrappers must be a list"),
        ([{"buckets": 8}], "needs a name"),
    ],
)
def test_bad_wrapper_names_and_options_are_one_line_errors(wrappers, message) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        resolve_config(QUEST, overrides={"wrappers": wrappers})
    assert "\n" not in str(info.value)


def test_a_bad_option_value_names_the_wrapper(make_env) -> None:
    with pytest.raises(ConfigError, match=r"wrapper button_history\(n=0\) failed"):
        apply_wrappers(make_env(QUEST), [{"name": "button_history", "n": 0}])


def test_run_wrappers_of_a_folder_that_is_no_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a run directory"):
        run_wrappers(tmp_path)


def test_apply_wrappers_matches_research_code(make_env) -> None:
    """The stack a config names is the stack research code builds from the same classes."""
    from metabonk_gym.wrappers import ButtonHistory, TileTokens

    ours = apply_wrappers(make_env(QUEST), STACK)
    a, _ = ours.reset(seed=5)
    ours.close()  # one emulator at a time
    theirs = ButtonHistory(TileTokens(make_env(QUEST), buckets=64, sprites=False), n=2)
    assert ours.observation_space == theirs.observation_space
    b, _ = theirs.reset(seed=5)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert isinstance(ours, gym.Wrapper)


def test_bc_clones_a_dataset_recorded_with_the_same_stack(tmp_path: Path) -> None:
    import uuid

    from metabonk_gym.agents.record import record
    from metabonk_gym.training.bc import train_bc
    from metabonk_gym.training.errors import DatasetError

    stack = [{"name": "button_history", "n": 2}]
    small = {"frame_stack": 2, "features_dim": 32, "n_envs": 2, "n_steps": 32, "batch_size": 32}
    dataset_id = f"test/wrapped-{uuid.uuid4().hex[:8]}-v0"
    record(
        QUEST, "scripted", dataset_id, episodes=2, seed=4, overrides={**small, "wrappers": stack}
    )
    run = tmp_path / "bc"
    result = train_bc(
        QUEST, dataset_id, run, overrides={**small, "wrappers": stack, "bc_epochs": 2}
    )
    assert result.extra["samples"] > 10 and run_wrappers(run) == stack
    report = evaluate(QUEST, str(run / "model.zip"), episodes=1, seed=4)
    assert report["episodes"][0]["length"] > 0
    # the same dataset under another stack: one line, nothing written
    with pytest.raises(DatasetError, match="record it with the same wrappers") as info:
        train_bc(QUEST, dataset_id, tmp_path / "other", overrides={**small, "wrappers": []})
    assert "\n" not in str(info.value) and not (tmp_path / "other").exists()


@pytest.mark.slow
def test_rllib_trains_with_a_wrapper_stack_and_eval_rebuilds_it(tmp_path: Path) -> None:
    """The RLlib engine: the stack inside its envs, the SB3 Dict policy exported, eval rebuilds."""
    from metabonk_gym.training.rllib import RayOptions, train_rllib

    run = tmp_path / "rllib"
    overrides = {**FAST, "max_episode_steps": 20, "total_steps": 128, "wrappers": STACK}
    result = train_rllib(QUEST, run, overrides=overrides, ray=RayOptions(num_env_runners=0))
    assert result.num_timesteps >= 128 and run_wrappers(run) == STACK
    report = evaluate(QUEST, str(run / "model.zip"), episodes=1, seed=1)
    assert report["episodes"][0]["length"] == 20
    fading = [{"name": "pause_to_think", "engine": "oracle", "advice_fade": [0, 10]}]
    with pytest.raises(ConfigError, match="RLlib runs cannot fade"):
        train_rllib(
            QUEST, tmp_path / "fade", overrides={**FAST, "wrappers": fading}, ray=RayOptions()
        )


def test_a_swarm_curriculum_trains_through_a_wrapper_stack(tmp_path: Path) -> None:
    """Curricula reach StartWrapper's methods through the stack (`env_method`)."""
    from metabonk_gym.training.curriculum import run_curriculum

    result = run_curriculum(
        QUEST,
        {"swarm": {"total_steps": 96}},
        tmp_path / "swarm",
        overrides={**FAST, "max_episode_steps": 30, "wrappers": [{"name": "button_history"}]},
        swarm=True,
        milestone="player_x",
    )
    assert result.num_timesteps >= 96 and result.milestones
    assert run_wrappers(tmp_path / "swarm") == [{"name": "button_history"}]
    meta = read_model_metadata(tmp_path / "swarm" / "model.zip")
    assert meta["config"]["policy"] == "MultiInputPolicy"
