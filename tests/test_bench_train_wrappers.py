"""`metabonk bench train-wrappers` runs small: both variants train in fresh processes and the
figure is the ratio of their medians."""

from __future__ import annotations

import pytest

from metabonk_gym.bench.train_wrappers import run_train_wrappers


@pytest.mark.slow
def test_the_bench_measures_both_variants_and_their_ratio() -> None:
    result = run_train_wrappers("MetaBonk/BonkQuest-v0", steps=256, rounds=1, n_envs=2)
    none, wrapped = result["steps_per_s_none"], result["steps_per_s_tile_tokens_frame_stack"]
    assert none > 0 and wrapped > 0
    assert result["ratio"] == pytest.approx(wrapped / none)
    assert (
        result["cpu_ms_per_step_none"] > 0 and result["cpu_ms_per_step_tile_tokens_frame_stack"] > 0
    )
    assert result["rounds"] == 1 and result["target"] == 0.8
