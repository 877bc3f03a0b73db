"""Env frame rate against the raw mGBA core, stable-retro's own RetroEnv, and 2 vectorised envs.

The raw baseline drives the very emulator object inside the env (stable-retro allows one per
process) in a plain loop: step 4 frames, read the screen once. Rounds alternate raw and env so
that machine noise hits both alike; medians are reported.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.bench.figures import Target
from metabonk_gym.gba.buttons import mask_to_retro
from metabonk_gym.gba.env import GBAEnv
from metabonk_gym.gba.integration import games_dir
from metabonk_gym.vector import make_vec


def _raw_core_fps(env: Any, steps: int, frameskip: int, masks: list[int]) -> float:
    em = env.unwrapped.backend.emulator
    arrays = [mask_to_retro(m) for m in masks]
    start = time.perf_counter()
    for i in range(steps):
        em.set_button_mask(arrays[i % len(arrays)], 0)
        for _ in range(frameskip):
            em.step()
        em.get_screen()
    return steps * frameskip / (time.perf_counter() - start)


def _env_fps(env: gym.Env, steps: int, frameskip: int, actions: np.ndarray) -> float:
    start = time.perf_counter()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(int(actions[i % len(actions)]))
        if terminated or truncated:
            env.reset()
    return steps * frameskip / (time.perf_counter() - start)


def _retro_env_fps(game: str, steps: int, frameskip: int) -> float | None:
    """stable-retro's RetroEnv on the same ROM (it copies all of RAM every frame)."""
    import stable_retro as retro

    retro.data.Integrations.add_custom_path(str(games_dir()))
    env = retro.make(
        f"{game}",
        state=retro.State.NONE,
        inttype=retro.data.Integrations.CUSTOM_ONLY,
        render_mode=None,
    )
    try:
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        done = 0
        while done < steps:
            action = rng.integers(0, 2, env.action_space.shape)
            for _ in range(frameskip):  # RetroEnv steps one frame per call
                env.step(action)
            done += 1
        return steps * frameskip / (time.perf_counter() - start)
    finally:
        env.close()


def _vector_sps(env_id: str, num_envs: int, steps: int, kwargs: dict[str, Any]) -> float:
    envs = make_vec(env_id, num_envs, **kwargs)
    n_actions = int(getattr(envs.single_action_space, "n"))  # noqa: B009 (Discrete only)
    try:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(20):  # warm up the workers
            envs.step(rng.integers(0, n_actions, num_envs))
        start = time.perf_counter()
        for _ in range(steps):
            envs.step(rng.integers(0, n_actions, num_envs))
        return steps * num_envs / (time.perf_counter() - start)
    finally:
        envs.close()


def run(
    env_id: str = "MetaBonk/BonkQuest-v0",
    steps: int = 1500,
    rounds: int = 3,
    vector: bool = True,
    retro_env: bool = True,
    **kwargs: Any,
) -> dict[str, Any]:
    """Measure and return every figure of `metabonk bench env`.

    >>> r = run(steps=20, rounds=1, vector=False, retro_env=False)
    >>> r["env_fps"] > 0 and r["raw_core_fps"] > 0 and r["frameskip"]
    4
    """

    env = gym.make(env_id, **kwargs)
    core = env.unwrapped
    if not isinstance(core, GBAEnv):
        raise ValueError(f"metabonk bench env measures GBA envs; {env_id} is not one")
    frameskip = core.frameskip
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, len(core.action_masks), 4096)
    masks = [core.action_masks[a] for a in actions]
    raw, wrapped = [], []
    for _ in range(rounds):
        raw.append(_raw_core_fps(env, steps, frameskip, masks))
        env.reset(seed=0)
        wrapped.append(_env_fps(env, steps, frameskip, actions))
    game = core.integration.name
    env.close()
    del env
    result: dict[str, Any] = {
        "env_id": env_id,
        "frameskip": frameskip,
        "raw_core_fps": statistics.median(raw),
        "env_fps": statistics.median(wrapped),
    }
    result["env_vs_raw"] = result["env_fps"] / result["raw_core_fps"]
    if retro_env:
        import gc

        gc.collect()
        fps = _retro_env_fps(game, steps, frameskip)
        result["retro_env_fps"] = fps
        result["retro_env_vs_raw"] = fps / result["raw_core_fps"] if fps else None
    if vector:
        one = _vector_sps(env_id, 1, steps, kwargs)
        two = _vector_sps(env_id, 2, steps, kwargs)
        result["vec1_steps_per_s"] = one
        result["vec2_steps_per_s"] = two
        result["vec2_vs_vec1"] = two / one
        result["vec2_vs_single_env"] = two / (result["env_fps"] / frameskip)
    return result


#: `bench env`'s pass mark: the env keeps this fraction of the raw core's frame rate.
ENV_VS_RAW_TARGET = Target(">=", 0.85, "x")


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`bench env`'s result as figure records (the target is `ENV_VS_RAW_TARGET`).

    >>> figure_records({"env_fps": 8335.0, "raw_core_fps": 8511.0, "env_vs_raw": 0.979})[0]["met"]
    True
    """
    ratio = result["env_vs_raw"]
    text = f"{result['env_fps']:,.0f} vs {result['raw_core_fps']:,.0f} frames/s = {ratio:.2f}x"
    rows = [
        {
            "id": "env-vs-raw",
            "name": "env frames/s vs stable-retro's raw `RetroEmulator` in a plain loop",
            "value": round(ratio, 3),
            "unit": "x",
            "text": text,
            **ENV_VS_RAW_TARGET.record(ratio),
            "headline": "GBA env speed vs the raw emulator core",
            "short": f"{ratio:.2f}x",
        }
    ]
    if result.get("retro_env_vs_raw") is not None:
        retro = result["retro_env_vs_raw"]
        rows.append(
            {
                "id": "retro-env-vs-raw",
                "name": "stable-retro's own `RetroEnv` on the same ROM, vs the raw core",
                "value": round(retro, 3),
                "unit": "x",
                "text": f"{result['retro_env_fps']:,.0f} frames/s = {retro:.2f}x",
                "target": None,
                "met": None,
            }
        )
    return rows
