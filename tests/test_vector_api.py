"""The vector engine as a drop-in: gymnasium's `VectorEnv` API run against both `AsyncVectorEnv`
and `SharedMemoryVectorEnv` where gymnasium defines the behaviour, SB3's `VecEnv` API against
both `SubprocVecEnv` and `SharedMemoryVecEnv`, and the engine's own guarantees (every command
drains every worker's reply before it raises; `get_attr` never calls)."""

from __future__ import annotations

import multiprocessing
import re
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.spaces import Box, Dict, Discrete, Graph, OneOf, Sequence, Text, Tuple
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

from metabonk_gym.vector import SharedMemoryVectorEnv

VECTORS = {"AsyncVectorEnv": AsyncVectorEnv, "engine": SharedMemoryVectorEnv}


@pytest.fixture(params=list(VECTORS))
def vector(request: pytest.FixtureRequest) -> Any:
    """Each vector env class, closed after the test however it ends."""
    made: list[Any] = []

    def build(*args: Any, **kwargs: Any) -> Any:
        envs = VECTORS[request.param](*args, **kwargs)
        made.append(envs)
        return envs

    yield build
    for envs in made:
        envs.close(terminate=True)


class SpaceEnv(gym.Env[Any, Any]):
    """An env of any spaces: it checks each action against its action space and answers with a
    sample of its observation space; `info` holds a number, a word and the action count."""

    def __init__(
        self,
        obs_space: gym.Space,
        act_space: gym.Space,
        delay: float = 0.0,
        reward_fn: Callable[[int], float] | None = None,
    ) -> None:
        self.observation_space = obs_space
        self.action_space = act_space
        self.delay = delay
        self.reward_fn = reward_fn
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.steps = 0
        return self.observation_space.sample(), {"word": "start", "options": options}

    def step(self, action: Any) -> Any:
        if action not in self.action_space:
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        time.sleep(self.delay)
        self.steps += 1
        reward = 1.0 if self.reward_fn is None else self.reward_fn(self.steps)
        return self.observation_space.sample(), reward, False, False, {"n": 7, "word": "step"}


def _cartpoles(n: int) -> list[Any]:
    return [partial(gym.make, "CartPole-v1")] * n


# gymnasium's async API ------------------------------------------------------------------------
def test_reset_and_step_split_into_async_and_wait(vector: Any) -> None:
    envs = vector(_cartpoles(2))
    envs.reset_async(seed=[3, 4])
    obs, _ = envs.reset_wait()
    alone = [gym.make("CartPole-v1").reset(seed=s)[0] for s in (3, 4)]
    np.testing.assert_array_equal(obs, np.stack(alone))
    envs.step_async(np.array([0, 1]))
    obs, rewards, terminated, truncated, _ = envs.step_wait()
    assert obs.shape == (2, 4) and rewards.tolist() == [1.0, 1.0]
    assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_


def test_wait_without_a_call_and_a_second_call_while_one_is_pending(vector: Any) -> None:
    envs = vector(_cartpoles(2))
    with pytest.raises(NoAsyncCallError, match="without any prior call to `reset_async`"):
        envs.reset_wait()
    envs.reset()
    with pytest.raises(NoAsyncCallError, match="without any prior call to `step_async`"):
        envs.step_wait()
    envs.reset_async()
    with pytest.raises(AlreadyPendingCallError, match="pending call to `reset`"):
        envs.step_async(envs.action_space.sample())
    envs.reset_wait()
    envs.step_async(envs.action_space.sample())
    with pytest.raises(AlreadyPendingCallError, match="pending call to `step`"):
        envs.reset_async()
    with pytest.warns(UserWarning, match="Calling `close` while waiting for a pending call"):
        envs.close()


def test_step_wait_past_its_timeout_raises_timeout_error(vector: Any) -> None:
    envs = vector([partial(SpaceEnv, Box(0, 1, (2,)), Discrete(2), delay=1.0)] * 2)
    envs.reset(seed=0)
    envs.step_async(np.array([0, 1]))
    with pytest.raises(multiprocessing.TimeoutError):
        envs.step_wait(timeout=0.05)


def test_the_engine_keeps_a_timed_out_step_for_a_later_wait() -> None:
    envs = SharedMemoryVectorEnv([partial(SpaceEnv, Box(0, 1, (2,)), Discrete(2), delay=0.5)] * 2)
    try:
        envs.reset(seed=0)
        envs.step_async(np.array([0, 1]))
        with pytest.raises(multiprocessing.TimeoutError):
            envs.step_wait(timeout=0.01)
        _, rewards, *_ = envs.step_wait()  # the same step, collected
        assert rewards.tolist() == [1.0, 1.0]
        assert envs.get_attr("steps") == (1, 1)
    finally:
        envs.close()


