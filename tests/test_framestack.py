"""The one frame stack (`metabonk_gym.training.stacking`): `ObservationStacker` (one env, a `Box`
or each key of a `Dict`, used by a loaded policy and RLlib's `LastAxisFrameStack`), `FrameStacker`,
`stack_episode` (a recorded episode) and the training vector env's `LeanFrameStack` give exactly
what SB3's `VecFrameStack(channels_order="last")` gives a policy, byte for byte, on real
observations and across episode ends."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.vec_env.stacked_observations import StackedObservations

from metabonk_gym.training.rllib_envs import LastAxisFrameStack
from metabonk_gym.training.safeload import SpacesEnv
from metabonk_gym.training.stacking import ObservationStacker


def _space() -> gym.spaces.Dict:
    return gym.spaces.Dict(
        {
            "pixels": gym.spaces.Box(0, 255, (4, 5, 1), np.uint8),
            "state": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        }
    )


def test_the_stacker_matches_sb3_key_by_key_across_a_reset() -> None:
    space = _space()
    space.seed(0)
    observations = [space.sample() for _ in range(7)]
    reference = StackedObservations(1, 3, space, "last")
    stacker = ObservationStacker(space, 3)
    batch = {k: v[None] for k, v in observations[0].items()}
    expected: Any = reference.reset(batch)  # type: ignore[arg-type]
    got = stacker.push(observations[0], reset=True, copy=True)
    assert all(np.array_equal(got[k], expected[k][0]) for k in space.spaces)
    for t, obs in enumerate(observations[1:], 1):
        done = t == 4  # the episode ends at step 4: the next stack starts from zeros
        batch = {k: v[None] for k, v in obs.items()}
        # SB3 writes the stacked terminal observation into this dict: give it a copy
        infos = [{"terminal_observation": dict(obs)}] if done else [{}]
        expected, _ = reference.update(batch, np.array([done]), infos)  # type: ignore[arg-type]
        got = stacker.push(obs, reset=done, copy=True)
        assert all(np.array_equal(got[k], expected[k][0]) for k in space.spaces), t
    stacked: Any = stacker.space
    assert stacked["pixels"].shape == (4, 5, 3) and stacked["state"].shape == (9,)


def test_the_rllib_wrapper_is_the_stacker_around_an_env() -> None:
    space = _space()
    env = LastAxisFrameStack(SpacesEnv(space, gym.spaces.Discrete(3)), 2)
    assert env.observation_space == ObservationStacker(space, 2).space
    assert env.keys == ["pixels", "state"]


class _Replay(gym.Env[Any, int]):
    """Plays recorded observations back: episode after episode, each ending where it was cut."""

    def __init__(self, space: gym.Space, episodes: list[list[Any]]) -> None:
        self.observation_space, self.action_space = space, gym.spaces.Discrete(2)
        self.episodes, self.n, self.t = episodes, -1, 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        self.n, self.t = (self.n + 1) % len(self.episodes), 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        last = self.t == len(self.episodes[self.n]) - 1
        return self._obs(), 0.0, False, last, {}

    def _obs(self) -> Any:  # a new dict: SB3 writes the stacked terminal observation into it
        obs = self.episodes[self.n][self.t]
        return dict(obs) if isinstance(obs, dict) else obs


def _record(env: gym.Env, steps: int) -> list[Any]:
    """`steps + 1` real observations of one episode (seeded random actions)."""
    try:
        obs, _ = env.reset(seed=0)
        env.action_space.seed(0)
        out = [obs]
        for _ in range(steps):
            out.append(env.step(env.action_space.sample())[0])
        return out
    finally:
        env.close()


@pytest.fixture(scope="module")
def recorded() -> dict[str, tuple[gym.Space, list[Any]]]:
    """Real observations: BonkQuest's frames with a `wrappers:` stack (a Dict of uint8 and int32
    keys), its frames alone (a Box) and BonkArena's float state vector."""
    from metabonk_gym.training.wrapstack import apply_wrappers

    quest = apply_wrappers(
        gym.make("MetaBonk/BonkQuest-v0", obs_type="grayscale", downscale=4),
        [
            {"name": "tile_tokens", "buckets": 64, "sprites": False},
            {"name": "button_history", "n": 2},
        ],
    )
    space = quest.observation_space
    dicts = _record(quest, 40)
    arena = gym.make("MetaBonk/BonkArena-v0", obs_type="state")
    state_space = arena.observation_space
    return {
        "dict": (space, dicts),
        "pixels": (space["pixels"], [o["pixels"] for o in dicts]),  # type: ignore[index]
        "state": (state_space, _record(arena, 40)),
    }


