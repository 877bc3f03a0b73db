"""Training on `MetaBonk/Megabonk-v0`: config checks, env construction and lockstep sims.

Megabonk is not an emulator: the env is a TCP client of the BonkLink plugin (or of
`metabonk bonklink-sim`, the stand-in game), so training env `i` connects to `base_port + i`
(like `metabonk_gym.make_vec(..., base_port=)`), and all envs live in the trainer's process. The
GBA-only config keys do not apply; these do, with the meaning below:

* `frameskip`: action repeat, game ticks per agent step (the action is sent for that many
  packets; rewards add up). 4 ticks at 60 Hz: 15 decisions per game second.
* `obs_type`: `state` (default) is the env's state vector (player, health, time, the nearest
  enemies relative to the player) at fixed scales, for an `MlpPolicy`: by far the fastest to
  learn from on a CPU. `rgb` / `grayscale` give `Dict(frame, state)` for a `MultiInputPolicy`,
  the frame resized to the env's `frame_size` divided by `downscale`.
* `frame_stack`: stacks the last observations (`VecFrameStack`, also on `Dict` keys).
* `reward`: a preset of the env's reward weights (`default`, `survival`: no kill or XP bonus) or
  a mapping of weights (`survival`, `health`, `kill`, `xp`, `death`).
* `max_episode_steps`: agent steps; the run continues after a time-limit truncation (BonkLink v1
  cannot restart a run), so `info["survival_time"]` counts the episode's own game seconds.
* `env_kwargs`: any other `MegabonkEnv` argument (`host`, `connect_timeout`, `k_enemies`, ...),
  except `port`, which `base_port` sets.

`state`, `game_seeds`, `shaping` and `sticky_action_prob` are GBA-only and rejected here.

>>> from metabonk_gym.training.config import resolve_config
>>> cfg = resolve_config(MEGABONK, overrides={"base_port": 6000})
>>> env_kwargs(cfg, index=2)["port"], cfg.policy, cfg.obs_type
(6002, 'MlpPolicy', 'state')
>>> scale_state(np.full(11 + 5 * 8, 20.0, np.float32))[:3].tolist()
[0.5, 0.5, 0.5]
"""

from __future__ import annotations

import contextlib
import socket
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from metabonk_gym.training.errors import ConfigError, GameUnreachableError

if TYPE_CHECKING:
    from metabonk_gym.bonklink.sim import SimProcess
    from metabonk_gym.training.config import TrainConfig

MEGABONK = "MetaBonk/Megabonk-v0"

#: Info variables logged as `game/<name>` at episode end (those the game sends).
INFO_VARIABLES: tuple[str, ...] = (
    "survival_time",
    "game_time",
    "health",
    "max_health",
    "kills",
    "xp",
    "level",
)

#: Reward presets: overrides of `metabonk_gym.bonklink.reward.RewardConfig`'s weights.
REWARD_PRESETS: dict[str, dict[str, float]] = {
    "default": {},
    "survival": {"kill": 0.0, "xp": 0.0},
}

#: Scale of each state-vector entry (`metabonk_gym.bonklink.observation.STATE_LAYOUT`), then of
#: each enemy slot (dx, dy, dz, health, present): world units of the stand-in arena (40 from the
#: centre to a wall, enemies spawn 11-15 away), speeds, 5 game minutes, 32 enemies.
HEAD_SCALE: tuple[float, ...] = (40, 40, 40, 10, 10, 10, 1, 300, 1, 1, 32)
ENEMY_SCALE: tuple[float, ...] = (10, 10, 10, 50, 1)
CLIP = 10.0

#: The smallest frame side NatureCNN (SB3's `MultiInputPolicy` image extractor) accepts.
MIN_FRAME_SIDE = 36
DEFAULT_FRAME_SIZE = (90, 160)

SIM_HINT = "metabonk bonklink-sim --lockstep --instances {n} --port {base}"


def is_megabonk(env_id: str) -> bool:
    """Whether `env_id` (with or without a `module:` prefix) is the Megabonk env."""
    return env_id.split(":")[-1].startswith("MetaBonk/Megabonk")


def scale_state(vec: np.ndarray) -> np.ndarray:
    """The env's raw state vector at fixed scales, clipped to +-10 (a float32 copy)."""
    head = len(HEAD_SCALE)
    k = (vec.shape[-1] - head) // len(ENEMY_SCALE)
    scale = np.asarray((*HEAD_SCALE, *(ENEMY_SCALE * k)), np.float32)
    return np.clip(vec / scale, -CLIP, CLIP).astype(np.float32)


