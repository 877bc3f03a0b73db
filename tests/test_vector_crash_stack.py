"""A vector-env worker that dies of a fatal signal (a crash in C code, as an emulator core's) or
hangs is reported with its Python stack, so that one failure in CI says where it happened: the
worker's faulthandler writes into a pipe the engine reads (`metabonk_gym.process.CrashStack`)."""

from __future__ import annotations

import ctypes
import re
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from metabonk_gym.errors import EnvWorkerError
from metabonk_gym.vector import SharedMemoryVectorEnv
from metabonk_gym.vector.engine import VecEngine


def _segfault() -> None:
    ctypes.string_at(0)  # reads address 0: a real SIGSEGV in C code


def _crashes_building() -> gym.Env:
    _segfault()
    raise AssertionError("unreachable")


class _SegfaultsAt(gym.Wrapper[Any, Any, Any, Any]):
    """Step number `at` crashes the process."""

    def __init__(self, env: gym.Env, at: int) -> None:
        super().__init__(env)
        self.at, self.count = at, 0

    def step(self, action: Any) -> Any:
        self.count += 1
        if self.count == self.at:
            _segfault()
        return self.env.step(action)


class _SleepsAt(_SegfaultsAt):
    def step(self, action: Any) -> Any:
        self.count += 1
        if self.count == self.at:
            time.sleep(3600)
        return self.env.step(action)


def _cartpole_spaces() -> tuple[gym.Space, gym.Space]:
    env = gym.make("CartPole-v1")
    env.close()
    return env.observation_space, env.action_space


def test_a_worker_that_segfaults_building_its_env_says_where() -> None:
    fns = [_crashes_building, lambda: gym.make("CartPole-v1")]
    started = time.monotonic()
    with pytest.raises(EnvWorkerError) as info:
        VecEngine(fns, spaces=_cartpole_spaces())
    text = str(info.value)
    assert re.search(r"^start: worker 0 .* was killed by SIGSEGV", text), text
    assert "Segmentation fault" in text
    # the worker's own frames, innermost first: the crash, the env function, the worker's start
    frames = re.findall(r"line \d+ in (\w+)", text)
    assert frames[:3] == ["string_at", "_segfault", "_crashes_building"], frames
    assert "run_worker" in frames
    assert time.monotonic() - started < 30


def test_the_process_describing_the_first_env_says_where_it_died() -> None:
    with pytest.raises(EnvWorkerError, match=r"first env died \(exit code -11\)") as info:
        VecEngine([_crashes_building] * 2)
    frames = re.findall(r"line \d+ in (\w+)", str(info.value))
    assert frames[:3] == ["string_at", "_segfault", "_crashes_building"], frames


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_worker_that_segfaults_in_a_step_says_where(context: str) -> None:
    envs = SharedMemoryVectorEnv(
        [lambda: gym.make("CartPole-v1"), lambda: _SegfaultsAt(gym.make("CartPole-v1"), 3)],
        context=context,
    )
    envs.reset(seed=0)
    with pytest.raises(EnvWorkerError, match=r"worker 1 .* was killed by SIGSEGV") as info:
        for _ in range(5):
            envs.step(np.zeros(2, np.int64))
    text = str(info.value)
    assert "worker 1 (pid" in text and "worker 0 (pid" not in text.split("(the vector env")[1]
    frames = re.findall(r"line \d+ in (\w+)", text)
    assert frames[:3] == ["string_at", "_segfault", "step"], frames


def test_a_hung_worker_says_where_it_hung() -> None:
    envs = SharedMemoryVectorEnv(
        [lambda: _SleepsAt(gym.make("CartPole-v1"), 3)] * 2, step_timeout_s=1.5
    )
    envs.reset(seed=0)
    with pytest.raises(EnvWorkerError, match="did not answer within 1.5 s") as info:
        for _ in range(5):
            envs.step(np.zeros(2, np.int64))
    stacks = str(info.value).split("where it died or hung")[1:]
    assert len(stacks) == 2  # both workers hung in the same step
    for stack in stacks:
        assert re.findall(r"line \d+ in (\w+)", stack)[:1] == ["step"], stack


def test_a_worker_that_exits_cleanly_adds_no_stack() -> None:
    envs = SharedMemoryVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    envs.reset(seed=0)
    envs.engine._workers[0].process.kill()  # SIGKILL: no handler runs, nothing to report
    with pytest.raises(EnvWorkerError, match="killed by SIGKILL") as info:
        for _ in range(20):
            envs.step(np.zeros(2, np.int64))
    assert "faulthandler" not in str(info.value)


TAKEN_OVER = """
import ctypes, faulthandler, multiprocessing, signal
from metabonk_gym.process import CrashStack, record_crash_stack

def crash(writer):
    record_crash_stack(writer)
    ctypes.string_at(0)

faulthandler.enable()  # as pytest and Ray's driver do in the parent ...
libc = ctypes.CDLL(None)
libc.signal.restype = ctypes.c_void_p
libc.signal(signal.SIGSEGV, ctypes.c_void_p(0))  # ... then a library takes SIGSEGV over (SIG_DFL)
ctx = multiprocessing.get_context("fork")
stack = CrashStack(ctx)
child = ctx.Process(target=crash, args=(stack.writer,))
child.start(); stack.started(); child.join()
print(child.exitcode, "Segmentation fault" in stack.text(), "in crash" in stack.text())
"""


def test_the_stack_is_kept_when_a_library_took_sigsegv_from_the_parents_faulthandler() -> None:
    # CI's full suite: Ray's driver enables faulthandler, then its C++ core installs its own
    # SIGSEGV handler; a child's enable() of an already enabled faulthandler used to install
    # nothing, so the crash left no stack
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", TAKEN_OVER], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["-11", "True", "True"], out.stdout + out.stderr
