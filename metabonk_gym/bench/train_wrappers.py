"""Training speed with a wrapper stack vs none: PPO env steps per second, ratio in one run.

What: the same PPO config (the env's training defaults, `frame_stack` 4 on the vector env) trained
for `steps` env steps, once with `wrappers: [tile_tokens]` (the VRAM tile tokens, sprites and
classes beside the frame, every key frame-stacked, `MultiInputPolicy`) and once without; rounds
alternate the two so machine noise hits both, and medians are compared. The time covers the
whole learn call (env workers, the wrappers inside them, the policy and its updates), not
start-up. Each measurement runs in a fresh process (as pyperf does), so no variant inherits
another's heap, allocator or thread pools. Why: a wrapper stack is worth training with only if
it costs little (target >= 0.8x).

>>> VARIANTS["tile_tokens + frame stack"]
[{'name': 'tile_tokens'}]
>>> figure_records({"ratio": 0.81, "steps_per_s_none": 220.0, "cpu_ratio": 0.8,
...     "steps_per_s_tile_tokens_frame_stack": 178.2, "n_envs": 4})[0]["met"]
True
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from metabonk_gym.bench.figures import Target
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv
from metabonk_gym.training.policies import make_ppo

#: The stacks compared: name -> `wrappers:` list (the config's frame stack applies to both).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "tile_tokens + frame stack": [{"name": "tile_tokens"}],
}

#: The longest one measurement (start-up, warm-up and `steps`) may take.
MEASURE_TIMEOUT_S = 900.0
#: Target: training with the wrapper stack keeps this fraction of the plain run's env steps/s.
RATIO_TARGET = Target(">=", 0.8, "x")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process used so far (Linux `/proc/PID/stat`; 0.0 where
    there is none).

    >>> cpu_seconds(os.getpid()) > 0
    True
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _steps_per_second(
    env_id: str, wrappers: list[dict[str, Any]], steps: int, n_envs: int
) -> tuple[float, float]:
    """Env steps per second of PPO's `learn(steps)` (after one warm-up rollout), and the CPU
    milliseconds it took per env step in the trainer and its env workers together (what a
    loaded machine shares out, so a steadier figure than the wall clock's)."""
    from stable_baselines3.common.logger import configure

    cfg = resolve_config(
        env_id,
        overrides={
            "wrappers": wrappers,
            "n_envs": n_envs,
            "n_steps": 128,
            "batch_size": 128,
            "video_every": 0,
        },
    )
    venv = make_train_venv(env_id, cfg)
    try:
        model = make_ppo(cfg, venv)
        with tempfile.TemporaryDirectory() as log_dir:
            model.set_logger(configure(str(Path(log_dir)), []))
            model.learn(cfg.n_steps * n_envs)  # warm-up: workers, first update
            pids = [os.getpid(), *venv.unwrapped.engine.pids]
            cpu = sum(cpu_seconds(pid) for pid in pids)
            start = time.perf_counter()
            model.learn(steps, reset_num_timesteps=False)
            elapsed = time.perf_counter() - start
            cpu = sum(cpu_seconds(pid) for pid in pids) - cpu
        done = float(model.num_timesteps - cfg.n_steps * n_envs)
        return done / elapsed, 1000.0 * cpu / done
    finally:
        close_venv(venv)


def run_train_wrappers(
    env_id: str = "MetaBonk/BonkQuest-v0", steps: int = 4096, rounds: int = 5, n_envs: int = 4
) -> dict[str, Any]:
    """Median env steps/s of each variant over `rounds` alternating rounds, the ratio of the
    wrapped stack to none (`ratio`, the figure), the CPU per env step of each (trainer and env
    workers) and its ratio (none's CPU / the stack's: the speed ratio a machine with every core
    busy would show), and the machine's 1-minute load average before and after."""
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    load_start = os.getloadavg()[0]  # a shared machine's load moves the ratio: say what it was
    context = multiprocessing.get_context("spawn")  # a fresh interpreter per measurement
    pool = ProcessPoolExecutor(1, mp_context=context, max_tasks_per_child=1)
    try:
        for _ in range(rounds):
            for name, wrappers in VARIANTS.items():
                job = pool.submit(_steps_per_second, env_id, wrappers, steps, n_envs)
                rate, cpu_ms = job.result(timeout=MEASURE_TIMEOUT_S)
                rates[name].append(rate)
                cpu[name].append(cpu_ms)
    except BaseException:  # a hung or interrupted measurement: its process goes, never waited on
        for child in multiprocessing.active_children():
            child.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    none = statistics.median(rates["none"])
    wrapped = statistics.median(rates["tile_tokens + frame stack"])
    return {
        "env": env_id,
        "steps_per_round": steps,
        "rounds": rounds,
        "n_envs": n_envs,
        "steps_per_s_none": none,
        "steps_per_s_tile_tokens_frame_stack": wrapped,
        "ratio": wrapped / none,
        "target": RATIO_TARGET.value,
        "cpu_ms_per_step_none": statistics.median(cpu["none"]),
        "cpu_ms_per_step_tile_tokens_frame_stack": statistics.median(
            cpu["tile_tokens + frame stack"]
        ),
        "cpu_ratio": statistics.median(cpu["none"])
        / statistics.median(cpu["tile_tokens + frame stack"]),
        "load_1min_start": load_start,
        "load_1min_end": os.getloadavg()[0],
    }


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run_train_wrappers`'s figure as a record for `docs/figures/train-wrappers.json`."""
    ratio = result["ratio"]
    text = f"{ratio:.2f}x ({result['steps_per_s_tile_tokens_frame_stack']:,.0f} vs "
    text += f"{result['steps_per_s_none']:,.0f} env steps/s; CPU ratio {result['cpu_ratio']:.2f}x)"
    name = "PPO env steps/s with `wrappers: [tile_tokens]` vs no wrappers"
    name += f" (BonkQuest, {result['n_envs']} envs, frame stack 4)"
    row = {"id": "tile-tokens-stack", "name": name, "value": round(ratio, 3), "unit": "x"}
    row |= {"text": text} | RATIO_TARGET.record(ratio)
    row |= {"headline": "PPO speed with tile-token wrappers vs none", "short": f"{ratio:.2f}x"}
    return [row]
