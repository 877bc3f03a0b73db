"""`metabonk eval --n-envs N` for agents that act on observations alone runs on the shared-memory
vector engine: each episode keeps its seed, so a deterministic model's report is the same with one
env or several."""

from __future__ import annotations

from pathlib import Path

import pytest

from metabonk_gym.agents.episode import episode_config
from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.agents.parallel import parallel_ok, play_parallel
from metabonk_gym.training.ppo import train_ppo

ARENA = "MetaBonk/BonkArena-v0"
TINY = {
    "n_envs": 2,
    "n_steps": 32,
    "batch_size": 32,
    "n_epochs": 1,
    "obs_type": "state",
    "frame_stack": 2,
    "max_episode_steps": 30,
    "checkpoint_every": 0,
    "video_every": 0,
    "total_steps": 64,
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    result = train_ppo(ARENA, tmp_path_factory.mktemp("arena") / "run", overrides=TINY)
    assert result.model_path is not None
    return result.model_path


def test_a_deterministic_model_gives_the_same_episodes_with_one_env_or_three(model: Path) -> None:
    sequential = evaluate(ARENA, str(model), episodes=5, seed=10, deterministic=True)
    cfg = episode_config(ARENA, str(model))
    ended: list[int] = []
    parallel = play_parallel(
        ARENA,
        str(model),
        cfg,
        seeds=[10 + i for i in range(5)],
        n_envs=3,
        agent_kwargs={"deterministic": True},
        on_episode=lambda r: ended.append(r.index),
    )
    assert sorted(ended) == [0, 1, 2, 3, 4]
    assert [r.to_dict() for r in parallel] == sequential["episodes"]


def test_agents_that_read_the_emulator_are_refused() -> None:
    assert parallel_ok("random") and parallel_ok("runs/x/model.zip")
    assert not parallel_ok("scripted")
    cfg = episode_config(ARENA, "scripted")
    with pytest.raises(ValueError, match="one env at a time"):
        play_parallel(ARENA, "scripted", cfg, seeds=[0], n_envs=2)


def test_eval_n_envs_runs_a_deterministic_model_on_the_engine(model: Path, tmp_path: Path) -> None:
    one = evaluate(ARENA, str(model), episodes=4, seed=3, deterministic=True)
    many = evaluate(
        ARENA, str(model), n_envs=2, episodes=4, seed=3, deterministic=True, out=tmp_path / "r.json"
    )
    assert many["episodes"] == one["episodes"] and many["n_envs"] == 2
    assert (tmp_path / "r.json").exists()


def test_random_agent_reports_repeat_whatever_the_env_count() -> None:
    two = evaluate(
        ARENA, "random", n_envs=2, episodes=3, seed=5, overrides={"max_episode_steps": 20}
    )
    three = evaluate(
        ARENA, "random", n_envs=3, episodes=3, seed=5, overrides={"max_episode_steps": 20}
    )
    assert two["episodes"] == three["episodes"]


def test_engine_videos_are_the_best_and_worst_episodes_played_again(tmp_path: Path) -> None:
    short = {"max_episode_steps": 20}
    plain = evaluate(ARENA, "random", n_envs=2, episodes=3, seed=5, overrides=short)
    filmed = evaluate(
        ARENA, "random", n_envs=2, episodes=3, seed=5, overrides=short, video_dir=tmp_path
    )
    assert filmed["episodes"] == plain["episodes"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.mp4", "worst.mp4"]
    assert {filmed["videos"]["best_episode"], filmed["videos"]["worst_episode"]} <= {0, 1, 2}
