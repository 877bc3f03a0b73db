"""`metabonk bench watch`: training env steps per second with one live viewer connected, against
the same training with no watch at all, measured in one run.

Two PPO trainings are built side by side (`make_train_venv` and `make_ppo`, what `train ppo`
runs): one plain, one with views requested and the dashboard running (`--watch`: `LiveProcess`).
A viewer in another process (as a browser
would be) holds the live WebSocket open and reads every frame. Rounds alternate between the two
(`model.learn` of whole rollouts and updates), so load from other work hits both alike; the figure
is the ratio of the medians (and the median of each adjacent pair's ratio), with the frames each
env delivered per second to the viewer and the CPU time per env step of everything each setting
runs (this process, the env workers, the viewer's process): on a machine busy with other work the
wall-clock ratio swings, the CPU figure much less. `env_only` repeats it with random actions and
no learning: the harshest case, where stepping is all the work.

>>> _ratio([2.0, 4.0], [1.0, 2.0, 3.0])  # medians: 3.0 / 2.0
1.5
>>> part = {"ratio_viewer_vs_none": 0.975, "steps_per_s_one_viewer": 685.0,
...         "steps_per_s_no_watch": 703.0, "cpu_ms_per_env_step_one_viewer": 1.5,
...         "cpu_ms_per_env_step_no_watch": 1.49, "frames_per_s_per_env": 4.0}
>>> [(r["id"], r["met"]) for r in figure_records({"n_envs": 16, "ppo": part})]
[('ppo-with-viewer', True), ('cpu-per-step', None)]
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.bench.figures import Target
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv
from metabonk_gym.training.policies import make_ppo
from metabonk_gym.training.ppo import quiet_logger
from metabonk_gym.vector.view import request_views
from metabonk_gym.watch.live import LiveProcess
from metabonk_gym.watch.server import unpack_frames


def _ratio(numerator: list[float], denominator: list[float]) -> float:
    return statistics.median(numerator) / statistics.median(denominator)


def _viewer(port: int, frames: Any, nbytes: Any, stop: Any, envs_seen: Any) -> None:
    """Run in its own process: a live viewer that reads every message until `stop`."""
    from websockets.sync.client import connect

    seen: set[int] = set()
    with connect(f"ws://127.0.0.1:{port}/ws", max_size=2**24, open_timeout=20) as ws:
        while not stop.is_set():
            try:
                message = ws.recv(timeout=0.5)
            except TimeoutError:
                continue
            if isinstance(message, bytes):
                records = unpack_frames(message)
                seen.update(index for index, _, _ in records)
                with frames.get_lock():
                    frames.value += len(records)
                    nbytes.value += len(message)
                envs_seen.value = len(seen)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (all their threads; Linux /proc).

    >>> cpu_seconds([os.getpid()]) > 0
    True
    """
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def _viewers(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/live", timeout=10) as response:
        return int(json.loads(response.read())["viewers"])


def _engine_pids(venv: Any) -> list[int]:
    return list(venv.unwrapped.engine.pids)


def bench_watch_speed(
    env_id: str = "MetaBonk/BonkQuest-v0",
    *,
    n_envs: int = 16,
    rounds: int = 5,
    seconds: float = 4.0,
) -> dict[str, Any]:
    """The figures of the module docstring. `seconds`: the length of a round (PPO rounds: whole
    rollouts, about that long at 400 env steps/s)."""
    cfg = resolve_config(env_id, overrides={"n_envs": n_envs})
    request_views(False)
    plain = make_train_venv(env_id, cfg)
    watched: Any = None
    server: Any = None
    viewer: Any = None
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    frames, nbytes, envs_seen = ctx.Value("q", 0), ctx.Value("q", 0), ctx.Value("i", 0)
    try:
        server = LiveProcess("127.0.0.1", 0, label="bench watch").start()  # what --watch does
        watched = make_train_venv(env_id, cfg)
        request_views(False)
        viewer = ctx.Process(
            target=_viewer, args=(server.port, frames, nbytes, stop, envs_seen), daemon=True
        )
        viewer.start()
        _await_viewer(server.port, viewer)
        # CPU of everything each setting runs: this process (the training loop), the env
        # workers, and with a viewer the dashboard's process and the viewer's
        pids = {
            "none": [os.getpid(), *_engine_pids(plain)],
            "viewer": [
                os.getpid(),
                *_engine_pids(watched),
                int(server._process.pid),
                int(viewer.pid),
            ],
        }
        models = {"none": make_ppo(cfg, plain), "viewer": make_ppo(cfg, watched)}
        for model in models.values():
            model.set_logger(quiet_logger())  # SB3's default: an empty /tmp/SB3-<date> a call
        rollout = cfg.n_steps * n_envs
        learn_steps = max(1, round(seconds * 400 / rollout)) * rollout  # whole rollouts

        def learn(name: str) -> int:
            models[name].learn(total_timesteps=learn_steps, reset_num_timesteps=False)
            return learn_steps

        for name in ("none", "viewer"):
            models[name].learn(total_timesteps=rollout)  # warm up: the first rollout
        venvs = {"none": plain, "viewer": watched}
        n = int(getattr(plain.action_space, "n", 2))
        rng = np.random.default_rng(0)

        def step(name: str) -> int:
            venv, start, count = venvs[name], time.perf_counter(), 0
            while time.perf_counter() - start < seconds:
                venv.step(rng.integers(0, n, venv.num_envs))
                count += venv.num_envs
            return count

        out: dict[str, Any] = {
            "env_id": env_id,
            "n_envs": n_envs,
            "rounds": rounds,
            "load_1min_before": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
        }
        for label, work in (("ppo", learn), ("env_only", step)):
            out[label] = _alternate(work, pids, rounds, (frames, nbytes), n_envs)
        out["envs_seen_by_viewer"] = int(envs_seen.value)
        out["load_1min_after"] = round(os.getloadavg()[0], 2)
        return out
    finally:
        stop.set()
        if viewer is not None:
            viewer.join(5)
            if viewer.is_alive():
                viewer.kill()
        if server is not None:
            server.stop()
        if watched is not None:
            close_venv(watched)
        close_venv(plain)


def _await_viewer(port: int, viewer: Any) -> None:
    """Wait (60 s at most) until the viewer process is connected to the dashboard on `port`."""
    deadline = time.monotonic() + 60
    while _viewers(port) < 1:
        if time.monotonic() > deadline or not viewer.is_alive():
            raise RuntimeError("the viewer process did not connect")
        time.sleep(0.1)


def _alternate(
    work: Callable[[str], int],
    pids: dict[str, list[int]],
    rounds: int,
    counters: tuple[Any, Any],
    n_envs: int,
) -> dict[str, Any]:
    """`rounds` rounds of `work` without a viewer and with one, in alternating order: steps/s,
    CPU per env step and what the viewer received (`counters`: its frames and bytes)."""
    frames, nbytes = counters
    rates: dict[str, list[float]] = {"none": [], "viewer": []}
    cpu: dict[str, list[float]] = {"none": [], "viewer": []}
    watched_s, watched_frames, watched_bytes = 0.0, 0, 0
    for r in range(rounds):
        order = ["none", "viewer"]
        for name in order if r % 2 == 0 else order[::-1]:
            f0, b0 = frames.value, nbytes.value
            c0, t0 = cpu_seconds(pids[name]), time.perf_counter()
            count = work(name)
            wall = time.perf_counter() - t0
            rates[name].append(count / wall)
            cpu[name].append((cpu_seconds(pids[name]) - c0) * 1000.0 / count)
            if name == "viewer":
                time.sleep(0.3)  # frames of the round still on their way
                watched_s += time.perf_counter() - t0
                watched_frames += frames.value - f0
                watched_bytes += nbytes.value - b0
    return {
        "steps_per_s_no_watch": round(statistics.median(rates["none"]), 1),
        "steps_per_s_one_viewer": round(statistics.median(rates["viewer"]), 1),
        "ratio_viewer_vs_none": round(_ratio(rates["viewer"], rates["none"]), 4),
        "ratio_per_round_pair_median": round(
            statistics.median(v / p for v, p in zip(rates["viewer"], rates["none"])), 4
        ),
        "cpu_ms_per_env_step_no_watch": round(statistics.median(cpu["none"]), 4),
        "cpu_ms_per_env_step_one_viewer": round(statistics.median(cpu["viewer"]), 4),
        "frames_per_s_per_env": round(watched_frames / watched_s / n_envs, 2),
        "viewer_kbytes_per_s": round(watched_bytes / watched_s / 1000, 1),
        "rounds_no_watch": [round(x, 1) for x in rates["none"]],
        "rounds_one_viewer": [round(x, 1) for x in rates["viewer"]],
    }


#: Target: training (and stepping) with one viewer keeps this fraction of the steps/s of none.
RATIO_TARGET = Target(">=", 0.97, "x")


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`bench_watch_speed`'s figures as records for `docs/figures/watch.json` (ids as there)."""
    rows: list[dict[str, Any]] = []
    n = result["n_envs"]
    kinds = (
        ("ppo", "ppo-with-viewer", "PPO env steps/s"),
        ("env_only", "stepping-with-viewer", "random-action stepping (no learning)"),
    )
    for label, slug, words in kinds:
        if label not in result:
            continue
        part = result[label]
        ratio = part["ratio_viewer_vs_none"]
        text = f"{ratio:.3f}x ({part['steps_per_s_one_viewer']:,.0f} vs {part['steps_per_s_no_watch']:,.0f} steps/s; "
        text += f"{part['frames_per_s_per_env']:.1f} frames/s per env delivered)"
        name = f"{words} with one viewer connected vs no watch, {n} BonkQuest envs"
        rows.append({"id": slug, "name": name, "value": round(ratio, 3), "unit": "x", "text": text})
        rows[-1] |= RATIO_TARGET.record(ratio)
    if "ppo" in result:
        part = result["ppo"]
        watched, plain = (
            part["cpu_ms_per_env_step_one_viewer"],
            part["cpu_ms_per_env_step_no_watch"],
        )
        name = "PPO training CPU per env step (all processes) with one viewer vs none"
        text = f"{watched / plain:.2f}x ({watched:.2f} vs {plain:.2f} ms)"
        rows.append({"id": "cpu-per-step", "name": name, "value": round(watched / plain, 3)})
        rows[-1] |= {"unit": "x", "text": text, "target": None, "met": None}
    return rows