def reward_weights(reward: Any) -> dict[str, float]:
    """The env's `reward_weights` for a config's `reward` (a preset name or a mapping)."""
    from metabonk_gym.bonklink.reward import RewardConfig

    if isinstance(reward, str):
        if reward not in REWARD_PRESETS:
            raise ConfigError(
                f"unknown Megabonk reward {reward!r}; presets: {', '.join(REWARD_PRESETS)}, or a "
                "mapping of weights (survival, health, kill, xp, death)"
            )
        return dict(REWARD_PRESETS[reward])
    try:
        RewardConfig.from_mapping(reward)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"Megabonk reward weights {reward!r}: {exc}") from exc
    return {str(k): float(v) for k, v in reward.items()}


def frame_size(cfg: TrainConfig) -> tuple[int, int]:
    """(height, width) of observed frames: the env's `frame_size` divided by `downscale`."""
    size = cfg.env_kwargs.get("frame_size", DEFAULT_FRAME_SIZE)
    return (max(1, int(size[0]) // cfg.downscale), max(1, int(size[1]) // cfg.downscale))


def check_config(cfg: TrainConfig) -> None:
    """Reject GBA-only keys and settings Megabonk cannot honour, naming the fix."""
    gba_only = {
        "state": "BonkLink v1 cannot load a start state",
        "game_seeds": "BonkLink v1 has no seed command (seed the sims: bonklink-sim --seed S)",
        "shaping": "shaping reads GBA RAM variables",
    }
    for key, why in gba_only.items():
        if getattr(cfg, key) is not None:
            raise ConfigError(f"{key} is not supported for {MEGABONK}: {why}; drop it")
    if cfg.sticky_action_prob:
        raise ConfigError(f"sticky_action_prob is a GBA env option; drop it for {MEGABONK}")
    if cfg.obs_type not in ("state", "rgb", "grayscale"):
        raise ConfigError(
            f"obs_type for {MEGABONK} is state, rgb or grayscale, not {cfg.obs_type!r}"
        )
    wanted = "MlpPolicy" if cfg.obs_type == "state" else "MultiInputPolicy"
    if cfg.policy != wanted:
        what = "a state vector" if cfg.obs_type == "state" else "Dict(frame, state)"
        raise ConfigError(
            f"obs_type {cfg.obs_type} gives {what}; set policy: {wanted} (not {cfg.policy})"
        )
    if cfg.obs_type != "state" and min(frame_size(cfg)) < MIN_FRAME_SIDE:
        raise ConfigError(
            f"frames of {frame_size(cfg)} (frame_size / downscale {cfg.downscale}) are too small "
            f"for the MultiInputPolicy's CNN (at least {MIN_FRAME_SIDE} pixels a side); lower "
            "downscale or raise env_kwargs.frame_size"
        )
    if "port" in cfg.env_kwargs:
        raise ConfigError(
            "env_kwargs.port is set per env from base_port (env i uses base_port + i); "
            "set base_port instead"
        )
    if not 1 <= cfg.base_port <= 65536 - cfg.n_envs:
        raise ConfigError(
            f"base_port {cfg.base_port} with {cfg.n_envs} envs leaves the TCP port range"
        )
    reward_weights(cfg.reward)
    if cfg.goal is not None and cfg.goal["variable"] not in INFO_VARIABLES:
        raise ConfigError(
            f"goal variable {cfg.goal['variable']!r} is not a Megabonk info variable; valid: "
            f"{', '.join(INFO_VARIABLES)}"
        )


def env_kwargs(cfg: TrainConfig, index: int = 0) -> dict[str, Any]:
    """`gym.make` keyword arguments of training env `index` (port `base_port + index`)."""
    kwargs: dict[str, Any] = {
        "port": cfg.base_port + index,
        "render_mode": "rgb_array",
        # a state-vector policy needs no frame: do not wait for one (the sims may send none)
        "frame_wait": 0.0 if cfg.obs_type == "state" else 1.0,
    }
    extra = dict(cfg.env_kwargs)
    weights = reward_weights(cfg.reward)
    weights.update(extra.pop("reward_weights", None) or {})
    kwargs["reward_weights"] = weights or None
    if cfg.obs_type != "state":
        kwargs["frame_size"] = frame_size(cfg)
        extra.pop("frame_size", None)
    kwargs.update(extra)
    return kwargs


def unreachable_message(host: str, port: int, index: int, n_envs: int, base_port: int) -> str:
    """What to do when no game answers on `host:port`."""
    where = f"env {index} of {n_envs} uses base_port + {index}" if n_envs > 1 else "base_port"
    return (
        f"no BonkLink game is listening on {host}:{port} ({where}); start the stand-in game "
        f"first: `{SIM_HINT.format(n=n_envs, base=base_port)}` (or Megabonk with the BonkLink "
        f"plugin on port {port}), or point at a running one with --base-port / --set base_port=PORT"
    )


def check_reachable(cfg: TrainConfig, n_envs: int | None = None, timeout: float = 5.0) -> None:
    """Connect once to each of the `n_envs` games (retrying for up to `timeout` s each), so that a
    missing game fails at once with `GameUnreachableError`, not after an env's long retries."""
    from metabonk_gym.bonklink.transport import connect_with_backoff

    count = cfg.n_envs if n_envs is None else n_envs
    host = str(cfg.env_kwargs.get("host", "127.0.0.1"))
    wait = min(timeout, float(cfg.env_kwargs.get("connect_timeout", timeout)))
    for i in range(count):
        port = cfg.base_port + i
        try:
            sock = connect_with_backoff(host, port, wait)
        except (ConnectionError, OSError) as exc:
            raise GameUnreachableError(
                unreachable_message(host, port, i, count, cfg.base_port)
            ) from exc
        with contextlib.suppress(OSError):
            sock.close()


class MegabonkEpisode(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds `info["survival_time"]` (game seconds since this episode's reset) and turns a game
    that cannot be reached at reset into a `GameUnreachableError` that says how to start one."""

    def __init__(self, env: gym.Env, index: int = 0, n_envs: int = 1, base_port: int = 0) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, index=index, n_envs=n_envs, base_port=base_port
        )
        gym.Wrapper.__init__(self, env)
        self.index, self.n_envs, self.base_port = index, n_envs, base_port
        self._start = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        base = self.env.unwrapped
        host, port = getattr(base, "host", "127.0.0.1"), int(getattr(base, "port", 0))
        try:
            obs, info = self.env.reset(seed=seed, options=options)
        except TimeoutError as exc:  # connected, but no run started
            raise GameUnreachableError(
                f"the game on {host}:{port} did not start a run: {exc}; start a run in the game, "
                "or give the env menu_clicks (env_kwargs) for its Play button"
            ) from exc
        except ConnectionError as exc:
            message = unreachable_message(
                host, port, self.index, self.n_envs, self.base_port or port
            )
            raise GameUnreachableError(message) from exc
        self._start = float(info.get("game_time", 0.0))
        info["survival_time"] = 0.0
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "game_time" in info:
            info["survival_time"] = max(0.0, float(info["game_time"]) - self._start)
        return obs, reward, terminated, truncated, info


def release_presses(action: Any) -> Any:
    """`action` with `interact` and `click` released (a Box action of the env's flat layout, or
    its Dict form); sticks, `fire` and `ability` stay as they are.

    >>> release_presses(np.ones(10, np.float32)).tolist()
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0, 1.0, 1.0]
    """
    if isinstance(action, Mapping):
        out = dict(action)
        buttons = np.array(out.get("buttons", (0, 0, 0)), np.int8).reshape(-1)
        buttons[2:3] = 0
        out["buttons"] = buttons
        out["click"] = 0
        return out
    released = np.array(action, np.float32).reshape(-1)
    released[6:8] = -1.0
    return released


class ActionRepeat(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Sends each action for `repeat` game ticks (stopping at the episode's end); the rewards and
    `info["reward_terms"]` add up over the ticks.

    Sticks, `fire` and `ability` are held for every tick; `interact` and `click` are pressed on
    the first tick only. So every agent step that presses interact is a new press (the game acts
    on press edges: a level-up menu takes the press as "pick the first option"), and a policy
    that keeps interact pressed cannot stall in a menu, as one holding the button would.
    """

    def __init__(self, env: gym.Env, repeat: int) -> None:
        if repeat < 1:
            raise ValueError(f"repeat must be >= 1, not {repeat}")
        gym.utils.RecordConstructorArgs.__init__(self, repeat=repeat)
        gym.Wrapper.__init__(self, env)
        self.repeat = int(repeat)

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        total = 0.0
        terms: dict[str, float] = defaultdict(float)
        held = release_presses(action) if self.repeat > 1 else action
        for tick in range(self.repeat):
            obs, reward, terminated, truncated, info = self.env.step(action if tick == 0 else held)
            total += float(reward)
            for name, value in (info.get("reward_terms") or {}).items():
                terms[name] += float(value)
            if terminated or truncated:
                break
        if terms:
            info["reward_terms"] = dict(terms)
        return obs, total, terminated, truncated, info


class MegabonkObservation(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """`obs_type="state"`: the scaled state vector (`scale_state`); `"rgb"` / `"grayscale"`:
    `Dict(frame, state)` (grayscale by ITU-R 601 luma). Menus and level-up options are dropped:
    `is_paused` in the state says a level-up menu is open (submit, interact, picks the first)."""

    def __init__(self, env: gym.Env, obs_type: str = "state") -> None:
        if obs_type not in ("state", "rgb", "grayscale"):
            raise ValueError(f"obs_type must be state, rgb or grayscale, not {obs_type!r}")
        gym.utils.RecordConstructorArgs.__init__(self, obs_type=obs_type)
        gym.ObservationWrapper.__init__(self, env)
        self.obs_type = obs_type
        inner = env.observation_space
        assert isinstance(inner, spaces.Dict)
        dim = inner["state"].shape[0]  # type: ignore[index]
        state = spaces.Box(-CLIP, CLIP, (dim,), np.float32)
        if obs_type == "state":
            self.observation_space = state
        else:
            h, w, _ = inner["frame"].shape  # type: ignore[misc]
            channels = 3 if obs_type == "rgb" else 1
            frame = spaces.Box(0, 255, (h, w, channels), np.uint8)
            self.observation_space = spaces.Dict({"frame": frame, "state": state})

    def observation(self, observation: Mapping[str, Any]) -> Any:
        state = scale_state(np.asarray(observation["state"], np.float32))
        if self.obs_type == "state":
            return state
        frame = np.asarray(observation["frame"])
        if self.obs_type == "grayscale":
            luma = frame[..., 0] * 0.299 + frame[..., 1] * 0.587 + frame[..., 2] * 0.114
            frame = luma.astype(np.uint8)[..., None]
        return {"frame": frame, "state": state}


def make_megabonk_env(
    env_id: str, cfg: TrainConfig, index: int = 0, n_envs: int = 1, **extra: Any
) -> gym.Env:
    """Training env `index` of `n_envs`: the env on port `base_port + index`, then
    `MegabonkEpisode`, `ActionRepeat(frameskip)`, `MegabonkObservation(obs_type)`, the time limit
    and the goal. Nothing connects until the first `reset()`."""
    import metabonk_gym  # noqa: F401  (registers the ids)
    from metabonk_gym.training.envs import GoalWrapper

    check_config(cfg)
    kwargs = {**env_kwargs(cfg, index), **extra}
    try:
        env = gym.make(env_id, **kwargs)
    except TypeError as exc:  # an unknown env_kwargs key
        raise ConfigError(f"{env_id} does not take these env_kwargs: {exc}") from exc
    env = MegabonkEpisode(env, index=index, n_envs=n_envs, base_port=cfg.base_port)
    if cfg.frameskip > 1:
        env = ActionRepeat(env, cfg.frameskip)
    env = MegabonkObservation(env, cfg.obs_type)
    if cfg.max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, cfg.max_episode_steps)
    if cfg.goal is not None:
        env = GoalWrapper(env, cfg.goal)
    return env


# ---------------------------------------------------------------------- lockstep sims


def free_port_block(n: int, host: str = "127.0.0.1", attempts: int = 50) -> int:
    """The first of `n` consecutive ports that are free now (env i uses base + i)."""
    for _ in range(attempts):
        with socket.socket() as probe:
            probe.bind((host, 0))
            base = int(probe.getsockname()[1])
        if base + n > 65536:
            continue
        held: list[socket.socket] = []
        try:
            for i in range(n):
                sock = socket.socket()
                held.append(sock)
                sock.bind((host, base + i))
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
        return base
    raise OSError(f"found no {n} consecutive free ports on {host}")


class SimSwarm:
    """`n` lockstep `bonklink-sim` games in child processes on consecutive free ports (game i:
    seed `seed + i`), for training and evaluating without a game; `start()` returns the base
    port, `stop()` (idempotent) ends them all.

    `sim_kwargs` go to every `BonkLinkSim` (e.g. `jpeg_hz=0`: no frames, for state policies).
    """

    def __init__(self, n: int, seed: int | None = None, **sim_kwargs: Any) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, not {n}")
        self.n = n
        self.seed = seed
        self.sim_kwargs = {"mode": "lockstep", **sim_kwargs}
        self.base_port: int | None = None
        self.procs: list[SimProcess] = []

    def start(self, attempts: int = 5) -> int:
        from metabonk_gym.bonklink.sim import SimProcess

        host = str(self.sim_kwargs.get("host", "127.0.0.1"))
        error: OSError | None = None
        for _ in range(attempts):
            base = free_port_block(self.n, host)
            try:
                for i in range(self.n):
                    seed = None if self.seed is None else self.seed + i
                    proc = SimProcess(port=base + i, seed=seed, **self.sim_kwargs)
                    self.procs.append(proc)
                    proc.start()
            except OSError as exc:  # a port taken in between: try another block
                error = exc
                self.stop()
                continue
            self.base_port = base
            return base
        raise OSError(f"could not start {self.n} bonklink-sim games: {error}")

    def stop(self) -> list[dict[str, Any]]:
        """Stop every game; returns their stats."""
        procs, self.procs = self.procs, []
        return [proc.stop() for proc in procs]

    def __enter__(self) -> SimSwarm:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
