"""`--n-envs N`: play and evaluate in N processes at once give the episodes one process gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.agents.many import play_many, split_episodes

ENV = "MetaBonk/BonkQuest-v0"
SHORT = {"max_episode_steps": 60}


def test_episodes_are_split_contiguously_and_none_is_lost() -> None:
    for episodes in range(1, 20):
        for n in (1, 2, 3, 16):
            parts = split_episodes(episodes, n)
            assert [f for f, _ in parts] == [
                sum(c for _, c in parts[:k]) for k in range(len(parts))
            ]
            assert sum(c for _, c in parts) == episodes and all(c > 0 for _, c in parts)
    with pytest.raises(Exception, match="--n-envs must be >= 1"):
        split_episodes(3, 0)


def test_evaluate_in_two_processes_matches_one_process() -> None:
    one = evaluate(ENV, "scripted", episodes=3, seed=5, overrides=SHORT)
    two = evaluate(ENV, "scripted", n_envs=2, episodes=3, seed=5, overrides=SHORT)
    assert two["n_envs"] == 2
    assert [e["seed"] for e in two["episodes"]] == [5, 6, 7]
    assert two["episodes"] == one["episodes"]


def test_play_in_two_processes_keeps_the_episode_order() -> None:
    result = play_many(ENV, "scripted", 2, episodes=3, seed=1, overrides=SHORT)
    assert [e.index for e in result.episodes] == [0, 1, 2]
    assert [e.seed for e in result.episodes] == [1, 2, 3]
    assert all(e.length == 60 or e.terminated for e in result.episodes)


def test_videos_and_the_ladder_work_at_any_n_envs(tmp_path: Path) -> None:
    """With two processes each keeps its best and worst video; the overall best and worst are
    the ones one process keeps, and the ladder ranks the merged report."""
    one = evaluate(ENV, "scripted", episodes=3, seed=5, overrides=SHORT, video_dir=tmp_path / "a")
    two = evaluate(
        ENV,
        "scripted",
        n_envs=2,
        episodes=3,
        seed=5,
        overrides=SHORT,
        video_dir=tmp_path / "b",
        ladder=tmp_path / "ladder.json",
    )
    assert two["episodes"] == one["episodes"]
    for label in ("best", "worst"):
        assert two["videos"][f"{label}_episode"] == one["videos"][f"{label}_episode"]
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["best.mp4", "worst.mp4"]
    assert (tmp_path / "b" / "best.mp4").stat().st_size > 1000
    assert two["ladder_rank"] == 1 and two["n_envs"] == 2
