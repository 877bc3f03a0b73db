"""Run gymnasium's or SB3's own vector tests with this project's engine swapped in for
`AsyncVectorEnv` / `SubprocVecEnv`, and count the tests that built the engine.

Why: the engine is meant as a drop-in for both; their own suites say where it is not. Fetch the
projects at the installed versions into a scratch folder (never into this repository) and point
this script at the folder holding their `tests/`:

    python scripts/upstream_vector_tests.py gymnasium /tmp/gym-1.2.2 [pytest args...]
    python scripts/upstream_vector_tests.py sb3 /tmp/sb3 [pytest args...]

The swap happens at run time (pytest's `pytest_configure`, before the test modules import the
classes); no upstream test code lives here. It prints pass/fail/skip counts over the tests that
built the engine, and over all tests run. docs/vector.md lists the deliberate differences.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

#: What each suite runs: gymnasium's tests/vector plus the files whose async tests build
#: `AsyncVectorEnv` through `gym.make_vec`; SB3's vector-env tests.
SUITES = {
    "gymnasium": [
        "tests/vector",
        "tests/envs/registration/test_make_vec.py",
        "tests/wrappers/vector/test_vectorize_transform.py",
    ],
    "sb3": ["tests/test_vec_envs.py"],
}


class EngineSwap:
    """A pytest plugin: swaps the engine in and records which tests built it."""

    def __init__(self, suite: str) -> None:
        self.suite = suite
        self.built = False
        self.outcomes: dict[str, str] = {}
        self.engine_tests: set[str] = set()

    def pytest_configure(self, config: Any) -> None:
        if self.suite == "gymnasium":
            import gymnasium.vector
            import gymnasium.vector.async_vector_env as async_module

            from metabonk_gym.vector import SharedMemoryVectorEnv

            engine: Any = SharedMemoryVectorEnv
            gymnasium.vector.AsyncVectorEnv = engine  # type: ignore[misc]
            async_module.AsyncVectorEnv = engine  # type: ignore[misc]
        else:
            import stable_baselines3.common.vec_env as vec_env
            import stable_baselines3.common.vec_env.subproc_vec_env as subproc_module

            from metabonk_gym.training.vecenv import SharedMemoryVecEnv

            engine = SharedMemoryVecEnv
            vec_env.SubprocVecEnv = engine  # type: ignore[misc]
            subproc_module.SubprocVecEnv = engine  # type: ignore[misc]
        original = engine.__init__

        def counted(engine: Any, *args: Any, **kwargs: Any) -> None:
            self.built = True
            original(engine, *args, **kwargs)

        engine.__init__ = counted

    def pytest_runtest_setup(self, item: Any) -> None:
        self.built = False

    def pytest_runtest_logreport(self, report: Any) -> None:
        outcome = "skipped" if report.skipped else ("failed" if report.failed else "passed")
        if report.when == "call" or outcome != "passed":
            previous = self.outcomes.get(report.nodeid)
            if previous in (None, "passed"):
                self.outcomes[report.nodeid] = outcome
        if self.built:
            self.engine_tests.add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        engine = Counter(self.outcomes[t] for t in self.engine_tests if t in self.outcomes)
        every = Counter(self.outcomes.values())
        write = terminalreporter.write_line
        write(f"tests that built the engine: {sum(engine.values())}: " + _counts(engine))
        write(f"all tests run: {sum(every.values())}: " + _counts(every))
        for nodeid in sorted(self.engine_tests):
            if self.outcomes.get(nodeid) != "passed":
                write(f"  {self.outcomes.get(nodeid)}: {nodeid}")


def _counts(counter: Counter) -> str:
    return ", ".join(f"{counter.get(k, 0)} {k}" for k in ("passed", "failed", "skipped"))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in SUITES:
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    suite, root = argv[0], Path(argv[1]).resolve()
    if not (root / "tests").is_dir():
        print(f"{root} holds no tests/ folder: fetch {suite} there first", file=sys.stderr)
        return 2
    import pytest

    os.chdir(root)
    sys.path.insert(0, str(root))  # their tests import `tests.…`
    args = [*SUITES[suite], "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-rN", *argv[2:]]
    return int(pytest.main(args, plugins=[EngineSwap(suite)]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
