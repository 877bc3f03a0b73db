"""`metabonk bench vector`: the shared-memory engine against gymnasium's `AsyncVectorEnv` and
SB3's `SubprocVecEnv`, measured in the same run, with the machine's load beside the figures.

Figures:
* **main-process CPU per env step** (`time.process_time()` of this process over the stepping
  loop, divided by the env steps) at each env count, engine vs `AsyncVectorEnv`: the engine
  with `make_vec`'s defaults (every game variable in `infos`, observations copied) and lean
  (`info_keys=()`, `copy=False`: what training asks for);
* **N envs vs one plain env** in this process (N = the CPU count): env steps per second;
* **training collection** (policy inference included, no update): env steps per second of an
  SB3 PPO policy stepping `SubprocVecEnv` (the old training path) vs `SharedMemoryVecEnv`, with
  `MlpPolicy` on BonkArena's state vector and `CnnPolicy` on BonkQuest's pixels.

>>> figures = main_cpu_per_step("MetaBonk/BonkQuest-v0", [2], steps=20, baseline=False)
>>> figures["engine_us_per_env_step"][0] > 0
True
>>> scaled = {"n_envs": 2, "single_env_steps_per_s": 1783.0, "engine_steps_per_s": 1826.0,
...           "engine_vs_single": 1.024}
>>> [(r["id"], r["met"]) for r in figure_records({"scaling": scaled})]
[('scaling', False)]
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.bench.figures import Target
from metabonk_gym.vector import make_one, make_vec

#: Targets: main-process CPU per env step (lean, at 8 envs), N envs' speed as a multiple of one
#: env's per env (N = cores), PPO collection on the engine as a multiple of `SubprocVecEnv`'s.
LEAN_US_TARGET = Target("<=", 15.0, "us", suffix=" at 8 envs")
SCALING_TARGET = 0.9
COLLECTION_TARGET = Target(">=", 1.5, "x")


def load() -> dict[str, Any]:
    """The CPU count and the 1-minute load average (other work skews every figure)."""
    return {"cpus": os.cpu_count() or 1, "load_1min": round(os.getloadavg()[0], 2)}


def _step_loop(
    step: Callable[[np.ndarray], Any], actions: np.ndarray, steps: int
) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of `steps` calls of `step`."""
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(steps):
        step(actions[i % len(actions)])
    return time.perf_counter() - wall, time.process_time() - cpu


def _actions(space: gym.Space, num_envs: int, count: int = 64) -> np.ndarray:
    rng = np.random.default_rng(0)
    n = int(getattr(space, "n", 2))
    return rng.integers(0, n, (count, num_envs))


def _measure_vector(envs: Any, num_envs: int, steps: int) -> tuple[float, float]:
    """(env steps per second, main-process microseconds of CPU per env step)."""
    envs.reset(seed=0)
    actions = _actions(envs.single_action_space, num_envs)
    _step_loop(envs.step, actions, 10)  # warm up
    wall, cpu = _step_loop(envs.step, actions, steps)
    return steps * num_envs / wall, 1e6 * cpu / (steps * num_envs)


def main_cpu_per_step(
    env_id: str, counts: Sequence[int], steps: int = 300, baseline: bool = True, **kwargs: Any
) -> dict[str, Any]:
    """Main-process CPU per env step and steps/s at each count: engine vs `AsyncVectorEnv`."""
    out: dict[str, Any] = {"counts": list(counts)}
    names = ("engine", "engine_lean", "async_vector_env") if baseline else ("engine",)
    for name in names:
        us, sps = [], []
        for n in counts:
            if name == "engine":
                envs: Any = make_vec(env_id, n, **kwargs)
            elif name == "engine_lean":  # what training asks for: no per-step infos, no copies
                envs = make_vec(env_id, n, info_keys=(), copy=False, **kwargs)
            else:
                fns = [partial(make_one, env_id, (), dict(kwargs)) for _ in range(n)]
                envs = gym.vector.AsyncVectorEnv(fns, shared_memory=True)
            try:
                rate, cpu = _measure_vector(envs, n, steps)
            finally:
                envs.close()
            sps.append(rate)
            us.append(cpu)
        out[f"{name}_us_per_env_step"] = us
        out[f"{name}_steps_per_s"] = sps
    if baseline:
        out["cpu_ratio_async_over_engine"] = [
            a / e
            for a, e in zip(out["async_vector_env_us_per_env_step"], out["engine_us_per_env_step"])
        ]
    return out


