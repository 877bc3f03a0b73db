"""Same seeds and actions give the same trajectories as on the main before the env contract.

`tests/data/trajectories.json` was recorded with `scripts/record_trajectories.py` on commit
cf0eb5f (before the game-packages / env-contract change): for each case, an env, its make
kwargs, a seed and the actions taken, with a hash of every observation, the rewards, the done
flags and the info scalars. Replaying the stored actions must reproduce all of them; only the
names the contract renamed (`health` -> `hp`, the Dict frame key -> `pixels`) are mapped. A case
whose behaviour changed on purpose was recorded again alone; the file's `rerecorded` says which
and why (`megabonk_sim`: reset starts on a frame now).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import metabonk_gym  # noqa: F401
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.gba.skyemu_peer import PeerProcess

pytestmark = pytest.mark.net

DATA = json.loads((Path(__file__).parent / "data" / "trajectories.json").read_text())
CASES = {case["name"]: case for case in DATA["cases"]}
RENAMED_INFO = {"health": "hp", "max_health": "max_hp"}
RENAMED_OBS = {"frame": "pixels", "image": "pixels"}


def digest(obs: Any) -> Any:
    """A short hash per observation (per key for Dict observations, keys renamed)."""
    if isinstance(obs, dict):
        return {k: digest(v) for k, v in sorted(obs.items())}
    arr = np.ascontiguousarray(obs)
    return f"{arr.dtype.str}{arr.shape}:" + hashlib.sha1(arr.tobytes()).hexdigest()[:16]


def renamed(recorded: Any) -> Any:
    if isinstance(recorded, dict):
        return {RENAMED_OBS.get(k, k): v for k, v in recorded.items()}
    return recorded


def as_action(space: gym.Space, value: Any) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {k: as_action(space[k], v) for k, v in value.items()}
    if isinstance(space, gym.spaces.Discrete):
        return int(value)
    return np.asarray(value, dtype=space.dtype)


def check_info(recorded: dict[str, Any], info: dict[str, Any], where: str) -> None:
    for key, value in recorded.items():
        new = RENAMED_INFO.get(key, key)
        assert new in info, f"{where}: info lost {key!r} (expected as {new!r})"
        got = info[new]
        if isinstance(value, float):
            assert got == pytest.approx(value, rel=1e-6, abs=1e-6), f"{where}: info[{new!r}]"
        else:
            assert got == value, f"{where}: info[{new!r}] is {got!r}, was {value!r}"


@pytest.fixture(scope="module")
def quest_peer() -> Iterator[PeerProcess]:
    rom = GameData(bundled_game_folder("BonkQuest")).folder / "rom.gba"
    with PeerProcess(rom) as peer:
        yield peer


@pytest.mark.parametrize("name", sorted(CASES))
def test_replay_matches_the_recording(name: str, request: pytest.FixtureRequest) -> None:
    case = CASES[name]
    kwargs = dict(case["kwargs"])
    sim = None
    if kwargs.get("backend") == "skyemu":
        kwargs["skyemu_url"] = request.getfixturevalue("quest_peer").url
    if case["env"].endswith("Megabonk-v0"):
        sim = BonkLinkSim(port=0, mode="lockstep", seed=case["seed"], frame_format="raw_rgb")
        kwargs["port"] = sim.start()
    env = gym.make(case["env"], **kwargs)
    try:
        obs, info = env.reset(seed=case["seed"])
        assert digest(obs) == renamed(case["reset"]["obs"]), "reset observation differs"
        check_info(case["reset"]["info"], info, "reset")
        for i, (action, step) in enumerate(zip(case["actions"], case["steps"], strict=False)):
            obs, reward, terminated, truncated, info = env.step(as_action(env.action_space, action))
            where = f"{name} step {i}"
            assert digest(obs) == renamed(step["obs"]), f"{where}: observation differs"
            assert float(reward) == pytest.approx(step["reward"], rel=1e-6, abs=1e-6), where
            assert (bool(terminated), bool(truncated)) == (step["terminated"], step["truncated"]), (
                where
            )
            check_info(step["info"], info, where)
    finally:
        env.close()
        if sim is not None:
            sim.stop()
