"""Training envs: SB3 vector envs of MetaBonk games, and the preprocessing a trained policy needs.

Every env takes the same core options (`frameskip`, `obs_type`, `downscale`, `reward`,
`max_episode_steps`), so one `make_env` serves all; what differs is data on the registration
(`metabonk_gym.registration.env_traits`; Megabonk's env `i` talks to port `base_port + i`).
The envs step in the worker processes of the project's shared-memory engine
(`SharedMemoryVecEnv`, SB3's `VecEnv` API with its auto-reset; about one worker per core, several
envs per worker). `VecMonitor` adds episode statistics and `LeanFrameStack` (SB3's
`VecFrameStack` on the one stack rule) Atari-style frame stacking. Grayscale and downscaling
happen inside the env, with `metabonk_gym.preprocess`, which `convert_frames` also uses for
recorded datasets. The frame stack (`FrameStacker`, `ObservationStacker`, `stack_episode`,
`stacked_space`) lives in `metabonk_gym.training.stacking` and is re-exported here.

>>> import numpy as np
>>> frames = np.zeros((2, 160, 240, 3), np.uint8)
>>> convert_frames(frames, ("rgb", 1), ("grayscale", 4)).shape
(2, 40, 60, 1)
>>> stack_episode(np.ones((3, 2, 2, 1), np.uint8), 2)[0, 0, 0].tolist()
[0, 1]
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from metabonk_gym.learned.bind import bind_learned_terms
from metabonk_gym.preprocess import screen
from metabonk_gym.registration import ENV_IDS, env_traits, short_id
from metabonk_gym.rewards.terms import check_op
from metabonk_gym.training.config import TrainConfig
from metabonk_gym.training.errors import ConfigError, DatasetError
from metabonk_gym.training.megabonk import check_reachable
from metabonk_gym.training.stacking import (  # noqa: F401  (re-exported: the one frame stack)
    FrameStacker,
    ObservationStacker,
    stack_episode,
    stacked_space,
)
from metabonk_gym.training.thinkserver import start_think_server
from metabonk_gym.training.wrapstack import apply_wrappers, uses_dict_extractor
from metabonk_gym.vector import default_envs_per_worker
from metabonk_gym.vector.view import bind_views, tap_env, tap_env_fns

#: The smallest image side NatureCNN (SB3's `MultiInputPolicy` image extractor) accepts.
MIN_FRAME_SIDE = 36


class StartWrapper(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Chooses each episode's start: a state (name or `.state` file) and a game seed from a list.

    Curricula change the start of running envs through `set_start` (via `VecEnv.env_method`),
    and swarm mode saves a milestone state with `save_start_state`.

    Args:
        env: an env that takes `reset(options={"state", "game_seed"})`.
        state: the start state (None: the env's own).
        game_seeds: game seeds to draw from at each reset (None: the env draws).
    """

    def __init__(
        self, env: gym.Env, state: str | None = None, game_seeds: Sequence[int] | None = None
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, state=state, game_seeds=game_seeds)
        gym.Wrapper.__init__(self, env)
        self.start_state = state
        self.game_seeds = list(game_seeds) if game_seeds else None
        self._rng = np.random.default_rng()

    def set_start(self, state: str | None, game_seeds: Sequence[int] | None = None) -> None:
        """Start the next episodes from `state` (and draw game seeds from `game_seeds`)."""
        self.start_state = state
        self.game_seeds = list(game_seeds) if game_seeds else None

    def save_start_state(self, path: str) -> str:
        """Write the machine state now to `path` (a stable-retro `.state` file)."""
        self.env.unwrapped.save_state(path)  # type: ignore[attr-defined]
        return path

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        options = dict(options or {})
        if self.start_state is not None:
            options.setdefault("state", self.start_state)
        if self.game_seeds:
            options.setdefault("game_seed", int(self._rng.choice(self.game_seeds)))
        return self.env.reset(seed=seed, options=options or None)


