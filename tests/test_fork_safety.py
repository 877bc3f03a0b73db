"""A forked vector-env worker never finalizes the garbage it inherited from its parent.

In CI both workers of `metabonk curriculum --swarm`, forked by a test process that had run Ray
tests before, died of SIGSEGV in gRPC's `pollset_shutdown` inside `ray/_raylet.so` (the kernel log
named the library and the offset) while building their envs: their garbage collections finalized
the Ray session's leftover objects, whose gRPC clients' poller threads exist only in the parent.
The engine now forks with the collector paused and each child freezes what it inherited first
(`metabonk_gym.process.adopt_inherited_objects`, the recipe of `gc.freeze`'s documentation)."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from metabonk_gym.vector import SharedMemoryVectorEnv
from metabonk_gym.vector.engine import VecEngine

# The CI failure itself, in a fresh process: a Ray session leaves its objects as garbage (a long
# test process keeps them in its oldest generation, collected rarely), then a vector env is built
# and each worker collects garbage while it builds its env.
RAY_GARBAGE = """
import gc, json, os
import gymnasium as gym
import numpy as np
import ray
import metabonk_gym  # noqa: F401

gc.disable()  # Ray's objects stay garbage until a collection, as in a long test process
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)

@ray.remote
def one():
    return 1

assert ray.get(one.remote()) == 1
ray.shutdown()
from metabonk_gym.vector.engine import VecEngine

def build():
    gc.collect()  # what a worker's allocations do sooner or later
    return gym.make("MetaBonk/BonkQuest-v0")

try:
    engine = VecEngine([build, build], context="fork")  # what training asks for
except Exception as exc:
    print(json.dumps({"error": str(exc)}))
else:
    engine.reset(seeds=[0, 1])
    engine.step(np.array([0, 0]))
    stats = [open(f"/proc/{pid}/stat").read() for pid in engine.pids]
    parents = [int(stat.rsplit(")", 1)[1].split()[1]) for stat in stats]
    engine.close()
    print(json.dumps({"error": None, "forked_here": [p == os.getpid() for p in parents]}))
"""


@pytest.mark.slow
def test_workers_survive_the_garbage_of_a_ray_session() -> None:
    """Before the fix: "the process building the first env died (exit code -11)", 3 runs of 3,
    the kernel logging a segfault in ray/_raylet.so at the offset of CI's."""
    done = subprocess.run(
        [sys.executable, "-c", RAY_GARBAGE], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["error"] is None
    assert got["forked_here"] == [True, True]  # still forked: workers start at once


class _CrashesOutsideItsProcess:
    """Garbage whose finalizer crashes in any process but the one that made it, as an object
    holding native threads' data does."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.cycle = self  # garbage only a collection frees

    def __del__(self) -> None:
        if os.getpid() != self.owner:
            os.kill(os.getpid(), signal.SIGSEGV)


class _Collects(gym.Wrapper[Any, Any, Any, Any]):
    """Collects garbage when built and at every step, and reports the collector's state."""

    def __init__(self, env: gym.Env) -> None:
        gc.collect()
        super().__init__(env)

    def step(self, action: Any) -> Any:
        gc.collect()
        return self.env.step(action)

    def collector_on(self) -> bool:
        return gc.isenabled()


def _collecting_cartpole() -> gym.Env:
    return _Collects(gym.make("CartPole-v1"))


_kept: list[Any] = []


def _old_garbage() -> None:
    """A `_CrashesOutsideItsProcess` that is garbage in the oldest generation, which only a full
    collection frees (rare in a long process): Ray's objects after a module's fixture ended."""
    _kept.append(_CrashesOutsideItsProcess())
    gc.collect(1)  # reachable now: promoted to the oldest generation
    _kept.clear()


@pytest.mark.parametrize("collector_on", [True, False])
def test_forked_workers_never_finalize_their_parents_garbage(collector_on: bool) -> None:
    was_on = gc.isenabled()
    _old_garbage()
    if not collector_on:
        gc.disable()
    try:
        envs = SharedMemoryVectorEnv([_collecting_cartpole] * 2, context="fork")
        try:
            envs.reset(seed=0)
            for _ in range(3):
                envs.step(np.zeros(2, np.int64))  # each worker collects: no SIGSEGV
            # the workers collect as this process does; this process's collector is as it was
            assert envs.call("collector_on") == (collector_on, collector_on)
            assert gc.isenabled() == collector_on
        finally:
            envs.close()
    finally:
        if was_on:
            gc.enable()
    gc.collect()  # here the garbage is freed, harmlessly


def test_the_process_describing_the_first_env_never_finalizes_it_either() -> None:
    _old_garbage()
    engine = VecEngine([_collecting_cartpole] * 2, context="fork")  # described in a fork first
    try:
        engine.reset(seeds=[0, 1])
    finally:
        engine.close()
    gc.collect()
