"""`metabonk bench explore`: the Go-Explore explorer's env steps/s against the raw mGBA core in
the same process and run.

Exploring is stepping, state loads and saves with no learner, so each env should step nearly as
fast as its core. The raw baseline is `metabonk bench env`'s: the emulator object in a plain loop
(step `frameskip` frames, read the screen). The explorer runs its real rounds (cells from the
game's cells file, returns by state loads, bursts, archive merges in this process) on 1 env and
on `n_envs` envs; rounds alternate raw and explorer so that machine noise hits both alike, after
`warmup` rounds of exploring (the first rounds find a new cell nearly every step). Reported:
medians, and explorer steps/s / raw core steps/s (judged by `EXPLORE_VS_RAW_TARGET` for one
env; with more envs the sum over the engine, against one core). `figure_records` turns them into
the record of `docs/figures/explore.json`.

>>> r = {"raw_core_steps_per_s": 1000.0, "explore_1env_steps_per_s": 900.0,
...      "explore_1env_vs_raw": 0.9}
>>> row = figure_records(r, rounds=3)[0]
>>> row["id"], row["target"], row["met"], row["text"]
('explore-vs-raw', '>= 0.8x', True, '900 vs 1,000 steps/s = 0.90x')
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.bench.env_speed import _raw_core_fps  # the same raw loop as `bench env`
from metabonk_gym.bench.figures import Target
from metabonk_gym.training.explore import Explorer, ExploreSettings, open_explorer

#: `bench explore`'s pass mark: one env's explorer keeps this fraction of the raw core's steps/s.
EXPLORE_VS_RAW_TARGET = Target(">=", 0.8, "x")


def _explorer(env_id: str, n_envs: int, settings: ExploreSettings) -> Explorer:
    """An explorer on a fresh archive (nothing is written)."""
    s = ExploreSettings(**{**settings.__dict__, "n_envs": n_envs})
    return open_explorer(env_id, s, Path("unused"))[0]


def _explore_sps(explorer: Explorer, steps: int) -> float:
    """Env steps/s of explorer rounds totalling at least `steps` steps per env."""
    before = explorer.steps_now
    start = time.perf_counter()
    while explorer.steps_now - before < steps * explorer.envs.num_envs:
        explorer.round()
    return (explorer.steps_now - before) / (time.perf_counter() - start)


def run(
    env_id: str = "MetaBonk/BonkQuest-v0",
    steps: int = 2000,
    rounds: int = 3,
    n_envs: int = 2,
    warmup: int = 5,
) -> dict[str, Any]:
    """Measure and return every figure of `metabonk bench explore`.

    >>> r = run(steps=200, rounds=1, n_envs=1, warmup=1)
    >>> r["explore_1env_steps_per_s"] > 0 and r["raw_core_steps_per_s"] > 0
    True
    """
    settings = ExploreSettings(max_frames=1, job_steps=400)
    explorers = {1: _explorer(env_id, 1, settings)}
    if n_envs > 1:
        explorers[n_envs] = _explorer(env_id, n_envs, settings)
    env = gym.make(env_id)  # after the workers have forked: the raw core lives here alone
    try:
        core: Any = env.unwrapped
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        masks = [core.action_masks[a] for a in rng.integers(0, len(core.action_masks), 4096)]
        for explorer in explorers.values():
            for _ in range(warmup):
                explorer.round()
        raw: list[float] = []
        measured: dict[int, list[float]] = {n: [] for n in explorers}
        for _ in range(rounds):
            raw.append(_raw_core_fps(env, steps, core.frameskip, masks) / core.frameskip)
            for n, explorer in explorers.items():
                measured[n].append(_explore_sps(explorer, steps))
        result: dict[str, Any] = {
            "env_id": env_id,
            "frameskip": core.frameskip,
            "raw_core_steps_per_s": statistics.median(raw),
        }
        for n, values in measured.items():
            result[f"explore_{n}env_steps_per_s"] = statistics.median(values)
            result[f"explore_{n}env_vs_raw"] = (
                statistics.median(values) / result["raw_core_steps_per_s"]
            )
            result[f"explore_{n}env_cells"] = len(explorers[n].archive)
        return result
    finally:
        env.close()
        for explorer in explorers.values():
            explorer.envs.close()


def figure_records(result: dict[str, Any], rounds: int) -> list[dict[str, Any]]:
    """`bench explore`'s result as the `explore-vs-raw` record (judged by
    `EXPLORE_VS_RAW_TARGET`; the sum over more envs, when measured, is in its text)."""
    ratio = float(result["explore_1env_vs_raw"])
    raw = result["raw_core_steps_per_s"]
    text = f"{result['explore_1env_steps_per_s']:,.0f} vs {raw:,.0f} steps/s = {ratio:.2f}x"
    more = sorted(int(k.split("_")[1][:-3]) for k in result if k.endswith("env_vs_raw"))[1:]
    for n in more:
        summed, vs = result[f"explore_{n}env_steps_per_s"], result[f"explore_{n}env_vs_raw"]
        text += f"; {n} envs summed: {summed:,.0f} steps/s = {vs:.2f}x of one core"
    return [
        {
            "id": "explore-vs-raw",
            "name": "explorer env steps/s (1 env: returns by state loads, bursts, archive "
            "merges) vs the raw mGBA core, same run, medians of "
            f"{rounds} alternating rounds",
            "value": round(ratio, 3),
            "unit": "x",
            "text": text,
            **EXPLORE_VS_RAW_TARGET.record(ratio),
            "seeds": None,
        }
    ]
