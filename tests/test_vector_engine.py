"""The shared-memory vector engine behind `make_vec` and training: same trajectories as sequential
envs on every backend, autoreset semantics, pool mode, SB3's VecEnv contract, and faults (a
killed or hung worker, an env that raises) that end within a deadline and leave nothing behind."""

from __future__ import annotations

import functools
import hashlib
import multiprocessing
import os
import signal
import time
from functools import partial
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import metabonk_gym
from metabonk_gym.errors import EnvWorkerError
from metabonk_gym.vector import SharedMemoryVectorEnv, make_one, make_vec

QUEST = "MetaBonk/BonkQuest-v0"
ARENA = "MetaBonk/BonkArena-v0"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _actions(n_actions: int, steps: int, num_envs: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n_actions, (steps, num_envs))


def _sequential(
    env_id: str, seeds: list[int], actions: np.ndarray, wrap: Any = None, **kwargs: Any
) -> list[list[str]]:
    """Per env, a digest of (obs, reward, done) at every step, one env at a time in this process,
    with NEXT_STEP autoreset done by hand (`wrap`: a wrapper applied to each env)."""
    out = []
    for i, seed in enumerate(seeds):
        env = gym.make(env_id, **kwargs)
        env = wrap(env) if wrap is not None else env
        try:
            obs, _ = env.reset(seed=seed)
            digests, needs_reset = [], False
            for t in range(len(actions)):
                if needs_reset:
                    obs, _ = env.reset()
                    reward, terminated, truncated = 0.0, False, False
                    needs_reset = False
                else:
                    obs, reward, terminated, truncated, _ = env.step(int(actions[t, i]))
                    needs_reset = terminated or truncated
                digests.append(_digest(obs, reward, terminated, truncated))
            out.append(digests)
        finally:
            env.close()
    return out


def _digest(obs: Any, reward: float, terminated: bool, truncated: bool) -> str:
    h = hashlib.sha1()
    if isinstance(obs, dict):
        for key in sorted(obs):
            h.update(np.ascontiguousarray(obs[key]).tobytes())
    else:
        h.update(np.ascontiguousarray(obs).tobytes())
    h.update(repr((round(float(reward), 6), bool(terminated), bool(truncated))).encode())
    return h.hexdigest()


def _through_engine(envs: Any, seeds: list[int], actions: np.ndarray) -> list[list[str]]:
    obs, _ = envs.reset(seed=seeds)
    digests: list[list[str]] = [[] for _ in seeds]
    for t in range(len(actions)):
        obs, rewards, terminated, truncated, _ = envs.step(actions[t])
        for i in range(len(seeds)):
            row = {k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i]
            digests[i].append(_digest(row, rewards[i], terminated[i], truncated[i]))
    return digests


# same trajectories as sequential envs, on every backend ----------------------------------------
@pytest.mark.parametrize("envs_per_worker", [1, 2])
def test_embedded_core_same_trajectories_as_sequential_envs(envs_per_worker: int) -> None:
    kwargs = {"frameskip": 4, "max_episode_steps": 25}  # episodes end and autoreset inside
    actions = _actions(6, 60, 2, seed=3)
    expected = _sequential(QUEST, [5, 6], actions, **kwargs)
    envs = make_vec(QUEST, 2, envs_per_worker=envs_per_worker, **kwargs)
    try:
        assert _through_engine(envs, [5, 6], actions) == expected
    finally:
        envs.close()


def test_predictor_wrappers_in_one_worker_keep_their_own_state() -> None:
    """Two BonkQuest envs with a frame-predicting `TemporalStrip` (flow) in one worker: each
    env's strip (past frames and predicted ones) matches the same env run alone."""
    from metabonk_gym.wrappers.temporal_strip import TemporalStrip

    strip = functools.partial(TemporalStrip, past=2, future=2, predictor="flow")
    kwargs = {"frameskip": 4, "max_episode_steps": 20, "obs_type": "grayscale", "downscale": 4}
    actions = _actions(6, 45, 2, seed=5)
    expected = _sequential(QUEST, [7, 8], actions, wrap=strip, **kwargs)
    envs = make_vec(QUEST, 2, envs_per_worker=2, wrappers=[strip], **kwargs)
    try:
        assert len(envs.engine.exitcodes()) == 1  # both envs in one worker process
        assert _through_engine(envs, [7, 8], actions) == expected
    finally:
        envs.close()