class WaypointReward(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A bonus each time the episode reaches a cell further along a demonstration's path.

    Why: started anywhere on an explorer's path (robustify), PPO sees the game's sparse reward
    only at the next key or door; the path's own cells (`set_waypoints`: RAM variables
    floor-divided by their buckets, read from `info`) say which way is forward at every step.
    A cell up to `lookahead` waypoints ahead matches (a policy cuts corners), and pays for
    every waypoint it passes. Like `set_start`, new waypoints apply from the next reset.

    Args:
        env: an env whose `info` carries the waypoints' variables.
        weight: the bonus per waypoint passed (`info["reward_terms"]["waypoints"]`).
        lookahead: how many waypoints ahead the current cell may match.
    """

    def __init__(self, env: gym.Env, weight: float, lookahead: int = 20) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, weight=weight, lookahead=lookahead)
        gym.Wrapper.__init__(self, env)
        self.weight, self.lookahead = float(weight), int(lookahead)
        self.columns: list[tuple[str, int]] = []
        self.waypoints: list[tuple[int, ...]] = []
        self._pending: tuple[list[tuple[str, int]], list[tuple[int, ...]]] = ([], [])
        self.reached = 0

    def set_waypoints(
        self, columns: Sequence[Sequence[Any]], waypoints: Sequence[Sequence[int]]
    ) -> None:
        """The next episodes follow `waypoints` (cell keys over `columns`: (variable, bucket))."""
        self._pending = (
            [(str(name), int(bucket)) for name, bucket in columns],
            [tuple(int(v) for v in key) for key in waypoints],
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self.columns, self.waypoints = self._pending
        self.reached = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not self.waypoints:
            return obs, float(reward), terminated, truncated, info
        try:
            key = tuple(int(info[name]) // bucket for name, bucket in self.columns)
        except KeyError as exc:
            raise ConfigError(f"waypoints read {exc}, which is not an info variable") from exc
        ahead = self.waypoints[self.reached : self.reached + self.lookahead]
        hits = [j for j, waypoint in enumerate(ahead) if waypoint == key]
        bonus = 0.0
        if hits:
            bonus = self.weight * (hits[-1] + 1)
            self.reached += hits[-1] + 1
        terms = dict(info.get("reward_terms") or {})
        terms["waypoints"] = bonus
        info["reward_terms"] = terms
        return obs, float(reward) + bonus, terminated, truncated, info


class GoalWrapper(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Ends the episode with `info["success"] = True` once a game variable meets a condition
    (e.g. `rooms_visited >= 2`: left the first room). Without a goal, `success` is `won`.

    Args:
        env: the env.
        goal: `{"variable", "op", "reference"}` (a stable-retro op), or None.
    """

    def __init__(self, env: gym.Env, goal: dict[str, Any] | None = None) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, goal=goal)
        gym.Wrapper.__init__(self, env)
        self.goal = dict(goal) if goal else None
        if self.goal is not None:
            self._test = check_op(self.goal.get("op", "equal"))
            self._reference = int(self.goal.get("reference", 0))
            self._variable = str(self.goal["variable"])

    def _success(self, info: dict[str, Any]) -> bool:
        if self.goal is None:
            return bool(info.get("won", False))
        if self._variable in info:
            value = info[self._variable]
        else:
            value = self.env.unwrapped.read_variable(self._variable)  # type: ignore[attr-defined]
        return bool(self._test(int(value), self._reference))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        info["success"] = False
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["success"] = self._success(info)
        return obs, reward, terminated or info["success"], truncated, info


