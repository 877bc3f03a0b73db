"""System 2's counters in TensorBoard during SB3 training: `ThinkScalarsCallback` reads
`infos[i]["think"]` from `PauseToThink` envs (here over the real lockstep `bonklink-sim`) and the
scalars are read back from the event files with tensorboard's `EventAccumulator`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import DummyVecEnv
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from metabonk_gym.bonklink.env import MegabonkEnv
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.think.metrics import merge_think_infos
from metabonk_gym.think.pause_to_think import PauseToThink
from metabonk_gym.training.callbacks import ThinkScalarsCallback

pytestmark = pytest.mark.net


@pytest.fixture
def sims() -> Iterator[list[int]]:
    servers = [BonkLinkSim(port=0, mode="lockstep", seed=s) for s in (0, 1)]
    ports = [server.start() for server in servers]
    yield ports
    for server in servers:
        server.stop()


def make(port: int, think: bool) -> gym.Env:
    env: gym.Env = MegabonkEnv(port=port, frame_size=(36, 36), frame_wait=0.0, connect_timeout=10)
    return PauseToThink(env, engine="oracle", think_every=10, cooldown_steps=2) if think else env


def train(ports: list[int], think: bool, folder: Path) -> tuple[ThinkScalarsCallback, DummyVecEnv]:
    venv = DummyVecEnv([lambda p=p: make(p, think) for p in ports])  # type: ignore[misc]
    model = PPO("MultiInputPolicy", venv, n_steps=32, batch_size=32, n_epochs=1, seed=0)
    model.set_logger(configure(str(folder), ["tensorboard"]))
    callback = ThinkScalarsCallback()
    model.learn(total_timesteps=128, callback=callback)
    return callback, venv


def scalars(folder: Path) -> EventAccumulator:
    events = EventAccumulator(str(folder))
    events.Reload()
    return events


def test_think_scalars_reach_tensorboard_during_ppo_training(
    sims: list[int], tmp_path: Path
) -> None:
    callback, venv = train(sims, True, tmp_path / "tb")
    infos = [env.director.info() for env in venv.envs]  # type: ignore[attr-defined]
    venv.close()
    events = scalars(tmp_path / "tb")
    tags = set(events.Tags()["scalars"])
    assert {
        "think/calls",
        "think/fallbacks",
        "think/fallback_rate",
        "think/latency_p50_s",
        "think/latency_p95_s",
        "think/directive_success_rate",
    } <= tags
    calls = events.Scalars("think/calls")
    assert len(calls) >= 2 and calls[-1].step == 128  # one point per rollout, at its timestep
    assert [c.value for c in calls] == sorted(c.value for c in calls)  # cumulative counters
    merged = merge_think_infos(infos)
    assert calls[-1].value == merged["calls"] == sum(i["calls"] for i in infos) >= 4
    assert events.Scalars("think/fallbacks")[-1].value == 0.0  # the oracle never falls back
    assert callback.scalars["think/calls"] == merged["calls"]


def test_without_pause_to_think_the_callback_logs_nothing(sims: list[int], tmp_path: Path) -> None:
    callback, venv = train(sims[:1], False, tmp_path / "tb")
    venv.close()
    tags = set(scalars(tmp_path / "tb").Tags()["scalars"])
    assert tags and not any(tag.startswith("think/") for tag in tags)
    assert callback.scalars == {}