def _megabonk_runs(run: Any) -> Any:
    """`run(ports)` against two fresh lockstep sims (a sim's game goes on between clients)."""
    from metabonk_gym.bonklink.sim import BonkLinkSim

    servers = [BonkLinkSim(port=0, mode="lockstep", seed=i) for i in range(2)]
    ports = [server.start() for server in servers]
    try:
        return run(ports)
    finally:
        for server in servers:
            server.stop()


@pytest.mark.net
def test_bonklink_same_trajectories_as_sequential_envs() -> None:
    kwargs = {"frame_size": (36, 64), "max_episode_steps": 12}
    actions = np.random.default_rng(0).uniform(-1, 1, (30, 2, 10)).astype(np.float32)

    def sequential(ports: list[int]) -> list[list[str]]:
        out = []
        for i, port in enumerate(ports):
            env = gym.make("MetaBonk/Megabonk-v0", port=port, **kwargs)
            try:
                obs, _ = env.reset(seed=i)
                digests, needs_reset = [], False
                for t in range(len(actions)):
                    if needs_reset:
                        obs, _ = env.reset()
                        reward, term, trunc, needs_reset = 0.0, False, False, False
                    else:
                        obs, reward, term, trunc, _ = env.step(actions[t, i])
                        needs_reset = term or trunc
                    digests.append(_digest(obs, reward, term, trunc))
                out.append(digests)
            finally:
                env.close()
        return out

    def engine(ports: list[int]) -> list[list[str]]:
        fns = [
            partial(make_one, "MetaBonk/Megabonk-v0", (), {"port": port, **kwargs})
            for port in ports
        ]
        envs = SharedMemoryVectorEnv(fns, envs_per_worker=2)
        try:
            return _through_engine(envs, [0, 1], actions)
        finally:
            envs.close()

    assert _megabonk_runs(engine) == _megabonk_runs(sequential)


@pytest.mark.net
def test_skyemu_same_trajectories_as_sequential_envs(tmp_path: Path) -> None:
    from metabonk_gym.gba.integration import Integration
    from metabonk_gym.gba.skyemu_peer import PeerProcess

    kwargs: dict[str, Any] = {"backend": "skyemu", "frameskip": 2}
    with PeerProcess(Integration.bundled("BonkQuest").rom_path) as peer:
        kwargs["skyemu_url"] = peer.url
        actions = _actions(6, 12, 1, seed=1)
        expected = _sequential(QUEST, [3], actions, **kwargs)
        envs = make_vec(QUEST, 1, **kwargs)
        try:
            assert _through_engine(envs, [3], actions) == expected
        finally:
            envs.close()


# autoreset ------------------------------------------------------------------------------------
def test_next_step_autoreset_returns_the_reset_observation_with_reward_zero() -> None:
    envs = make_vec(QUEST, 1, max_episode_steps=3, autoreset_mode="NextStep")
    try:
        first, _ = envs.reset(seed=0)
        for _ in range(2):
            _, _, _, truncated, _ = envs.step([0])
            assert not truncated[0]
        _, _, _, truncated, infos = envs.step([0])
        assert truncated[0] and "hp" in infos  # the final info arrives whole
        assert "reward_terms" in infos
        obs, rewards, terminated, truncated, _ = envs.step([0])
        assert rewards[0] == 0.0 and not terminated[0] and not truncated[0]
        _, _, _, truncated, _ = envs.step([0])
        assert not truncated[0]  # a new episode: its step count starts again
    finally:
        envs.close()


def test_same_step_autoreset_keeps_the_final_observation_and_info() -> None:
    envs = make_vec(QUEST, 2, max_episode_steps=2, autoreset_mode="SameStep")
    try:
        first, _ = envs.reset(seed=0)
        envs.step([0, 0])
        obs, _, _, truncated, infos = envs.step([4, 4])
        assert truncated.all()
        assert infos["_final_obs"].all() and infos["_final_info"].all()
        assert infos["final_obs"][0].shape == (160, 240, 3)
        assert not np.array_equal(obs[0], infos["final_obs"][0])  # already reset
        assert "reward_terms" in infos["final_info"]
    finally:
        envs.close()