def scaling(env_id: str, steps: int = 300, **kwargs: Any) -> dict[str, Any]:
    """N envs (N = CPU count) on the engine vs one plain env in this process."""
    n = os.cpu_count() or 1
    env = gym.make(env_id, **kwargs)
    try:
        env.reset(seed=0)
        actions = _actions(env.action_space, 1)[:, 0]

        def one(a: Any) -> None:
            _, _, terminated, truncated, _ = env.step(int(a))
            if terminated or truncated:
                env.reset()

        _step_loop(one, actions, 10)
        wall, _ = _step_loop(one, actions, steps)
        single = steps / wall
    finally:
        env.close()
    envs = make_vec(env_id, n, **kwargs)
    try:
        rate, _ = _measure_vector(envs, n, steps)
    finally:
        envs.close()
    return {
        "n_envs": n,
        "single_env_steps_per_s": single,
        "engine_steps_per_s": rate,
        "engine_vs_single": rate / single,
        "target_vs_single": 0.9 * n,
    }


def _collection_sps(venv: Any, model: Any, steps: int) -> float:
    obs = venv.reset()
    for _ in range(5):
        obs, *_ = venv.step(model.predict(obs, deterministic=False)[0])
    start = time.perf_counter()
    for _ in range(steps):
        actions, _ = model.predict(obs, deterministic=False)
        obs, *_ = venv.step(actions)
    return steps * venv.num_envs / (time.perf_counter() - start)


