"""`make_vec`'s guards: an info value of None (a latency not measured yet, a directive without a
target, as `PauseToThink` reports) beside a number or a dict in another env counts as absent
instead of breaking the step, and `close()` after a call that raised returns within its deadline
and leaves no worker behind."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from metabonk_gym.vector import make_vec


class Measured(gym.Wrapper[Any, Any, Any, Any]):
    """Env number `measured` (its reset seed) reports `latency_s` and a `target`; the others
    report None for both, as envs whose first answer has not come yet."""

    def __init__(self, env: gym.Env, measured: int, unbatchable: bool = False) -> None:
        super().__init__(env)
        self.measured = measured
        self.unbatchable = unbatchable
        self.index = -1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        obs, info = self.env.reset(seed=seed, options=options)
        self.index = -1 if seed is None else seed
        return obs, self._info(info)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._info(info)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        mine = self.index == self.measured
        out = {**info, "latency_s": 0.25 if mine else None, "target": {"x": 3} if mine else None}
        if self.unbatchable:  # a count in one env, a word in the other: no array holds both
            out["count"] = 1 if mine else "many"
        return out


@pytest.mark.parametrize("measured", [0, 1])
def test_an_info_value_of_none_counts_as_absent_in_either_env_order(measured: int) -> None:
    envs = make_vec(
        "MetaBonk/BonkQuest-v0",
        2,
        wrappers=[partial(Measured, measured=measured)],
        info_keys=("latency_s", "target"),
    )
    try:
        for _ in range(2):
            _, infos = envs.reset(seed=0)
            mask = [i == measured for i in range(2)]
            assert infos["_latency_s"].tolist() == mask and infos["_target"].tolist() == mask
            assert infos["latency_s"][measured] == 0.25 and infos["target"]["x"][measured] == 3
            _, _, _, _, infos = envs.step(np.zeros(2, dtype=np.int64))
            assert infos["_latency_s"].tolist() == mask and infos["target"]["_x"].tolist() == mask
    finally:
        envs.close()


def test_close_after_a_step_that_raised_returns_within_its_deadline() -> None:
    envs = make_vec(
        "MetaBonk/BonkQuest-v0", 2, wrappers=[partial(Measured, measured=0, unbatchable=True)]
    )
    try:
        with pytest.raises(ValueError):  # gymnasium cannot batch 1 and "many"
            envs.reset(seed=0)
    finally:
        started = time.monotonic()
        envs.close()  # gymnasium's AsyncVectorEnv waited for ever for env 0's answer, already read
        closed_in = time.monotonic() - started
    assert closed_in < 10.0, f"close took {closed_in:.1f} s"
    assert not any(_alive(pid) for pid in envs.engine.pids)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