def _cut(observations: list[Any], lengths: list[int]) -> list[list[Any]]:
    """Episodes of `lengths` steps (`length + 1` observations each) from one recording."""
    out, start = [], 0
    for n in lengths:
        out.append(observations[start : start + n + 1])
        start += 2
    return out


def _same_bytes(a: Any, b: Any, where: object) -> None:
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _same_bytes(a[key], b[key], (where, key))
        return
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape) and a.tobytes() == b.tobytes(), where


def _keyed(obs: Any) -> dict[str, np.ndarray]:
    return obs if isinstance(obs, dict) else {"": obs}


@pytest.mark.parametrize("kind", ["dict", "pixels", "state"])
@pytest.mark.parametrize("n_stack", [2, 4])
def test_every_stacker_gives_vecframestacks_bytes_on_real_observations(
    recorded: dict[str, tuple[gym.Space, list[Any]]], kind: str, n_stack: int
) -> None:
    """`LeanFrameStack` (training), `ObservationStacker` and `FrameStacker` (one env online) and
    `stack_episode` (a recorded episode) against SB3's own `VecFrameStack`, byte for byte, with
    episodes of two envs ending at different steps (terminal observations too)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

    from metabonk_gym.training.envs import FrameStacker, stack_episode
    from metabonk_gym.training.framestack import LeanFrameStack

    space, observations = recorded[kind]
    cuts = [_cut(observations, [6, 9, 1, 7, 5]), _cut(observations, [3, 8, 10, 2, 4])]

    def venv() -> DummyVecEnv:
        return DummyVecEnv([lambda e=e: _Replay(space, e) for e in cuts])  # type: ignore[misc]

    theirs = VecFrameStack(venv(), n_stack, channels_order="last")
    ours = LeanFrameStack(venv(), n_stack, channels_order="last")
    stackers = [ObservationStacker(space, n_stack) for _ in cuts]
    assert ours.observation_space == theirs.observation_space == stackers[0].space
    expected: Any = theirs.reset()
    _same_bytes(ours.reset(), expected, "reset")
    episodes: list[list[list[Any]]] = [[[]] for _ in cuts]  # each env's stacked episodes
    for i, stacker in enumerate(stackers):
        _same_bytes(stacker.push(cuts[i][0][0], reset=True, copy=True), _row(expected, i), i)
        episodes[i][-1].append(_row(expected, i))
    for t in range(sum(len(e) - 1 for e in cuts[0]) - 1):
        expected, _, dones, their_infos = theirs.step(np.zeros(2, np.int64))
        got, _, our_dones, our_infos = ours.step(np.zeros(2, np.int64))
        assert dones.tolist() == our_dones.tolist()
        _same_bytes(got, expected, t)
        for i, stacker in enumerate(stackers):
            row, raw = _row(expected, i), _raw(ours, i)
            _same_bytes(stacker.push(raw, reset=bool(dones[i]), copy=True), row, (t, i))
            if dones[i]:
                terminal = their_infos[i]["terminal_observation"]
                _same_bytes(our_infos[i]["terminal_observation"], terminal, (t, i, "terminal"))
                episodes[i][-1].append(terminal)
                episodes[i].append([])
            episodes[i][-1].append(row)
    checked = 0
    for i, cut in enumerate(cuts):
        for episode, stacked in zip(cut, episodes[i][:-1], strict=False):
            frames = {k: np.stack([_keyed(o)[k] for o in episode]) for k in _keyed(episode[0])}
            want = {k: np.stack([_keyed(s)[k] for s in stacked]) for k in frames}
            for key, arr in frames.items():
                _same_bytes(stack_episode(arr, n_stack), want[key], (i, key))
                online = FrameStacker(n_stack)
                rows = [online.reset(arr[0]).copy()] + [online.add(f).copy() for f in arr[1:]]
                _same_bytes(np.stack(rows), want[key], (i, key, "online"))
            checked += 1
    assert checked >= 6
    theirs.close()
    ours.close()


def _row(obs: Any, i: int) -> Any:
    return {k: v[i] for k, v in obs.items()} if isinstance(obs, dict) else obs[i]


def _raw(venv: Any, i: int) -> Any:
    """Env `i`'s last observation before the stack (after an episode's end: the reset one)."""
    replay = venv.venv.envs[i]
    return replay.episodes[replay.n][replay.t]
