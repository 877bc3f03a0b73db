"""Shared fixtures. Every env a test opens is closed after it (each embedded core beyond the
first of a process runs on a private copy of stable-retro; closing frees its slot)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import gymnasium as gym
import pytest

import metabonk_gym  # noqa: F401  (registers the envs)

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

# A test run started in the background of a script (`.ci/run &`, nohup) inherits SIGINT ignored,
# and so would every process the tests start: the Ctrl-C tests would then test nothing a user at
# a terminal meets. Give this process, and through it its children, the terminal's default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def make_env() -> Iterator:
    """`make_env(id, **kwargs)` -> env; every env made is closed after the test."""
    made: list[gym.Env] = []

    def factory(env_id: str = "MetaBonk/BonkQuest-v0", **kwargs) -> gym.Env:
        env = gym.make(env_id, **kwargs)
        made.append(env)
        return env

    yield factory
    for env in made:
        env.close()


@pytest.fixture
def quest(make_env) -> gym.Env:
    return make_env("MetaBonk/BonkQuest-v0")


@pytest.fixture
def arena(make_env) -> gym.Env:
    return make_env("MetaBonk/BonkArena-v0")


@pytest.fixture(autouse=True)
def _isolated_minari(tmp_path_factory, monkeypatch) -> None:
    """Minari datasets go to a temp folder, never ~/.minari."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path_factory.getbasetemp() / "minari"))
    # a test's own `model.learn()` without a logger: SB3's default folder, not /tmp/SB3-<date>
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path_factory.getbasetemp() / "sb3"))