class ApproachShaping(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Potential-based reward shaping (Ng et al. 1999) towards the current objective.

    Phi(s) = weight * (50 * i - manhattan(position, target_i)), where target_i is the first of
    `targets` whose coordinates are present (not `absent`): e.g. the key while it lies in the room,
    then the exit. The reward gains Phi(s') - Phi(s); over an episode that sums to
    Phi(end) - Phi(start), so it changes no optimal policy, but it turns "find the key, then the
    door" into a dense signal PPO learns in far fewer steps. Added to `info["reward_terms"]` as
    `shaping`.

    Args:
        env: an env whose info has the position and target variables.
        position: the player's (x, y) variables.
        targets: the objectives' (x, y) variables, in order.
        weight: Phi's scale.
        absent: the coordinate value of an objective that is not there.
    """

    STAGE = 50.0  # more than any distance on a 30x20 room: reaching the next objective pays

    def __init__(
        self,
        env: gym.Env,
        position: Sequence[str] = ("player_x", "player_y"),
        targets: Sequence[Sequence[str]] = (("key_x", "key_y"), ("exit_x", "exit_y")),
        weight: float = 0.05,
        absent: int = 255,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self,
            position=list(position),
            targets=[list(t) for t in targets],
            weight=weight,
            absent=absent,
        )
        gym.Wrapper.__init__(self, env)
        self.position = tuple(position)
        self.targets = [tuple(t) for t in targets]
        self.weight = float(weight)
        self.absent = int(absent)
        self._phi = 0.0

    def potential(self, info: dict[str, Any]) -> float:
        x, y = int(info[self.position[0]]), int(info[self.position[1]])
        for i, (tx_name, ty_name) in enumerate(self.targets):
            tx, ty = int(info[tx_name]), int(info[ty_name])
            if tx != self.absent and ty != self.absent:
                return self.weight * (self.STAGE * i - (abs(tx - x) + abs(ty - y)))
        return self.weight * self.STAGE * len(self.targets)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._phi = self.potential(info)
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        phi = self.potential(info)
        bonus = phi - self._phi
        self._phi = phi
        terms = dict(info.get("reward_terms") or {})
        terms["shaping"] = bonus
        info["reward_terms"] = terms
        return obs, float(reward) + bonus, terminated, truncated, info


def make_env(env_id: str, cfg: TrainConfig, index: int = 0, **extra: Any) -> gym.Env:
    """One env per the config (in this process): `gym.make` + shaping + goal + start wrappers,
    then the config's `wrappers:` stack (`metabonk_gym.training.wrapstack`), outermost.

    `index` matters for envs with a port per copy: env `index` talks to `base_port + index`.
    """
    _check_env_id(env_id)
    traits = env_traits(env_id)
    try:
        env = gym.make(env_id, **{**cfg.env_kwargs_for_make(env_id, index), **extra})
    except TypeError as exc:  # an unknown env_kwargs key
        raise ConfigError(f"{env_id} does not take these env_kwargs: {exc}") from exc
    try:
        bind_learned_terms(env)  # `learned` reward terms score frames with their model
    except BaseException:
        env.close()
        raise
    base: Any = env.unwrapped
    if cfg.goal is not None:
        known = set(base.variable_names if traits.ram_variables else base.info_names)
        if cfg.goal["variable"] not in known:
            env.close()
            raise ConfigError(
                f"goal variable {cfg.goal['variable']!r} is not a variable of {env_id}; "
                f"valid: {', '.join(sorted(known))}"
            )
    if cfg.shaping is not None:
        shaped = ApproachShaping(env, **cfg.shaping)
        names = [*shaped.position, *(n for t in shaped.targets for n in t)]
        missing = [n for n in names if n not in base.info_names]
        if missing:
            env.close()
            raise ConfigError(f"shaping reads {missing}, which are not info variables of {env_id}")
        env = shaped
    if cfg.goal is not None or traits.can_win:  # `success`: the goal, else `won`
        env = GoalWrapper(env, cfg.goal)
    if cfg.waypoint_reward > 0:
        env = WaypointReward(env, cfg.waypoint_reward)
    if traits.start_states:
        env = StartWrapper(env, game_seeds=cfg.game_seeds)
    env = apply_wrappers(env, cfg.wrappers)  # closes the env when a wrapper fails
    return tap_env(env)  # a live viewer's frames (`--watch`); the env itself otherwise


#: Info keys training's callbacks read every step (`ThinkScalarsCallback`); an episode's final
#: info, with the return of each reward term (`episode_reward_terms`), always arrives whole.
TRAIN_INFO_KEYS = ("think", "memory")


def start_method() -> str:
    """`fork` where there is one: workers start in milliseconds with this process's imports.

    SB3's default (`forkserver`) makes every worker import stable_baselines3 and with it torch,
    seconds per env on a busy 2-core machine. Forking is safe here because the workers run only
    the emulator and numpy, never torch, and the engine pauses the garbage collector across the
    fork while each worker first freezes what it inherited (`process.gc_paused`,
    `process.adopt_inherited_objects`): a worker never finalizes this process's objects (an
    open emulator, a Ray session's leftovers), whose native destructors crash outside it
    (docs/vector.md).
    """
    import multiprocessing

    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def make_train_venv(
    env_id: str,
    cfg: TrainConfig,
    n_envs: int | None = None,
    env_spaces: tuple[spaces.Space, spaces.Space] | None = None,
    info_keys: Sequence[str] = (),
) -> Any:
    """The training vector env: `n_envs` (default `cfg.n_envs`) envs on the project's
    shared-memory engine (`SharedMemoryVecEnv`: one worker process per emulator, several TCP
    clients per worker), then `VecMonitor` and `VecFrameStack` per `cfg`. `env_spaces` (from
    `probe_env`) spares building an env just to learn them; `info_keys` are info keys a callback
    reads every step, beside `TRAIN_INFO_KEYS`."""
    from stable_baselines3.common.vec_env import VecMonitor

    from metabonk_gym.training.framestack import LeanFrameStack
    from metabonk_gym.training.vecenv import SharedMemoryVecEnv

    count = n_envs if n_envs is not None else cfg.n_envs
    # a `pause_to_think` with `serve: true`: one model server for all envs, stopped by close_venv
    cfg, server = start_think_server(env_id, cfg, count)
    try:
        env_fns = tap_env_fns([partial(make_env, env_id, cfg, i) for i in range(count)])
        venv: Any = SharedMemoryVecEnv(
            env_fns,
            envs_per_worker=default_envs_per_worker(env_id, count),
            info_keys=(*TRAIN_INFO_KEYS, *info_keys),
            context=start_method(),
            spaces=env_spaces,
        )
    except BaseException:
        if server is not None:
            server.stop()
        raise
    venv.think_server = server
    bind_views(env_fns, venv.engine)
    venv = VecMonitor(venv)
    if cfg.frame_stack > 1:
        venv = LeanFrameStack(venv, cfg.frame_stack, channels_order="last")  # as VecFrameStack
    return venv


def close_venv(venv: Any, timeout: float = 20.0) -> None:
    """Close a training vector env, also after Ctrl-C interrupted it mid-step: the engine kills
    a worker that does not finish within `timeout` seconds."""
    base = getattr(venv, "unwrapped", venv)
    engine = getattr(base, "engine", None)
    try:
        if engine is not None:
            engine.close(timeout_s=timeout)
        venv.close()
    finally:
        server = getattr(base, "think_server", None)
        if server is not None:  # the envs' model server (`serve: true`) ends with them
            server.stop()


def probe_env(env_id: str, cfg: TrainConfig) -> tuple[spaces.Space, spaces.Space, list[str]]:
    """Build one env in this process and close it: checks the ROM, state, reward and kwargs
    before a run directory is touched, and returns (observation space, action space, info names).

    For envs with a port per copy it also checks that a game answers on each of the `n_envs`
    ports; for `MultiInputPolicy` that the frames are large enough for its CNN.
    """
    env = make_env(env_id, cfg)
    try:
        check_policy_fit(cfg, env.observation_space)
        if env_traits(env_id).port_per_env:
            check_reachable(cfg)
        return env.observation_space, env.action_space, list(env.unwrapped.info_names)  # type: ignore[attr-defined]
    finally:
        env.close()


def check_policy_fit(cfg: TrainConfig, space: spaces.Space) -> None:
    """A Dict observation needs `MultiInputPolicy` and Box values (numbers a network reads);
    with `features: nature` it runs NatureCNN on the Dict's `pixels`: at least 36 pixels a side."""
    if isinstance(space, spaces.Dict) and cfg.wrappers:
        if cfg.policy != "MultiInputPolicy":
            raise ConfigError(
                f"the env's observation is a Dict ({', '.join(space.spaces)}); set policy: "
                "MultiInputPolicy"
            )
        for key, sub in space.spaces.items():
            if not isinstance(sub, spaces.Box):
                raise ConfigError(
                    f"observation key {key!r} is a {type(sub).__name__} space, which a policy "
                    "cannot read; set the wrapper that adds it to leave it out of the "
                    "observation (e.g. text_map key: null)"
                )
    if cfg.policy != "MultiInputPolicy" or not isinstance(space, spaces.Dict):
        return
    pixels = space.spaces.get("pixels")
    if uses_dict_extractor(cfg):
        return  # the small extractor (`DictExtractor`) reads frames of 16 pixels a side
    if pixels is not None and min(pixels.shape[:2]) < MIN_FRAME_SIDE:  # type: ignore[index]
        raise ConfigError(
            f"frames of {tuple(pixels.shape[:2])} (after downscale {cfg.downscale}) are too small "  # type: ignore[index]
            f"for the MultiInputPolicy's CNN (at least {MIN_FRAME_SIDE} pixels a side); lower "
            "downscale or raise env_kwargs.frame_size"
        )


def _check_env_id(env_id: str) -> None:
    if short_id(env_id) not in gym.registry:
        raise ConfigError(
            f"unknown env id {env_id!r}; registered MetaBonk envs: {', '.join(ENV_IDS)} "
            "(see `metabonk list`)"
        )


def convert_frames(
    frames: np.ndarray, source: tuple[str, int], target: tuple[str, int]
) -> np.ndarray:
    """Frames recorded as `source` (obs_type, downscale) converted to `target`, bit for bit as the
    env computes them (downscale by block means, then ITU-R 601 luma).

    Only full-resolution RGB converts to anything; other pairs must be equal. State vectors
    (`obs_type` state, where downscale means nothing) convert to nothing else.
    """
    source = (source[0], 1 if source[0] == "state" else int(source[1]))
    target = (target[0], 1 if target[0] == "state" else int(target[1]))
    if source == target:
        return frames
    if source != ("rgb", 1) or target[0] == "state":
        raise DatasetError(
            f"dataset observations are {source[0]} downscale {source[1]}, the config wants {target[0]} "
            f"downscale {target[1]}; only full-size RGB (obs_type rgb, downscale 1) converts. Record "
            "again with the config's obs_type/downscale, or set them in the config to match the dataset"
        )
    obs_type, k = target
    return screen(frames, obs_type, k)
