"""Several embedded mGBA cores in one process (`metabonk_gym.gba.backends.core_copies`): each
core on its own copy of stable-retro is independent of the others and as deterministic as a
core alone in a fresh process."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import gymnasium as gym
import numpy as np

import metabonk_gym  # noqa: F401

QUEST = "MetaBonk/BonkQuest-v0"
STEPS = 200

# One env alone in a fresh process: actions from `rng(seed)`, or action 3 throughout.
SOLO = """
import hashlib, sys
import gymnasium as gym, numpy as np
import metabonk_gym
seed, policy = int(sys.argv[1]), sys.argv[2]
env = gym.make("MetaBonk/BonkQuest-v0")
env.reset(seed=seed)
rng, h = np.random.default_rng(seed), hashlib.sha1()
for _ in range(int(sys.argv[3])):
    action = int(rng.integers(0, env.action_space.n)) if policy == "random" else 3
    obs, *_ = env.step(action)
    h.update(obs.tobytes())
    h.update(env.unwrapped.backend.read_bytes(0x02000000, 256))
print(h.hexdigest())
"""


def _solo(seed: int, policy: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", SOLO, str(seed), policy, str(STEPS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.strip()


def test_cores_in_one_process_are_independent_and_match_fresh_processes() -> None:
    envs = [gym.make(QUEST) for _ in range(3)]
    try:
        slots = [env.unwrapped.backend._slot for env in envs]  # type: ignore[attr-defined]
        assert slots == [0, 1, 2]
        policies = ["random", "still", "random"]
        seeds = [4, 5, 6]
        hashes = [hashlib.sha1() for _ in envs]
        rngs = [np.random.default_rng(seed) for seed in seeds]
        for env, seed in zip(envs, seeds):
            env.reset(seed=seed)
        for _ in range(STEPS):  # interleaved, so that shared state would show
            for env, rng, policy, h in zip(envs, rngs, policies, hashes):
                action = int(rng.integers(0, env.action_space.n)) if policy == "random" else 3
                obs, *_ = env.step(action)
                h.update(obs.tobytes())
                h.update(env.unwrapped.backend.read_bytes(0x02000000, 256))  # type: ignore[attr-defined]
        got = [h.hexdigest() for h in hashes]
    finally:
        for env in envs:
            env.close()
    assert got == [_solo(seed, policy) for seed, policy in zip(seeds, policies)]


def test_a_slot_is_reused_after_its_env_closes() -> None:
    first = gym.make(QUEST)
    second = gym.make(QUEST)
    assert second.unwrapped.backend._slot == 1  # type: ignore[attr-defined]
    second.close()
    third = gym.make(QUEST)
    try:
        assert third.unwrapped.backend._slot == 1  # type: ignore[attr-defined]
        obs, _ = third.reset(seed=0)
        assert obs.shape == (160, 240, 3)
    finally:
        third.close()
        first.close()