def test_a_closed_vector_env_raises_closed_environment_error(vector: Any) -> None:
    envs = vector(_cartpoles(2))
    envs.close()
    for use in (envs.reset, lambda: envs.step(np.array([0, 0])), lambda: envs.get_attr("gravity")):
        with pytest.raises(ClosedEnvironmentError):
            use()


def test_a_scalar_action_or_the_wrong_count_is_refused(vector: Any) -> None:
    envs = vector(_cartpoles(3), autoreset_mode=AutoresetMode.DISABLED)
    envs.reset(seed=0)
    with pytest.raises(TypeError):
        envs.step(0)
    with pytest.raises(ValueError):
        envs.step(np.array([0, 1]))
    _, rewards, *_ = envs.step(np.array([0, 1, 0]))  # and the vector env goes on
    assert rewards.tolist() == [1.0, 1.0, 1.0]


def test_envs_with_other_spaces_are_refused(vector: Any) -> None:
    fns = [*_cartpoles(2), partial(gym.make, "FrozenLake-v1")]
    with pytest.raises(RuntimeError, match="not equivalent|action space different"):
        vector(fns)


class CustomSpace(gym.Space[Any]):
    """A space gymnasium does not know: it cannot live in shared memory."""

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        return "thing"

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CustomSpace)


def test_a_custom_space_is_refused_in_shared_memory_and_goes_through_the_pipes(
    vector: Any,
) -> None:
    fns = [partial(SpaceEnv, CustomSpace(), CustomSpace())] * 2
    with pytest.raises(ValueError, match="shared_memory=False"):
        vector(fns, shared_memory=True)
    envs = vector(fns, shared_memory=False)
    obs, _ = envs.reset(seed=0)
    assert obs == ("thing", "thing")
    obs, rewards, *_ = envs.step(("a", "b"))
    assert obs == ("thing", "thing") and rewards.tolist() == [1.0, 1.0]


def test_observation_mode_different_batches_each_env_s_bounds(vector: Any) -> None:
    spaces = [Box(0, i, (3,)) for i in (1, 2)]
    envs = vector([partial(SpaceEnv, s, Discrete(2)) for s in spaces], observation_mode="different")
    assert envs.observation_space == gym.vector.utils.batch_differing_spaces(spaces)
    obs, _ = envs.reset(seed=0)
    assert obs in envs.observation_space
    with pytest.raises(RuntimeError, match="observation_mode='different'"):
        vector([partial(SpaceEnv, s, Discrete(2)) for s in spaces], observation_mode="same")
    with pytest.raises(ValueError, match="Invalid `observation_mode`"):
        vector(_cartpoles(1), observation_mode="sideways")


def test_reset_mask_resets_only_the_masked_envs(vector: Any) -> None:
    envs = vector(_cartpoles(3), autoreset_mode=AutoresetMode.DISABLED)
    first, _ = envs.reset(seed=[0, 1, 2])
    stepped, *_ = envs.step(np.array([1, 1, 1]))
    obs, infos = envs.reset(seed=[0, 1, 0], options={"reset_mask": np.array([True, True, False])})
    np.testing.assert_array_equal(obs[:2], first[:2])
    np.testing.assert_array_equal(obs[2], stepped[2])
    with pytest.raises(AssertionError, match=re.escape("must have shape `(3,)`, got (1,)")):
        envs.reset(options={"reset_mask": np.array([True])})
    with pytest.raises(AssertionError, match="must have `dtype=np.bool_`"):
        envs.reset(options={"reset_mask": np.array([1, 0, 1])})


def test_np_random_seed_is_each_env_s_seed(vector: Any) -> None:
    envs = vector(_cartpoles(3))
    envs.reset(seed=42)
    assert envs.np_random_seed == (42, 43, 44)


SPACES = {
    "Dict": Dict({"a": Discrete(3), "b": Box(-1, 1, (2,))}),
    "Tuple": Tuple((Discrete(4), Box(0, 1, (3,)))),
    "OneOf": OneOf((Discrete(3), Box(0, 1, (2,)))),
    "Text": Text(6),
}