def collection(
    env_id: str, policy: str, n_envs: int = 4, steps: int = 200, **kwargs: Any
) -> dict[str, Any]:
    """Collection-phase env steps/s of SB3 PPO: `SubprocVecEnv` (before) vs the engine (after)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from metabonk_gym.training.vecenv import SharedMemoryVecEnv

    fns: list[Callable[[], gym.Env]] = [
        partial(make_one, env_id, (), dict(kwargs)) for _ in range(n_envs)
    ]
    result: dict[str, Any] = {"env_id": env_id, "policy": policy, "n_envs": n_envs}
    rates: dict[str, list[float]] = {"subproc": [], "engine": []}
    for _ in range(2):  # alternate, so that load changes hit both alike
        for name in ("subproc", "engine"):
            if name == "subproc":
                venv: Any = SubprocVecEnv(fns, start_method="fork")
            else:
                venv = SharedMemoryVecEnv(fns, context="fork", info_keys=())  # PPO reads none
            try:
                model = PPO(policy, venv, n_steps=64, device="cpu", seed=0)
                rates[name].append(_collection_sps(venv, model, steps))
            finally:
                venv.close()
    result["subproc_steps_per_s"] = statistics.median(rates["subproc"])
    result["engine_steps_per_s"] = statistics.median(rates["engine"])
    result["engine_vs_subproc"] = result["engine_steps_per_s"] / result["subproc_steps_per_s"]
    return result


def run(
    counts: Sequence[int] = (2, 4, 8, 16),
    steps: int = 300,
    collect: bool = True,
) -> dict[str, Any]:
    """Every figure of `metabonk bench vector` (see the module docstring)."""
    figures: dict[str, Any] = {"load_before": load()}
    figures["main_cpu"] = main_cpu_per_step("MetaBonk/BonkQuest-v0", counts, steps)
    figures["scaling"] = scaling("MetaBonk/BonkQuest-v0", steps)
    if collect:
        figures["collection_mlp_arena_state"] = collection(
            "MetaBonk/BonkArena-v0", "MlpPolicy", steps=steps, obs_type="state"
        )
        figures["collection_cnn_quest_pixels"] = collection(
            "MetaBonk/BonkQuest-v0", "CnnPolicy", steps=max(50, steps // 3), downscale=2
        )
    figures["load_after"] = load()
    return figures


def _per_count(counts: Sequence[int], values: Sequence[float], unit: str) -> str:
    shown = " / ".join(f"{v:.1f}" for v in values)
    return f"{shown} {unit} at {' / '.join(map(str, counts))} envs"


def _main_cpu_records(main: dict[str, Any]) -> list[dict[str, Any]]:
    counts = main["counts"]
    at = counts.index(8) if 8 in counts else len(counts) - 1
    lean, full = main.get("engine_lean_us_per_env_step"), main["engine_us_per_env_step"]
    rows: list[dict[str, Any]] = []
    if lean is not None:
        name = (
            "main-process CPU per env step, `info_keys=()`, `copy=False` (what training asks for)"
        )
        met = LEAN_US_TARGET.met(lean[at]) if counts[at] == 8 else None
        rows.append(
            {"id": "main-cpu-lean", "name": name, "value": round(lean[at], 1), "unit": "us"}
        )
        rows[-1] |= {"text": _per_count(counts, lean, "us"), "met": met}
        rows[-1]["target"] = str(LEAN_US_TARGET) if met is not None else None
    name = "the same with `make_vec`'s defaults (game variables in `infos`, observations copied)"
    rows.append(
        {"id": "main-cpu-defaults", "name": name, "value": round(full[at], 1), "unit": "us"}
    )
    rows[-1] |= {"text": _per_count(counts, full, "us"), "target": None, "met": None}
    if "cpu_ratio_async_over_engine" in main:
        ratios = main["cpu_ratio_async_over_engine"]
        text = " / ".join(f"{r:.1f}x" for r in ratios) + " the engine's defaults"
        name = "gymnasium's `AsyncVectorEnv`, same envs, main-process CPU vs the engine's defaults"
        rows.append({"id": "vs-async", "name": name, "value": round(ratios[at], 2), "unit": "x"})
        rows[-1] |= {"text": text, "target": None, "met": None}
    return rows


def figure_records(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s figures as records for `docs/figures/vector.json` (:mod:`metabonk_gym.bench.figures`)."""
    rows = _main_cpu_records(figures["main_cpu"]) if "main_cpu" in figures else []
    if "scaling" in figures:
        s = figures["scaling"]
        n, ratio = s["n_envs"], s["engine_vs_single"]
        target = Target(">=", SCALING_TARGET * n, "x", fmt=".1f")  # per env: SCALING_TARGET
        rows.append(
            {
                "id": "scaling",
                "name": f"vector envs: {n} envs (= cores) vs one plain env in-process",
                "value": round(ratio, 2),
                "unit": "x",
                "text": f"{s['engine_steps_per_s']:,.0f} vs {s['single_env_steps_per_s']:,.0f} steps/s = {ratio:.2f}x",
                **target.record(ratio),
                "headline": f"{n} vector envs vs 1 env, on {n} cores",
                "short": f"{ratio:.2f}x",
            }
        )
    kinds = [("collection_mlp_arena_state", "MLP on BonkArena's state vector")]
    kinds.append(("collection_cnn_quest_pixels", "CNN on BonkQuest pixels"))
    found = [(figures[k]["engine_vs_subproc"], words) for k, words in kinds if k in figures]
    if found:
        name = "PPO collection (policy inference, no update), engine vs SB3 `SubprocVecEnv`, 4 envs"
        text = "; ".join(f"{words} {r:.2f}x" for r, words in found)
        best = min(r for r, _ in found)
        rows.append({"id": "ppo-collection", "name": name, "value": round(best, 2), "unit": "x"})
        rows[-1] |= {"text": text} | COLLECTION_TARGET.record(best)
    return rows
