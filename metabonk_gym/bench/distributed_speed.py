"""`metabonk bench distributed`: PPO training throughput (env steps/s, learning included) of
RLlib vs the SB3 path at the same env count, RLlib with 1 vs 2 env runners, and a projection
for 1, 4 and 16 nodes from the measured per-runner sampling rate and learner time per batch.

The projection is a formula, not a measurement (`PROJECTION_FORMULA`): each node adds R runners
sampling at r steps/s each, the batch grows with the nodes, and one learner updates at t_L
seconds per node batch B; network and scheduling costs are left out.

>>> round(project(nodes=4, batch=256, runners=2, per_runner=500.0, learner_s=0.1), 1)
1561.0
>>> demo = {"envs": 2, "sb3_steps_per_s": 244.0, "rllib_1_runner_steps_per_s": 325.0,
...         "rllib_2_runners_steps_per_s": 274.0, "rllib_vs_sb3": 1.33, "rllib_2_vs_1_runners": 0.84}
>>> [r["text"] for r in figure_records(demo)][:2]
['1.33x (325 vs 244 env steps/s)', '244 env steps/s']
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv
from metabonk_gym.training.ppo import load_or_make, quiet_logger
from metabonk_gym.training.rllib import RayOptions, build_config, connect, probe, register_env

PROJECTION_FORMULA = "steps/s(N) = N*B / (B/(R*r) + N*t_L)"


def project(nodes: int, batch: int, runners: int, per_runner: float, learner_s: float) -> float:
    """`PROJECTION_FORMULA` for `nodes` nodes."""
    return nodes * batch / (batch / (runners * per_runner) + nodes * learner_s)


def _cfg(env_id: str, envs: int, n_steps: int) -> Any:
    return resolve_config(
        env_id,
        overrides={
            "n_envs": envs,
            "n_steps": n_steps,
            "batch_size": min(128, n_steps * envs),
            "n_epochs": 2,
            "video_every": 0,
            "checkpoint_every": 0,
            "total_steps": 10**9,
        },
    )


def sb3_speed(env_id: str, envs: int, steps: int, n_steps: int = 128) -> float:
    """Env steps/s of `model.learn` on the SB3 path (one warm-up rollout first)."""
    cfg = _cfg(env_id, envs, n_steps)
    venv = make_train_venv(env_id, cfg)
    try:
        model = load_or_make(cfg, venv)
        model.set_logger(quiet_logger())  # SB3's default makes an empty /tmp/SB3-<date> a call
        model.learn(n_steps * envs)
        start, before = time.perf_counter(), model.num_timesteps
        model.learn(steps, reset_num_timesteps=False)
        return (model.num_timesteps - before) / (time.perf_counter() - start)
    finally:
        close_venv(venv)


def rllib_speed(
    env_id: str, envs: int, runners: int, steps: int, n_steps: int = 128
) -> dict[str, float]:
    """Env steps/s of RLlib PPO `train()` with `runners` env runners sharing `envs` envs, plus
    learner seconds per batch (RLlib's timer, median over iterations) and the per-runner
    sampling rate (the batch over the rest of a measured iteration's wall time)."""
    cfg = _cfg(env_id, envs, n_steps)
    opts = RayOptions(num_env_runners=runners, envs_per_runner=max(envs // runners, 1))
    obs, act, names = probe(env_id, cfg, opts)
    register_env()
    algo = build_config(env_id, cfg, opts, "ppo", obs, act, names, None).build_algo()
    try:
        algo.train()  # warm-up: the runners' first reset and the first update
        sampled, iterations, learns = 0, 0, []
        start = time.perf_counter()
        while sampled < steps:
            result = algo.train()
            sampled += int(result["env_runners"]["num_env_steps_sampled"])
            iterations += 1
            learns.append(float((result.get("timers") or {})["learner_update_timer"]))
        seconds = time.perf_counter() - start
        batch = sampled / iterations
        learner_s = statistics.median(learns)
        sampling_s = max(seconds / iterations - learner_s, 1e-9)  # the rest of an iteration
        return {
            "steps_per_s": sampled / seconds,
            "per_runner_steps_per_s": batch / runners / sampling_s,
            "learner_s_per_batch": learner_s,
            "batch": batch,
        }
    finally:
        algo.stop()


def run(env_id: str = "MetaBonk/BonkQuest-v0", envs: int = 2, steps: int = 2048) -> dict[str, Any]:
    """All figures of `metabonk bench distributed` (starts Ray locally and shuts it down)."""
    import os

    import ray

    out: dict[str, Any] = {"env_id": env_id, "envs": envs, "steps": steps, "cpus": os.cpu_count()}
    out["sb3_steps_per_s"] = sb3_speed(env_id, envs, steps)
    started = connect(RayOptions(num_env_runners=2, num_cpus=max(os.cpu_count() or 1, 3)))
    try:
        one = rllib_speed(env_id, envs, 1, steps)
        two = rllib_speed(env_id, envs, 2, steps)
    finally:
        if started:
            ray.shutdown()
    out["rllib_1_runner_steps_per_s"] = one["steps_per_s"]
    out["rllib_2_runners_steps_per_s"] = two["steps_per_s"]
    out["rllib_vs_sb3"] = one["steps_per_s"] / out["sb3_steps_per_s"]
    out["rllib_2_vs_1_runners"] = two["steps_per_s"] / one["steps_per_s"]
    r, t_l, b = one["per_runner_steps_per_s"], one["learner_s_per_batch"], int(one["batch"])
    out["measured_per_runner_steps_per_s (r)"] = r
    out["measured_learner_s_per_batch (t_L)"] = t_l
    out["batch_per_node (B)"] = b
    out["projection_formula (R=1 runner per node)"] = PROJECTION_FORMULA
    for nodes in (1, 4, 16):
        out[f"projected_steps_per_s_{nodes}_nodes"] = project(nodes, b, 1, r, t_l)
    return out


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s figures as records for `docs/figures/distributed.json` (ids as there; references,
    no targets: this bench compares paths, and the projection is a formula)."""
    one, sb3, n = result["rllib_1_runner_steps_per_s"], result["sb3_steps_per_s"], result["envs"]
    name = f"RLlib PPO (1 runner x {n} envs) vs the SB3 path at {n} envs, env steps/s"
    text = f"{result['rllib_vs_sb3']:.2f}x ({one:,.0f} vs {sb3:,.0f} env steps/s)"
    rows = [{"id": "rllib-vs-sb3", "name": name, "value": round(result["rllib_vs_sb3"], 3)}]
    rows[0] |= {"unit": "x", "text": text}
    name = f"SB3 path, {n} subprocess envs, PPO env steps/s (learning included)"
    rows.append({"id": "sb3-2-envs", "name": name, "value": round(sb3), "unit": "steps/s"})
    rows[-1]["text"] = f"{sb3:,.0f} env steps/s"
    ratio = result["rllib_2_vs_1_runners"]
    name = f"RLlib, 2 runners vs 1 runner ({n} envs in all), env steps/s"
    text = f"{ratio:.2f}x ({result['rllib_2_runners_steps_per_s']:,.0f} vs {one:,.0f} env steps/s)"
    rows.append({"id": "rllib-2-runners", "name": name, "value": round(ratio, 3), "unit": "x"})
    rows[-1]["text"] = text
    keys = [f"projected_steps_per_s_{k}_nodes" for k in (1, 4, 16)]
    if all(k in result for k in keys):
        projected = [float(result[k]) for k in keys]
        text = " / ".join(f"{p:,.0f}" for p in projected) + " steps/s"
        name = "projected env steps/s for 1 / 4 / 16 nodes"
        rows.append(
            {"id": "projection", "name": name, "value": round(projected[0]), "unit": "steps/s"}
        )
        rows[-1] |= {"text": text, "note": "a projection, not a measurement"}
    return [row | {"target": None, "met": None} for row in rows]