def test_disabled_autoreset_keeps_stepping_the_ended_episode() -> None:
    envs = make_vec(QUEST, 1, max_episode_steps=1, autoreset_mode="Disabled")
    try:
        envs.reset(seed=0)
        _, _, _, truncated, _ = envs.step([0])
        assert truncated[0]
        envs.reset(seed=0)
        _, _, _, truncated, _ = envs.step([0])
        assert truncated[0]
    finally:
        envs.close()


# pool mode ------------------------------------------------------------------------------------
class _Gated(gym.Wrapper[Any, Any, Any, Any]):
    """A step of this env waits until `gate` is set (None: never waits): which envs finish first
    is decided by the test, not by timing."""

    def __init__(self, env: gym.Env, gate: Any) -> None:
        super().__init__(env)
        self.gate = gate

    def step(self, action: Any) -> Any:
        if self.gate is not None and not self.gate.wait(timeout=60):
            raise TimeoutError("the test never opened the gate")
        return self.env.step(action)


def _gated_cartpole(gate: Any) -> gym.Env:
    return _Gated(gym.make("CartPole-v1"), gate)


def test_pool_mode_returns_the_first_ready_envs_with_their_ids() -> None:
    gate = multiprocessing.get_context("fork").Event()
    envs = SharedMemoryVectorEnv(
        [partial(_gated_cartpole, gate if i in (0, 3) else None) for i in range(4)],
        context="fork",
    )
    try:
        envs.async_reset(seed=0)
        obs, rewards, _, _, infos = envs.recv(4)  # after a reset every env is ready
        assert sorted(infos["env_id"].tolist()) == [0, 1, 2, 3]
        envs.send(np.zeros(4, np.int64), infos["env_id"])
        obs, rewards, _, _, infos = envs.recv(2)
        assert sorted(infos["env_id"].tolist()) == [1, 2]  # envs 0 and 3 wait at the gate
        ready = infos["env_id"].tolist()
        states = envs.engine.call("unwrapped", env_ids=ready)  # envs 0 and 3 still step
        for row, state in enumerate(states):
            np.testing.assert_allclose(obs[row], np.asarray(state.state, np.float32))
        envs.send(np.ones(2, np.int64), infos["env_id"])
        gate.set()
        _, _, _, _, infos = envs.recv(4)
        assert sorted(infos["env_id"].tolist()) == [0, 1, 2, 3]
        with pytest.raises(ValueError, match="only 0 envs are stepping"):
            envs.recv(1)
    finally:
        gate.set()
        envs.close()


def test_sending_to_an_env_still_stepping_is_refused() -> None:
    gate = multiprocessing.get_context("fork").Event()
    envs = SharedMemoryVectorEnv([partial(_gated_cartpole, gate)] * 2, context="fork")
    try:
        envs.async_reset(seed=0)
        envs.recv(2)
        envs.send(np.zeros(1, np.int64), [0])
        with pytest.raises(RuntimeError, match="still stepping"):
            envs.send(np.zeros(1, np.int64), [0])
        gate.set()
        assert envs.recv(1)[4]["env_id"].tolist() == [0]
    finally:
        gate.set()
        envs.close()


# SB3 ------------------------------------------------------------------------------------------
def test_sb3_vecenv_contract_and_a_short_ppo_run() -> None:
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    from metabonk_gym.training.envs import StartWrapper
    from metabonk_gym.training.vecenv import SharedMemoryVecEnv

    def build() -> gym.Env:
        return StartWrapper(gym.make(ARENA, obs_type="state", max_episode_steps=8))

    venv = SharedMemoryVecEnv([build] * 2, envs_per_worker=2)
    try:
        venv.seed(7)
        first = venv.reset()
        venv.seed(7)
        np.testing.assert_array_equal(venv.reset(), first)
        assert venv.env_is_wrapped(StartWrapper) == [True, True]
        assert venv.get_attr("start_state") == [None, None]
        venv.env_method("set_start", None, [1, 2], indices=[1])
        assert venv.get_attr("game_seeds") == [None, [1, 2]]
        venv.set_attr("start_state", None)
        saw_end = False
        for _ in range(10):
            obs, rewards, dones, infos = venv.step(np.zeros(2, np.int64))
            assert obs.shape == first.shape and rewards.dtype == np.float32
            for i in np.flatnonzero(dones):
                saw_end = True
                assert infos[i]["terminal_observation"].shape == first.shape[1:]
                assert "TimeLimit.truncated" in infos[i] and "hp" in infos[i]
        assert saw_end
        model = PPO("MlpPolicy", VecMonitor(venv), n_steps=16, batch_size=16, n_epochs=1, seed=0)
        model.learn(32)
        assert model.num_timesteps >= 32
    finally:
        venv.close()