@pytest.mark.parametrize("name", list(SPACES))
def test_dict_tuple_oneof_and_text_spaces_for_actions_and_observations(
    vector: Any, name: str
) -> None:
    space = SPACES[name]
    envs = vector([partial(SpaceEnv, space, space)] * 2)
    obs, _ = envs.reset(seed=0)
    assert obs in envs.observation_space
    envs.action_space.seed(0)
    for _ in range(3):  # the env raises if an action arrives other than sent
        obs, rewards, *_ = envs.step(envs.action_space.sample())
        assert obs in envs.observation_space and rewards.tolist() == [1.0, 1.0]


DYNAMIC = {"Graph": Graph(Box(0, 1, (2,)), Discrete(2)), "Sequence": Sequence(Discrete(4))}


@pytest.mark.parametrize("name", list(DYNAMIC))
def test_spaces_of_dynamic_size_go_through_the_pipes(vector: Any, name: str) -> None:
    space = DYNAMIC[name]
    envs = vector([partial(SpaceEnv, space, space)] * 2, shared_memory=False)
    obs, _ = envs.reset(seed=0)
    assert len(obs) == 2 and all(o in space for o in obs)
    obs, *_ = envs.step(envs.action_space.sample())
    assert all(o in space for o in obs)


def test_the_engine_sends_them_through_the_pipes_unasked() -> None:
    space = DYNAMIC["Graph"]
    envs = SharedMemoryVectorEnv([partial(SpaceEnv, space, Discrete(2))] * 2)
    try:
        assert not envs.engine.shared_obs and envs.engine.shared_actions
        obs, *_ = envs.step(np.array([0, 1]))
        assert all(o in space for o in obs)
    finally:
        envs.close()


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_closures_build_envs_under_spawn_and_forkserver(vector: Any, context: str) -> None:
    length = 7  # captured by the closure: plain pickle cannot send it

    def make() -> gym.Env:
        return gym.wrappers.TimeLimit(CartPoleEnv(), max_episode_steps=length)

    envs = vector([make], context=context)
    envs.reset(seed=0)
    assert envs.get_attr("_max_episode_steps") == (7,)


def test_a_spec_holding_a_lambda_reaches_the_vector_env(vector: Any) -> None:
    gym.register("TestLambdaSpec-v0", entry_point=SpaceEnv)
    try:
        fn = partial(
            gym.make,
            "TestLambdaSpec-v0",
            obs_space=Box(0, 1, (2,)),
            act_space=Discrete(2),
            reward_fn=lambda steps: 2.0 * steps,  # in the env's spec: plain pickle refuses it
            disable_env_checker=True,
        )
        envs = vector([fn] * 2)
        envs.reset(seed=0)
        envs.step(np.array([0, 1]))
        _, rewards, *_ = envs.step(np.array([0, 1]))
        assert rewards.tolist() == [4.0, 4.0]
        if isinstance(envs, SharedMemoryVectorEnv):  # AsyncVectorEnv keeps no spec
            assert envs.spec.kwargs["reward_fn"](3) == 6.0
    finally:
        del gym.registry["TestLambdaSpec-v0"]


def test_infos_hold_every_key_of_an_env_that_declares_none(vector: Any) -> None:
    envs = vector([partial(SpaceEnv, Box(0, 1, (2,)), Discrete(2))] * 2)
    _, infos = envs.reset(seed=0)
    assert infos["word"].tolist() == ["start", "start"]
    _, _, _, _, infos = envs.step(np.array([0, 1]))
    assert infos["n"].tolist() == [7, 7] and infos["_n"].tolist() == [True, True]
    assert infos["word"].tolist() == ["step", "step"]


# the engine's own guarantees --------------------------------------------------------------------
class Fussy(gym.Wrapper[Any, Any, Any, Any]):
    """Env number `bad` raises in `boom()`, in reset and when its `locked` is set."""

    def __init__(self, env: gym.Env, index: int, bad: int) -> None:
        super().__init__(env)
        self.index, self.bad = index, bad
        self.value = index * 10

    def boom(self) -> int:
        if self.index == self.bad:
            raise KeyError(f"env {self.index} says no")
        return self.index

    @property
    def locked(self) -> int:
        return 0

    @locked.setter
    def locked(self, value: int) -> None:
        if self.index == self.bad:
            raise PermissionError("locked")

    def reset(self, **kwargs: Any) -> Any:
        if self.index == self.bad and (kwargs.get("options") or {}).get("fail"):
            raise OSError("reset failed")
        return self.env.reset(**kwargs)


