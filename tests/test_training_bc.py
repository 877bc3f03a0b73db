"""Recording Minari datasets, behavioural cloning, evaluation reports, ladders and videos."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import minari
import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.agents.ranking import read_ladder
from metabonk_gym.agents.record import record
from metabonk_gym.training.bc import train_bc
from metabonk_gym.training.datasets import datasets_root
from metabonk_gym.training.errors import ConfigError, DatasetError
from metabonk_gym.training.ppo import train_ppo

QUEST = "MetaBonk/BonkQuest-v0"
SMALL = {
    "downscale": 8,
    "frame_stack": 2,
    "features_dim": 32,
    "n_envs": 2,
    "n_steps": 32,
    "batch_size": 32,
}


def new_id(name: str) -> str:
    return f"test/{name}-{uuid.uuid4().hex[:8]}-v0"


def test_record_bc_eval_and_finetune(tmp_path: Path) -> None:
    dataset_id = new_id("expert")
    result = record(QUEST, "scripted", dataset_id, episodes=3, seed=10, overrides=SMALL)
    assert result.saved_episodes == 3 and all(e.success for e in result.episodes)

    ds = minari.load_dataset(dataset_id)
    assert ds.total_episodes == 3 and ds.spec.observation_space.shape == (20, 30, 1)
    episode = next(ds.iterate_episodes())
    assert len(episode.observations) == len(episode.actions) + 1
    assert episode.terminations[-1] and not episode.truncations.any()
    assert episode.infos["rooms_visited"][-1] == 2 and "novelty" in episode.infos["reward_terms"]
    assert ds.spec.env_spec.kwargs["downscale"] == 8

    run_dir = tmp_path / "bc"
    bc = train_bc(
        QUEST, dataset_id, run_dir, overrides={**SMALL, "bc_epochs": 30, "bc_batch_size": 16}
    )
    assert bc.extra["accuracy"] > 0.6 and (run_dir / "model.zip").is_file()
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    assert {"bc/loss", "bc/accuracy", "bc/value_loss"} <= set(acc.Tags()["scalars"])
    assert len(acc.Scalars("bc/loss")) == 30

    report = evaluate(
        QUEST, str(run_dir / "model.zip"), episodes=2, seed=10, out=tmp_path / "report.json"
    )
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["n_episodes"] == 2 and {
        "mean_return",
        "std_return",
        "win_rate",
        "episodes",
    } <= set(saved)
    assert (
        saved["episodes"][0]["seed"] == 10 and "rooms_visited" in saved["episodes"][0]["variables"]
    )
    assert report["state"] == "room1"

    tuned = train_ppo(
        QUEST,
        tmp_path / "ppo",
        overrides={**SMALL, "total_steps": 64, "video_every": 0},
        init_from=run_dir / "model.zip",
    )
    assert tuned.num_timesteps == 64
    with pytest.raises(
        ConfigError, match="different preprocessing.*downscale: model 8 vs config 4"
    ):
        train_ppo(
            QUEST, tmp_path / "ppo2", overrides={"downscale": 4}, init_from=run_dir / "model.zip"
        )


def test_dataset_checks(tmp_path: Path) -> None:
    rgb_id = new_id("rgb")
    record(
        QUEST,
        "random",
        rgb_id,
        episodes=1,
        overrides={"obs_type": "rgb", "downscale": 1, "max_episode_steps": 12},
    )
    # full RGB converts to any preprocessing; the converted frames train
    out = train_bc(QUEST, rgb_id, tmp_path / "from-rgb", overrides={**SMALL, "bc_epochs": 1})
    assert out.extra["samples"] == 12

    with pytest.raises(DatasetError, match="already exists"):
        record(QUEST, "random", rgb_id, episodes=1)
    with pytest.raises(DatasetError, match="not found.*local datasets"):
        train_bc(QUEST, new_id("missing"), tmp_path / "a", overrides=SMALL)
    with pytest.raises(DatasetError, match="recorded with frameskip 4, the config uses 2"):
        train_bc(QUEST, rgb_id, tmp_path / "b", overrides={**SMALL, "frameskip": 2})
    with pytest.raises(
        DatasetError, match="recorded on MetaBonk/BonkQuest-v0, not MetaBonk/BonkArena-v0"
    ):
        train_bc("MetaBonk/BonkArena-v0", rgb_id, tmp_path / "c", overrides=SMALL)
    gray_id = new_id("gray")
    record(QUEST, "random", gray_id, episodes=1, overrides={**SMALL, "max_episode_steps": 5})
    with pytest.raises(DatasetError, match="only full-size RGB"):
        train_bc(QUEST, gray_id, tmp_path / "d", overrides={**SMALL, "downscale": 4})
    with pytest.raises(DatasetError, match="malformed dataset id"):
        record(QUEST, "random", "no version", episodes=1)
    assert not any((tmp_path / name).exists() for name in "abcd")


def test_stopped_episode_is_saved_truncated_or_dropped() -> None:
    steps = {"n": 0}

    def stop_after(n: int):
        def stop() -> bool:
            steps["n"] += 1
            return steps["n"] > n

        return stop

    kept_id = new_id("partial")
    result = record(
        QUEST,
        "random",
        kept_id,
        episodes=3,
        overrides={**SMALL, "max_episode_steps": 8},
        stop=stop_after(12),
    )
    assert result.stopped and result.partial == "saved as truncated" and result.saved_episodes == 2
    ds = minari.load_dataset(kept_id)
    last = list(ds.iterate_episodes())[-1]
    assert (
        last.truncations[-1]
        and len(last.actions) == 4
        and any("truncated" in m for m in result.messages)
    )

    steps["n"] = 0
    dropped_id = new_id("dropped")
    result = record(QUEST, "random", dropped_id, episodes=2, overrides=SMALL, stop=stop_after(0))
    assert (
        result.partial == "dropped" and result.saved_episodes == 0 and result.dataset_path is None
    )
    assert not (datasets_root() / dropped_id).exists()
    assert not list(datasets_root().glob(".staging-*"))


def test_eval_videos_and_ladder(tmp_path: Path) -> None:
    ladder = tmp_path / "ladder.json"
    videos = tmp_path / "videos"
    expert = evaluate(QUEST, "scripted", episodes=2, seed=0, video_dir=videos, ladder=ladder)
    assert expert["win_rate"] == 1.0 and expert["ladder_rank"] == 1
    assert sorted(p.name for p in videos.iterdir()) == ["best.mp4", "worst.mp4"]
    assert (videos / "best.mp4").stat().st_size > 1000
    rand = evaluate(
        QUEST, "random", episodes=2, seed=0, overrides={"max_episode_steps": 30}, ladder=ladder
    )
    assert rand["ladder_rank"] == 2 and np.isfinite(rand["std_return"])
    assert [e["agent"] for e in read_ladder(ladder)] == ["scripted", "random"]
    with pytest.raises(ConfigError, match="must be a .json file"):
        evaluate(QUEST, "random", episodes=1, ladder=tmp_path / "ladder.csv")


def test_arena_state_vector_record_bc_ppo_and_eval(tmp_path: Path) -> None:
    """BonkArena's default training observation is the RAM state vector (an MLP policy): it
    records, clones, fine-tunes with PPO from the clone and evaluates end to end."""
    arena = "MetaBonk/BonkArena-v0"
    small = {"n_envs": 2, "n_steps": 64, "batch_size": 64, "max_episode_steps": 150}
    dataset_id = new_id("arena-state")
    record(arena, "scripted", dataset_id, episodes=2, seed=3, overrides=small)
    ds = minari.load_dataset(dataset_id)
    assert ds.spec.observation_space.shape == (45,)
    assert ds.spec.env_spec.kwargs["obs_type"] == "state"

    labels = np.concatenate([np.asarray(e.actions) for e in ds.iterate_episodes()])
    majority = np.bincount(labels).max() / len(labels)
    bc = train_bc(arena, dataset_id, tmp_path / "bc", overrides={**small, "bc_epochs": 100})
    # the expert's kiting is a function of this vector: cloning beats always-the-commonest-move
    assert bc.extra["accuracy"] > majority + 0.1, (bc.extra, majority)
    ppo = train_ppo(
        arena,
        tmp_path / "ppo",
        overrides={**small, "total_steps": 256},
        init_from=str(tmp_path / "bc" / "model.zip"),
    )
    assert ppo.num_timesteps >= 256
    report = evaluate(arena, str(tmp_path / "ppo" / "model.zip"), episodes=2, seed=5)
    assert [e["seed"] for e in report["episodes"]] == [5, 6]
    assert all(e["length"] <= 150 and "time_s" in e["variables"] for e in report["episodes"])
    with pytest.raises(DatasetError, match="state"):
        train_bc(arena, dataset_id, tmp_path / "pix", overrides={"obs_type": "grayscale"})


def test_bc_proof_reports_the_median_and_the_worst_of_its_seeds(tmp_path: Path) -> None:
    from metabonk_gym.agents.proof import bc_room1

    lines: list[str] = []
    figures = bc_room1(
        tmp_path, expert_episodes=2, eval_episodes=2, finetune_steps=0, seeds=3, log=lines.append
    )
    per_seed = figures["seeds"]
    assert [s["seed"] for s in per_seed] == [0, 1, 2]
    assert len({s["dataset"] for s in per_seed}) == 3  # each seed records its own episodes
    ratios = sorted(s["bc_to_expert_return"] for s in per_seed)
    assert figures["bc_to_expert_return_median"] == pytest.approx(ratios[1])
    assert figures["bc_to_expert_return_worst"] == pytest.approx(ratios[0])
    assert figures["passed_bc"] is (ratios[0] >= 0.7)
    assert (tmp_path / "bc" / "model.zip").is_file() and (
        tmp_path / "bc-seed2" / "model.zip"
    ).is_file()
    assert len(lines) == 4  # one line per seed, then the figures
    # a re-run keeps the clones already trained (it resumes) and reports the same datasets
    again = bc_room1(
        tmp_path, expert_episodes=2, eval_episodes=2, finetune_steps=0, seeds=3, log=lines.append
    )
    assert [s["dataset"] for s in again["seeds"]] == [s["dataset"] for s in per_seed]
    with pytest.raises(ValueError, match="seeds"):
        bc_room1(tmp_path, seeds=0)
