"""Env steps per second over SkyEmu's HTTP control server, against the embedded core.

Both envs run the same game, seed and random actions at the same frameskip in one process, in
alternating rounds so that machine noise hits both alike; medians are reported with their
ratio. The SkyEmu side is the test peer (the embedded core behind SkyEmu's HTTP protocol, in a
subprocess) unless `skyemu_url` or `skyemu_binary` points at a real SkyEmu, so with the peer
the figure is what the HTTP link costs; with a real SkyEmu, it is what users get.

The timing loop works on any env (here CartPole, ending and resetting within the 500 steps):

>>> env = gym.make("CartPole-v1")
>>> _steps_per_s(env, np.zeros(500, int)) > 0
True
>>> env.close()
"""

from __future__ import annotations

import statistics
import time
from typing import Any, cast

import gymnasium as gym
import numpy as np

import metabonk_gym  # noqa: F401  (registers the envs)
from metabonk_gym.gba.skyemu_peer import PeerProcess


def _steps_per_s(env: gym.Env, actions: np.ndarray) -> float:
    env.reset(seed=0)
    start = time.perf_counter()
    for i, action in enumerate(actions):
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset(seed=i)
    return len(actions) / (time.perf_counter() - start)


def _requests_per_step(env: gym.Env, actions: np.ndarray) -> float:
    """HTTP requests per env step (resets excluded)."""
    client = cast(Any, env.unwrapped).backend.client
    env.reset(seed=0)
    before = client.requests
    for action in actions:
        env.step(int(action))
    return (client.requests - before) / len(actions)


def run(
    env_id: str = "MetaBonk/BonkQuest-v0",
    steps: int = 500,
    rounds: int = 3,
    frameskip: int = 4,
    skyemu_url: str | None = None,
    skyemu_binary: str | None = None,
) -> dict[str, Any]:
    """Measure and return every figure of `metabonk bench skyemu`."""
    embedded = gym.make(env_id, frameskip=frameskip)
    peer = None
    try:
        if skyemu_url is None and skyemu_binary is None:
            peer = PeerProcess(cast(Any, embedded.unwrapped).rom_path)
            skyemu_url, server = peer.url, "test peer (embedded core behind SkyEmu's HTTP protocol)"
        else:
            server = skyemu_url or f"SkyEmu binary {skyemu_binary}"
        kwargs = {"skyemu_url": skyemu_url} if skyemu_url else {"skyemu_binary": skyemu_binary}
        sky = gym.make(env_id, frameskip=frameskip, backend="skyemu", **kwargs)
        try:
            n_actions = int(cast(Any, embedded.action_space).n)
            actions = np.random.default_rng(0).integers(0, n_actions, steps)
            client = cast(Any, sky.unwrapped).backend.client
            start = time.perf_counter()
            for _ in range(200):
                client.ping()
            ping_ms = (time.perf_counter() - start) / 200 * 1000
            embedded_sps, sky_sps, client_cpu = [], [], []
            for _ in range(rounds):
                embedded_sps.append(_steps_per_s(embedded, actions))
                cpu = time.process_time()
                sky_sps.append(_steps_per_s(sky, actions))
                client_cpu.append((time.process_time() - cpu) / steps * 1000)
            requests = _requests_per_step(sky, actions[:100])
            start = time.perf_counter()
            sky.reset(seed=1)
            reset_ms = (time.perf_counter() - start) * 1000
        finally:
            sky.close()
    finally:
        embedded.close()
        if peer is not None:
            peer.stop()
    result: dict[str, Any] = {
        "env_id": env_id,
        "frameskip": frameskip,
        "server": server,
        "embedded_steps_per_s": statistics.median(embedded_sps),
        "skyemu_steps_per_s": statistics.median(sky_sps),
    }
    result["skyemu_vs_embedded"] = result["skyemu_steps_per_s"] / result["embedded_steps_per_s"]
    result["skyemu_frames_per_s"] = result["skyemu_steps_per_s"] * frameskip
    result["http_requests_per_step"] = requests
    # CPU this process spent per SkyEmu step (HTTP client, BMP decoding, env): the backend's own
    # cost, apart from the server's emulation and the wait for it.
    result["client_cpu_ms_per_step"] = statistics.median(client_cpu)
    result["ping_ms"] = ping_ms
    result["skyemu_reset_ms"] = reset_ms
    return result


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s figure as a record for `docs/figures/skyemu.json` (a reference: no target).

    >>> figure_records({"skyemu_steps_per_s": 311.0, "embedded_steps_per_s": 2045.0,
    ...                 "skyemu_vs_embedded": 0.152, "http_requests_per_step": 3.8})[0]["text"]
    '311 vs 2,045 env steps/s embedded = 0.15x, 3.8 HTTP requests per step'
    """
    ratio = result["skyemu_vs_embedded"]
    text = f"{result['skyemu_steps_per_s']:,.0f} vs {result['embedded_steps_per_s']:,.0f} env"
    text += f" steps/s embedded = {ratio:.2f}x, {result['http_requests_per_step']:.1f} HTTP"
    text += " requests per step"
    name = "env steps/s over SkyEmu's HTTP protocol vs the embedded core"
    row = {"id": "vs-embedded", "name": name, "value": round(ratio, 3), "unit": "x", "text": text}
    return [row | {"target": None, "met": None}]