def _fussy(index: int, bad: int) -> gym.Env:
    return Fussy(CartPoleEnv(), index, bad)


@pytest.mark.parametrize("envs_per_worker", [1, 2])
def test_every_failing_command_leaves_the_next_one_in_step(envs_per_worker: int) -> None:
    envs = SharedMemoryVectorEnv(
        [partial(_fussy, i, bad=0) for i in range(4)], envs_per_worker=envs_per_worker
    )
    try:
        envs.reset(seed=0)
        failing = [
            (KeyError, lambda: envs.call("boom")),
            (AttributeError, lambda: envs.get_attr("no_such_thing")),
            (PermissionError, lambda: envs.set_attr("locked", 1)),
            (OSError, lambda: envs.reset(options={"fail": True})),
        ]
        for error, command in failing:
            with pytest.raises(error):
                command()
            assert envs.get_attr("value") == (0, 10, 20, 30)
            assert envs.engine.call("boom", env_ids=[1, 2, 3]) == [1, 2, 3]
        _, rewards, *_ = envs.step(np.zeros(4, np.int64))
        assert rewards.tolist() == [1.0] * 4
    finally:
        envs.close()


def test_get_attr_returns_a_method_without_calling_it() -> None:
    envs = SharedMemoryVectorEnv([CartPoleEnv] * 2)
    try:
        envs.reset(seed=0)
        closers = envs.get_attr("close")
        assert all(callable(c) for c in closers)
        assert envs.call("get_wrapper_attr", "gravity") == (9.8, 9.8)  # `call` is for calling
        _, rewards, *_ = envs.step(np.array([0, 1]))  # nothing was closed
        assert rewards.tolist() == [1.0, 1.0]
        with pytest.raises(ValueError, match="use `close` directly"):
            envs.call("close")
    finally:
        envs.close()


# SB3's VecEnv API ------------------------------------------------------------------------------
def _sb3_classes() -> dict[str, Any]:
    from stable_baselines3.common.vec_env import SubprocVecEnv

    from metabonk_gym.training.vecenv import SharedMemoryVecEnv

    return {"SubprocVecEnv": SubprocVecEnv, "engine": SharedMemoryVecEnv}


@pytest.fixture(params=["SubprocVecEnv", "engine"])
def sb3_vector(request: pytest.FixtureRequest) -> Any:
    made: list[Any] = []

    def build(*args: Any, **kwargs: Any) -> Any:
        venv = _sb3_classes()[request.param](*args, **kwargs)
        made.append(venv)
        return venv

    yield build
    for venv in made:
        venv.close()


def test_sb3_has_attr_then_set_attr_and_get_attr(sb3_vector: Any) -> None:
    venv = sb3_vector([CartPoleEnv] * 3)
    assert not venv.has_attr("dummy")  # an AttributeError in every worker, each read
    venv.set_attr("dummy", 12)
    assert venv.get_attr("dummy") == [12, 12, 12]
    venv.set_attr("dummy", 5, indices=[0, -1])
    assert venv.get_attr("dummy") == [5, 12, 5]
    assert venv.has_attr("dummy")


def test_sb3_get_attr_returns_a_method_and_closes_nothing(sb3_vector: Any) -> None:
    venv = sb3_vector([CartPoleEnv] * 2)
    venv.reset()
    assert all(callable(c) for c in venv.get_attr("close"))
    _, rewards, _, _ = venv.step(np.array([0, 1]))
    assert rewards.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("name", ["Dict", "Tuple"])
def test_sb3_per_env_lists_of_dict_and_tuple_actions(sb3_vector: Any, name: str) -> None:
    space = SPACES[name]
    venv = sb3_vector([partial(SpaceEnv, Box(0, 1, (2,)), space)] * 3)
    venv.reset()
    space.seed(0)
    for _ in range(3):  # the env raises if an action arrives other than sent
        _, rewards, _, _ = venv.step([space.sample() for _ in range(3)])
        assert rewards.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_sb3_start_method_with_closures(sb3_vector: Any, start_method: str) -> None:
    length = 3

    def make() -> gym.Env:
        return gym.wrappers.TimeLimit(CartPoleEnv(), max_episode_steps=length)

    venv = sb3_vector([make, make], start_method=start_method)
    venv.reset()
    dones = np.zeros(2, bool)
    for _ in range(length):
        _, _, dones, infos = venv.step(np.array([0, 0]))
    assert dones.all() and all(info["TimeLimit.truncated"] for info in infos)
    assert all("terminal_observation" in info for info in infos)
