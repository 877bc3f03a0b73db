"""Each bench's pass mark is declared once, as a `Target` in its module, and the figure records
in docs/figures/ (which docs/benchmarks.md and the README are made from) say the same words: a
record whose target drifted from the code's fails here (measure it again with `--figures`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metabonk_gym.agents import proof, whole_games
from metabonk_gym.bench import (
    bonklink_speed,
    env_speed,
    explore_speed,
    integrate_speed,
    megabonk_video,
    memory_speed,
    serve_speed,
    think_speed,
    train_wrappers,
    vector_speed,
    video_speed,
    watch_speed,
)
from metabonk_gym.bench.figures import Target
from metabonk_gym.target import describe

FIGURES = Path(__file__).resolve().parent.parent / "docs" / "figures"
#: (group, figure id) -> the Target its bench checks (or the words of several it checks at once;
#: a comparison of two runs, not of a value with a mark, is words alone).
TARGETS: dict[tuple[str, str], Target | str] = {
    ("bonklink", "lockstep"): bonklink_speed.STEPS_TARGET,
    ("bonklink", "realtime-cpu"): bonklink_speed.ADDED_MS_TARGET,
    ("env", "env-vs-raw"): env_speed.ENV_VS_RAW_TARGET,
    ("explore", "explore-vs-raw"): explore_speed.EXPLORE_VS_RAW_TARGET,
    ("integrate", "ram-filter-step"): integrate_speed.STEP_TARGET_MS,
    ("integrate", "tile-classes"): integrate_speed.CLASS_TARGET,
    ("integrate", "walkability"): integrate_speed.WALK_TARGET,
    ("learning", "ppo-room1"): proof.PPO_ROOM1_TARGET,
    ("learning", "bc-room1"): proof.BC_TARGET,
    ("learning", "bc-ppo"): proof.FINETUNE_TARGET,
    ("learning", "arena-ppo"): proof.ARENA_SURVIVAL_TARGET,
    ("learning", "megabonk-ppo"): proof.MEGABONK_TARGET,
    ("learning", "quest-full"): describe(whole_games.QUEST_TARGETS),
    ("learning", "arena-dagger"): describe(whole_games.ARENA_TARGETS),
    ("megabonk-video", "idm-move"): megabonk_video.IDM_TARGET,
    ("megabonk-video", "idm-buttons"): megabonk_video.IDM_TARGET,
    ("megabonk-video", "bc-survival"): megabonk_video.BC_RATIO_TARGET,
    ("memory", "cpu-per-step"): memory_speed.BUDGET_MS,
    ("memory", "steps-to-win"): memory_speed.STEPS_RATIO_TARGET,
    ("serve", "batching"): serve_speed.THROUGHPUT_TARGET,
    ("serve", "env-steps-thinking"): serve_speed.ENVS_TARGET,
    ("serve", "p95-16-clients"): serve_speed.P95_TARGET,
    ("think", "oracle-ceiling"): think_speed.CEILING_TARGET,
    ("train-wrappers", "tile-tokens-stack"): train_wrappers.RATIO_TARGET,
    ("vector", "main-cpu-lean"): vector_speed.LEAN_US_TARGET,
    ("vector", "ppo-collection"): vector_speed.COLLECTION_TARGET,
    ("video", "idm-accuracy"): video_speed.IDM_TARGET,
    ("video", "bc-from-idm"): video_speed.BC_TARGET,
    ("video", "bc-from-idm-noisy"): video_speed.BC_TARGET,
    ("watch", "ppo-with-viewer"): watch_speed.RATIO_TARGET,
    ("watch", "stepping-with-viewer"): watch_speed.RATIO_TARGET,
}


@pytest.mark.parametrize(("group", "figure"), sorted(TARGETS))
def test_the_record_says_the_code_target(group: str, figure: str) -> None:
    records = json.loads((FIGURES / f"{group}.json").read_text())["figures"]
    (record,) = [r for r in records if r["id"] == figure]
    assert record["target"] == str(TARGETS[group, figure])
