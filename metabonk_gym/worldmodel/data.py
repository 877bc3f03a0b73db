"""Episodes for world-model training: frames and actions from Minari datasets or from rollouts.

An `Episode` holds T+1 frames (H, W, C) uint8 and the T discrete actions between them (action
t turns frame t into frame t+1). `EnvFacts` is what a model must match: the game, env id, frame
shape and number of actions; episodes of different facts never mix. `windows` samples training
clips: two context frames, the next `horizon` actions and frames, on a random crop.

>>> import numpy as np
>>> ep = Episode(np.zeros((6, 8, 8, 1), np.uint8), np.array([0, 1, 2, 1, 0]))
>>> x, a, y = windows([ep], np.random.default_rng(0), batch=2, horizon=3, crop=None)
>>> x.shape, a.shape, y.shape
((2, 2, 8, 8, 1), (2, 3), (2, 3, 8, 8, 1))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.registration import env_traits
from metabonk_gym.training.datasets import dataset_env_kwargs, load_dataset
from metabonk_gym.training.errors import DatasetError
from metabonk_gym.training.predictor import sticky_actions
from metabonk_gym.worldmodel import CONTEXT


@dataclass
class Episode:
    """Frames (T+1, H, W, C) uint8 and actions (T,) int64 of one episode.

    Args:
        frames: the observations, first to last.
        actions: the action taken after each frame but the last.
    """

    frames: np.ndarray
    actions: np.ndarray

    def __post_init__(self) -> None:
        self.frames = as_frames(self.frames)
        if np.ndim(self.actions) == 2:  # Box actions (T, D)
            self.actions = np.asarray(self.actions, np.float32)
        else:
            self.actions = np.asarray(self.actions, np.int64).reshape(-1)
        if len(self.frames) != len(self.actions) + 1:
            raise DatasetError(
                f"an episode needs one more frame than actions, not {len(self.frames)} and {len(self.actions)}"
            )


@dataclass
class EnvFacts:
    """What a world model is tied to.

    Args:
        env_id: the env the frames come from.
        game: its game (None for an env without one).
        obs_shape: (H, W, C) of a frame.
        n_actions: its discrete actions (a Box's size when `action_box`).
        env_kwargs: how it was made (frameskip, obs_type, downscale, ...).
        action_box: actions are flat Box vectors (Megabonk's), not Discrete indices.
    """

    env_id: str
    game: str | None
    obs_shape: tuple[int, int, int]
    n_actions: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    action_box: bool = False

    def to_dict(self) -> dict[str, Any]:
        space: dict[str, Any] = {"type": "Discrete", "n": self.n_actions}
        if self.action_box:
            space = {"type": "Box", "shape": [self.n_actions], "n": self.n_actions}
        return {
            "env_id": self.env_id,
            "game": self.game,
            "obs_shape": list(self.obs_shape),
            "action_space": space,
            "env_kwargs": {k: v for k, v in self.env_kwargs.items() if _plain(v)},
        }

    def same_as(self, other: EnvFacts) -> bool:
        return (self.game, self.obs_shape, self.n_actions, self.action_box) == (
            other.game,
            other.obs_shape,
            other.n_actions,
            other.action_box,
        )


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def as_frames(frames: Any) -> np.ndarray:
    """(T, H, W) or (T, H, W, C) uint8 frames as (T, H, W, C)."""
    array = np.asarray(frames)
    if array.ndim == 3:
        array = array[..., None]
    if array.ndim != 4 or array.dtype != np.uint8:
        raise DatasetError(
            f"world models learn image observations (H, W, C) uint8, not {array.shape[1:]} {array.dtype}; "
            "record episodes with obs_type rgb or grayscale"
        )
    return array


def game_of(env_id: str, env: Any = None) -> str | None:
    """The game of an env: its game folder's name, else the registration's."""
    data = getattr(getattr(env, "unwrapped", None), "game_data", None)
    name = getattr(data, "name", None)
    if name:
        return str(name)
    try:
        return env_traits(env_id).game
    except Exception:
        return None


def _action_size(space: Any, what: str) -> tuple[int, bool]:
    """(actions or Box size, is a Box) of an action space world models take."""
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return int(space.shape[0]), True
    return _discrete(space, what), False


def _discrete(space: Any, what: str) -> int:
    if not isinstance(space, gym.spaces.Discrete):
        raise DatasetError(f"{what} has actions {space}; world models need a Discrete action space")
    return int(space.n)


def dataset_episodes(dataset_ids: Sequence[str]) -> tuple[list[Episode], EnvFacts]:
    """Every episode of the Minari datasets (one env, one frame shape, one action space)."""
    if not dataset_ids:
        raise DatasetError("name at least one Minari dataset (record one with `metabonk record`)")
    episodes: list[Episode] = []
    facts: EnvFacts | None = None
    for dataset_id in dataset_ids:
        dataset = load_dataset(dataset_id)
        kwargs = dataset_env_kwargs(dataset)
        env_id = str(kwargs.pop("env_id", "") or "unknown")
        space = dataset.spec.observation_space
        if isinstance(space, gym.spaces.Dict) and "pixels" in space.spaces:
            space = space["pixels"]
        if not isinstance(space, gym.spaces.Box):
            raise DatasetError(f"dataset {dataset_id} has observations {space}; need image frames")
        shape = tuple(int(v) for v in space.shape)
        shape3 = (*shape, 1) if len(shape) == 2 else shape
        if len(shape3) != 3 or space.dtype != np.uint8:
            raise DatasetError(
                f"dataset {dataset_id} has observations {space}; world models need uint8 images "
                "(record with obs_type rgb or grayscale)"
            )
        n, box = _action_size(dataset.spec.action_space, f"dataset {dataset_id}")
        here = EnvFacts(env_id, game_of(env_id), (shape3[0], shape3[1], shape3[2]), n, kwargs, box)
        if facts is not None and not facts.same_as(here):
            raise DatasetError(
                f"dataset {dataset_id} ({here.game}, frames {here.obs_shape}, {here.n_actions} actions) "
                f"does not match {dataset_ids[0]} ({facts.game}, frames {facts.obs_shape}, "
                f"{facts.n_actions} actions); train one model per game and frame shape"
            )
        facts = facts or here
        for episode in dataset.iterate_episodes():
            obs = episode.observations
            if isinstance(obs, dict):
                obs = obs["pixels"]
            if len(episode.actions) >= 1:
                episodes.append(Episode(obs, episode.actions))
    assert facts is not None
    if not episodes:
        raise DatasetError(f"datasets {', '.join(dataset_ids)} hold no episode with a step")
    return episodes, facts


def rollout_episodes(
    env_id: str,
    episodes: int = 4,
    steps: int = 300,
    seed: int = 0,
    policy: Callable[[Any], int] | None = None,
    log: Callable[[str], None] | None = None,
    **env_kwargs: Any,
) -> tuple[list[Episode], EnvFacts]:
    """`episodes` episodes of `env_id` (seeds `seed`, `seed + 1`, ...) under `policy` (an
    observation -> action callable), default the sticky random policy (each random action held
    2-9 steps, as a player holds a direction). One env at a time: one emulator per process."""
    import metabonk_gym  # noqa: F401  (registers the envs)

    out: list[Episode] = []
    facts: EnvFacts | None = None
    for i in range(episodes):
        if log:
            log(f"rollout {i + 1}/{episodes} of {env_id} (seed {seed + i})")
        env = gym.make(env_id, **env_kwargs)
        try:
            n = _discrete(env.action_space, env_id)
            obs, _ = env.reset(seed=seed + i)
            plan = sticky_actions(np.random.default_rng(seed + i), n, steps)
            frames, actions = [obs], []
            for t in range(steps):
                action = int(plan[t]) if policy is None else int(policy(obs))
                obs, _, terminated, truncated, _ = env.step(action)
                frames.append(obs)
                actions.append(action)
                if terminated or truncated:
                    break
            episode = Episode(np.stack(frames), np.asarray(actions))
            if facts is None:
                h, w, c = episode.frames.shape[1:]
                facts = EnvFacts(env_id, game_of(env_id, env), (h, w, c), n, dict(env_kwargs))
        finally:
            env.close()
        out.append(episode)
    if facts is None:
        raise DatasetError("no rollout episode: ask for at least one")
    return out, facts


def windows(
    episodes: Sequence[Episode],
    rng: np.random.Generator,
    batch: int,
    horizon: int,
    crop: tuple[int, int] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`batch` random clips: context frames (B, CONTEXT, h, w, C), actions (B, horizon), targets
    (B, horizon, h, w, C); `crop` (h, w) cuts the same random window from every frame of a clip."""
    need = CONTEXT + horizon
    usable = [ep for ep in episodes if len(ep.frames) >= need]
    if not usable:
        raise DatasetError(f"world-model training needs episodes of at least {need} frames")
    weights = np.asarray([len(ep.frames) - need + 1 for ep in usable], np.float64)
    picks = rng.choice(len(usable), size=batch, p=weights / weights.sum())
    h, w = usable[0].frames.shape[1:3]
    ch, cw = (h, w) if crop is None else (min(crop[0], h), min(crop[1], w))
    xs, acts, ys = [], [], []
    for i in picks:
        ep = usable[int(i)]
        t = int(rng.integers(CONTEXT - 1, len(ep.frames) - horizon))  # the present frame
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        clip = ep.frames[t - CONTEXT + 1 : t + horizon + 1, y0 : y0 + ch, x0 : x0 + cw]
        xs.append(clip[:CONTEXT])
        ys.append(clip[CONTEXT:])
        acts.append(ep.actions[t : t + horizon])
    return np.stack(xs), np.stack(acts), np.stack(ys)


def split_heldout(
    episodes: list[Episode], fraction: float = 0.2
) -> tuple[list[Episode], list[Episode]]:
    """(train, held-out): the last `fraction` of episodes held out (at least one when there are
    two or more; with one episode, its last fifth)."""
    if len(episodes) >= 2:
        n = max(1, round(len(episodes) * fraction))
        return episodes[:-n], episodes[-n:]
    ep = episodes[0]
    cut = max(CONTEXT + 1, int(len(ep.actions) * (1 - fraction)))
    if cut >= len(ep.actions) - CONTEXT:
        return episodes, []
    return [Episode(ep.frames[: cut + 1], ep.actions[:cut])], [
        Episode(ep.frames[cut:], ep.actions[cut:])
    ]


def load_source(
    source: dict[str, Any], log: Callable[[str], None] | None = None
) -> tuple[list[Episode], EnvFacts]:
    """Episodes from a source description (what `config.yaml` records under `source`):
    `{"datasets": [ids]}` or `{"env_id": ..., "episodes": n, "episode_steps": m, "seed": s,
    "env_kwargs": {...}}` (rollouts of the sticky random policy)."""
    if source.get("datasets"):
        return dataset_episodes(list(source["datasets"]))
    if source.get("env_id"):
        return rollout_episodes(
            str(source["env_id"]),
            episodes=int(source.get("episodes", 4)),
            steps=int(source.get("episode_steps", 300)),
            seed=int(source.get("seed", 0)),
            log=log,
            **dict(source.get("env_kwargs") or {}),
        )
    raise DatasetError(
        "no episodes: name Minari datasets (`metabonk train world-model DATASET... --out DIR`) or "
        "an env to roll out (`--env ENV_ID`)"
    )