# faults ---------------------------------------------------------------------------------------
def _named_shm(pid: int) -> set[str]:
    """The /dev/shm files process `pid` maps that still have a name (unlinked ones are gone with
    their last mapping): the segments a worker could leave behind."""
    names = set()
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/dev/shm/") and "(deleted)" not in parts[5]:
            names.add(parts[5])
    return names


def test_a_killed_worker_raises_within_seconds_and_close_frees_everything() -> None:
    from multiprocessing import shared_memory

    envs = make_vec(QUEST, 3, envs_per_worker=1, step_timeout_s=60)
    pids = envs.engine.pids
    # another test (pytest -n 2) may create a segment meanwhile: only the engine's own count
    foreign = shared_memory.SharedMemory(create=True, size=4096)
    try:
        envs.reset(seed=0)
        envs.step([0, 0, 0])
        own = set().union(*(_named_shm(pid) for pid in pids)) - {f"/dev/shm/{foreign.name}"}
        os.kill(pids[1], signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(EnvWorkerError, match=r"worker 1 .*killed by SIGKILL"):
            for _ in range(100):
                envs.step([0, 0, 0])
        assert time.monotonic() - started < 10
        with pytest.raises(RuntimeError, match="closed"):
            envs.step([0, 0, 0])
        started = time.monotonic()
        envs.close()
        assert time.monotonic() - started < 10
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in pids)
        assert not [name for name in own if os.path.exists(name)]  # the engine's segments
        assert os.path.exists(f"/dev/shm/{foreign.name}")  # (the foreign one was not ours)
    finally:
        envs.close()
        foreign.close()
        foreign.unlink()


class _HangsAt(gym.Wrapper[Any, Any, Any, Any]):
    """Step number `at` never returns (as a corrupted emulator state can do)."""

    def __init__(self, env: gym.Env, at: int) -> None:
        super().__init__(env)
        self.at, self.count = at, 0

    def step(self, action: Any) -> Any:
        self.count += 1
        if self.count == self.at:
            time.sleep(3600)
        return self.env.step(action)


def test_a_hung_worker_is_killed_at_the_step_deadline() -> None:
    envs = SharedMemoryVectorEnv(
        [lambda: _HangsAt(gym.make("CartPole-v1"), 3)] * 2, step_timeout_s=1.5
    )
    pids = envs.engine.pids
    envs.reset(seed=0)
    started = time.monotonic()
    with pytest.raises(EnvWorkerError, match="did not answer within 1.5 s"):
        for _ in range(5):
            envs.step(np.zeros(2, np.int64))
    assert time.monotonic() - started < 8
    time.sleep(0.5)
    assert not any(_alive(pid) for pid in pids)


class _RaisesAt(gym.Wrapper[Any, Any, Any, Any]):
    def step(self, action: Any) -> Any:
        if int(action) == 1:
            raise metabonk_gym.errors.InvalidActionError("action 1 is not allowed here")
        return self.env.step(action)


def test_an_env_error_is_raised_with_its_type_and_the_engine_goes_on() -> None:
    envs = SharedMemoryVectorEnv([lambda: _RaisesAt(gym.make("CartPole-v1"))] * 2)
    try:
        envs.reset(seed=0)
        with pytest.raises(metabonk_gym.errors.InvalidActionError, match="not allowed") as info:
            envs.step(np.array([0, 1]))
        assert any("env 1" in note for note in info.value.__notes__)
        _, rewards, _, _, _ = envs.step(np.array([0, 0]))
        assert rewards.tolist() == [1.0, 1.0]
    finally:
        envs.close()


def test_an_env_that_fails_to_build_names_the_problem() -> None:
    with pytest.raises(metabonk_gym.errors.UnknownStateError, match="room9"):
        make_vec(QUEST, 2, state="room9")


def test_spawn_context_works_too() -> None:
    envs = make_vec(ARENA, 2, context="spawn", obs_type="state")
    try:
        obs, _ = envs.reset(seed=0)
        obs2, *_ = envs.step([0, 1])
        assert obs2.shape == obs.shape
    finally:
        envs.close()
