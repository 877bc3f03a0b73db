"""Vector-env workers are never forked from a process that has loaded Ray's core (or gRPC): a child
forked after them can crash in their code. In CI both workers of `metabonk curriculum --swarm`,
started by a test process that had run Ray tests before, died of SIGSEGV in gRPC's
`pollset_shutdown` inside `ray/_raylet.so` (the kernel log named the library and the offset).
Each check runs in a fresh process, so that this one never loads Ray."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Trains nothing: builds the training vector env as `metabonk train`/`curriculum` do, steps it,
# and reports the start method and, for each worker, whether this process is its parent.
SCRIPT = """
import json, os, sys
if sys.argv[1] == "ray":
    import ray  # noqa: F401  (loads ray._raylet and its gRPC, as a Ray test or RLlib run does)
import numpy as np
from metabonk_gym.process import fork_unsafe_module, worker_start_method
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.envs import close_venv, make_train_venv

cfg = resolve_config("MetaBonk/BonkQuest-v0", overrides={"n_envs": 2, "frame_stack": 1})
venv = make_train_venv("MetaBonk/BonkQuest-v0", cfg)
try:
    venv.reset()
    _, rewards, _, _ = venv.step(np.zeros(2, dtype=np.int64))
    pids = getattr(venv, "unwrapped", venv).engine.pids
    parents = [int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) for pid in pids]
finally:
    close_venv(venv)
print(json.dumps({
    "unsafe": fork_unsafe_module(),
    "method": worker_start_method("fork"),
    "forked_here": [parent == os.getpid() for parent in parents],
    "steps": len(rewards),
}))
"""


# The CI failure itself: a Ray session leaves its objects as garbage (a long test process keeps
# them in its oldest generation, collected rarely), and a worker forked from that process
# collects them while it builds its env: their destructors shut gRPC down and crash there.
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


def _run(mode: str, script: str = SCRIPT) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_workers_survive_the_garbage_of_a_ray_session() -> None:
    """Before the fix: "the process building the first env died (exit code -11)", the kernel
    logging a segfault in ray/_raylet.so at the offset of CI's (gRPC's pollset_shutdown)."""
    got = _run("", RAY_GARBAGE)
    assert got["error"] is None
    assert got["forked_here"] == [False, False]


@pytest.mark.slow
def test_workers_are_not_forked_from_a_process_that_loaded_ray() -> None:
    got = _run("ray")
    assert got["unsafe"] == "ray._raylet"
    assert got["method"] == "forkserver"
    assert got["forked_here"] == [False, False]  # a fresh server process forked them
    assert got["steps"] == 2


def test_workers_are_forked_from_a_clean_process() -> None:
    got = _run("plain")
    assert got["unsafe"] is None
    assert got["method"] == "fork"
    assert got["forked_here"] == [True, True]  # fork stays the default: workers start at once
    assert got["steps"] == 2
