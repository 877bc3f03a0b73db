"""``MetaBonk/Megabonk-v0``: Megabonk through the BonkLink plugin's TCP protocol (v1).

The game pushes one packet per tick; the env answers **exactly one action per packet it
receives** (the plugin applies at most one per tick, and extra actions would queue up as lag).
So ``step(action)`` sends ``action`` as the answer to the packet behind the current observation,
then waits for the next packet. A packet without a frame keeps the last frame.

Connection trouble never hangs and never raises out of ``step``: the game closing the connection
truncates the episode with ``info["disconnected"] = True``; a malformed packet or no packet for
``packet_timeout`` seconds truncates it with ``info["truncation_reason"]`` (and the error). The
connection is then dropped and ``reset()`` reconnects (with retry and backoff).

v1 has no restart or seed command: ``reset()`` waits until the game is in a run
(``isPlaying``), answering menu packets with the menu helper (a submit press, and optional
clicks), and an episode ended by a time limit simply continues the running game. The env is
therefore nondeterministic, and says so in its spec.

It speaks the suite's env contract: the options ``frameskip`` (game ticks per step; presses of
``interact`` and ``click`` on the first tick only), ``obs_type`` (``"state"``: the scaled state
vector; ``"rgb"``/``"grayscale"``: a Dict of ``pixels`` and ``state``; by default everything a
packet holds, see :mod:`.observation`), ``downscale`` (of ``frame_size``), ``reward`` (reward terms over ``info``, or a preset of
``games/Megabonk/presets.yaml``), ``render_mode`` and gym.make's ``max_episode_steps``; the info
names ``hp``, ``max_hp``, ``won`` (always False: a survivor run is not won), ``lost`` (the run
ended: death, or back to a menu), ``reward_terms``, and the game's own values beside them
(``game_time``, ``survival_time``: game seconds since this episode's reset, ``kills``, ...).

Nothing connects before the first ``reset()``:

>>> env = MegabonkEnv(port=5560, obs_type="state", k_enemies=4, frameskip=4)
>>> env.observation_space.shape, env.connected, sorted(env.reward_fn.terms)
((31,), False, ['death', 'health', 'kill', 'survival', 'xp'])
>>> env.close()
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec

from metabonk_gym.bonklink import DEFAULT_PORT, ENTRY_POINT, ENV_ID
from metabonk_gym.bonklink.actions import (
    ActionType,
    action_space,
    make_box_action,
    merge_box_actions,
    release_presses,
    snapshot_to_action,
    to_wire,
)
from metabonk_gym.bonklink.codec import (
    NEUTRAL_ACTION,
    Action,
    BonkLinkProtocolError,
    GameState,
    decode_frame_and_size,
    encode_action,
)
from metabonk_gym.bonklink.observation import ObservationBuilder
from metabonk_gym.bonklink.reward import REWARD_VARIABLES, is_dead, reward_variables
from metabonk_gym.bonklink.transport import PacketReader, connect_with_backoff
from metabonk_gym.contract import check_downscale, check_frameskip, check_obs_type
from metabonk_gym.gamedata import GameData, bundled_game_folder
from metabonk_gym.rewards import RewardFunction, build_reward

__all__ = ["ENTRY_POINT", "ENV_ID", "INFO_VARIABLES", "MegabonkEnv"]

#: The scalar game variables of `info`, as training logs them at episode end.
INFO_VARIABLES: tuple[str, ...] = (
    "survival_time",
    "game_time",
    "hp",
    "max_hp",
    "kills",
    "xp",
    "level",
)
#: Packets `reset` reads at most to start on one that carries a frame (the plugin sends a
#: frame every UpdateHz / JpegHz ticks: 4 at its defaults).
MAX_ALIGN_PACKETS = 16


class MegabonkEnv(gym.Env[Any, Any]):
    """A gymnasium env speaking BonkLink v1 to Megabonk (or to ``bonklink-sim``).

    Args:
        host, port: where the plugin listens (MetaBonk's launchers use 5560; the plugin's own
            default is 5555).
        frameskip: game ticks per step: the action is answered to that many packets (rewards
            and ``reward_terms`` add up); ``interact`` and ``click`` are pressed on the first
            tick only, so every step that presses is a new press.
        obs_type: ``"state"``: the scaled state vector; ``"rgb"`` / ``"grayscale"``:
            ``Dict(pixels, state)``; None (default): everything a packet holds, ``Dict(pixels,
            state, menu, options)`` with the raw state (see :mod:`.observation`).
        downscale: the observed frame is ``frame_size`` divided by this.
        reward: ``"default"``, a preset name of ``games/Megabonk/presets.yaml``
            (``"survival"``: no kill or XP bonus), reward terms over ``info``
            (:mod:`metabonk_gym.rewards`), or a .yaml/.json/.toml file of them.
        render_mode: None or ``"rgb_array"``; ``render()`` returns the game's last frame at its
            own size either way.
        connect_timeout: seconds to keep retrying a connection (with backoff) before failing.
        packet_timeout: seconds without a packet before an episode is truncated ("timeout").
        reset_timeout: seconds ``reset()`` may take to reach gameplay before raising.
        frame_size: (height, width) of the frame before ``downscale``; the game's frame is
            resized to it.
        k_enemies: enemy slots in the state vector (nearest first, relative to the player).
        max_options: level-up option slots of the full observation and of the think adapter
            (``info["options"]`` holds the game's own strings).
        action_type: ``"box"`` (flat, SB3-friendly; see :mod:`.actions`) or ``"dict"``.
        menu_submit: while waiting for gameplay, press submit (interact) every other tick.
        menu_clicks: normalised (x, y) points (top-left origin) to click, in turn, while
            waiting for gameplay, e.g. the game's Play button.
        capture_size: the game's capture (width, height), used for clicks before the first frame
            arrives (afterwards the frames' own size is used).
        frame_wait: on a fresh connection, ``reset()`` waits up to this long for a first
            frame (default 0 for ``obs_type="state"``, which needs none, else 1 s).
        send_actions: False: the env only watches (a person plays at the game's own keyboard and
            mouse): ``step`` reads ``frameskip`` packets and sends nothing, ``reset`` waits for
            gameplay without the menu helper, and ``info["human_action"]`` (from the plugin's
            input snapshot) is what was played during the step (sticks and the click point
            averaged over its ticks, buttons pressed if pressed on any tick).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    _spec: EnvSpec | None = None

    @property  # type: ignore[override]
    def spec(self) -> EnvSpec | None:
        """The env's spec, always marked nondeterministic: a live game cannot be replayed from a
        seed (v1 has no seed or restart command), whatever the registration says."""
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        if value is not None and not value.nondeterministic:
            value = dataclasses.replace(value, nondeterministic=True)
        self._spec = value

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        frameskip: int = 1,
        obs_type: str | None = None,
        downscale: int = 1,
        reward: Any = "default",
        render_mode: str | None = None,
        connect_timeout: float = 30.0,
        packet_timeout: float = 5.0,
        reset_timeout: float = 60.0,
        frame_size: Sequence[int] = (90, 160),
        k_enemies: int = 8,
        max_options: int = 4,
        action_type: ActionType = "box",
        menu_submit: bool = True,
        menu_clicks: Sequence[Sequence[float]] = (),
        capture_size: Sequence[int] = (320, 180),
        frame_wait: float | None = None,
        send_actions: bool = True,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'rgb_array', not {render_mode!r}")
        self.frameskip = check_frameskip(frameskip)
        self.obs_type = None if obs_type is None else check_obs_type(obs_type)
        self.downscale = check_downscale(downscale, allowed=None)
        self.host, self.port = host, int(port)
        self.connect_timeout = float(connect_timeout)
        self.packet_timeout = float(packet_timeout)
        self.reset_timeout = float(reset_timeout)
        if frame_wait is None:
            frame_wait = 0.0 if obs_type == "state" else 1.0
        self.frame_wait = float(frame_wait)
        self.action_type: ActionType = action_type
        self.send_actions = bool(send_actions)
        self.max_options = int(max_options)
        self.render_mode = render_mode
        self.game_data = GameData(bundled_game_folder("Megabonk"))
        self.reward_fn: RewardFunction = build_reward(
            reward, self.game_data.name, {}, set(REWARD_VARIABLES), self.game_data.presets()
        )
        frame_size = check_frame_size(frame_size)
        size = (frame_size[0] // self.downscale, frame_size[1] // self.downscale)
        self._builder = ObservationBuilder(
            (max(1, size[0]), max(1, size[1])), k_enemies, self.max_options, obs_type
        )
        self.observation_space = self._builder.space
        self.action_space = action_space(action_type)
        self._menu_actions = _menu_actions(menu_submit, menu_clicks)
        self._capture_size = (int(capture_size[0]), int(capture_size[1]))

        self._sock: socket.socket | None = None
        self._reader: PacketReader | None = None
        self._state: GameState | None = None  # the last packet received (owed an answer)
        self._frame = np.zeros((*self._builder.frame_size, 3), np.uint8)
        self._frame_bytes: bytes | None = None
        self._frame_age = -1  # packets since the last frame; -1 before the first
        self._align_left = MAX_ALIGN_PACKETS  # packets reset may read to start on a frame
        self._full_frame: np.ndarray | None = None
        self._menu_tick = 0
        self._last_obs: Any = None
        self._observed: GameState | None = None  # the state behind the last observation
        self._last_info: dict[str, Any] = {}
        self._last_reason: str | None = None
        self._episode_start = 0.0

        if self.spec is None:
            # Not made by gym.make (which sets the spec afterwards): describe ourselves.
            kwargs = {
                "host": host,
                "port": int(port),
                "frameskip": frameskip,
                "obs_type": obs_type,
                "downscale": downscale,
                "reward": dict(reward) if isinstance(reward, Mapping) else str(reward),
                "connect_timeout": connect_timeout,
                "packet_timeout": packet_timeout,
                "reset_timeout": reset_timeout,
                "frame_size": tuple(frame_size),
                "k_enemies": k_enemies,
                "max_options": max_options,
                "action_type": action_type,
                "menu_submit": menu_submit,
                "menu_clicks": [tuple(p) for p in menu_clicks],
                "capture_size": tuple(capture_size),
                "frame_wait": frame_wait,
                "send_actions": bool(send_actions),
            }
            self.spec = EnvSpec(ENV_ID, ENTRY_POINT, nondeterministic=True, kwargs=kwargs)

    # ------------------------------------------------------------------ gym API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Wait for gameplay and return its first observation.

        Connects (or reconnects) first when needed; ``options={"reconnect": True}`` forces a
        fresh connection. Gameplay starts on a packet that carries a frame (within
        `MAX_ALIGN_PACKETS`), so that with a frameskip that is a multiple of the game's frame
        period every step observes the frame of its own last tick (``info["frame_age"]`` 0).
        Raises :class:`ConnectionError` when the game cannot be reached within
        ``connect_timeout`` and :class:`TimeoutError` when gameplay does not start within
        ``reset_timeout``.
        """
        super().reset(seed=seed)
        if options and options.get("reconnect"):
            self._disconnect()
        deadline = time.monotonic() + self.reset_timeout
        fresh_since: float | None = None
        last_error: Exception | None = None
        failures = 0
        self._menu_tick = 0
        self._align_left = MAX_ALIGN_PACKETS
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                menu = self._state.menu if self._state else None
                raise TimeoutError(
                    f"Megabonk did not reach gameplay within {self.reset_timeout:g} s "
                    f"(last menu {menu!r}, last error {last_error!r})"
                )
            if self._sock is None:  # a ConnectionError here means the game is not reachable
                self._connect(min(self.connect_timeout, remaining))
                fresh_since = time.monotonic()
            wait = min(self.packet_timeout, remaining)
            try:
                if self._state is None:
                    self._receive(wait)
                elif self._ready(self._state, fresh_since):
                    break
                else:
                    if self.send_actions:
                        self._send(self._menu_action(self._state))
                    self._receive(wait)
            except (OSError, BonkLinkProtocolError) as exc:  # EOF, reset, timeout, garbage
                last_error = exc
                self._disconnect()
                failures += 1
                time.sleep(min(1.0, 0.02 * 2**failures, max(0.0, deadline - time.monotonic())))
        self._last_reason = None
        assert self._state is not None
        self._episode_start = float(self._state.game_time)
        info = self._info(self._state, lost=False)
        self.reward_fn.reset(reward_variables(info))
        info["reward_terms"] = {}
        info["disconnected"] = False
        self._observed = self._state
        obs = self._builder.build(self._state, self._frame)
        self._last_obs, self._last_info = obs, info
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Send ``action`` for ``frameskip`` packets (presses on the first), then observe."""
        total = 0.0
        terms: dict[str, float] = defaultdict(float)
        held = release_presses(action) if self.frameskip > 1 else action
        terminated = truncated = False
        info: dict[str, Any] = {}
        played: list[Any] = []
        for tick in range(self.frameskip):
            reward, terminated, truncated, info = self._tick(action if tick == 0 else held)
            if "human_action" in info:
                played.append(info["human_action"])
            total += float(reward)
            for name, value in info["reward_terms"].items():
                terms[name] += float(value)
            if terminated or truncated:
                break
        info["reward_terms"] = dict(terms)
        if len(played) > 1 and self.action_type == "box":
            # the step's input reads like an agent's step; the ticks stay for who needs them
            info["human_ticks"] = np.asarray(played, np.float32)
            info["human_action"] = merge_box_actions(played)
        observed = self._observed if self._observed is not None else GameState()
        obs = self._builder.build(observed, self._frame)
        self._last_obs, self._last_info = obs, info
        return obs, total, terminated, truncated, info

    def _tick(self, action: Any) -> tuple[float, bool, bool, dict[str, Any]]:
        """Answer one packet with ``action`` and read the next: (reward, terminated, truncated,
        info); a failed connection truncates."""
        prev = self._state
        if self._sock is None or prev is None:
            return self._truncated(self._last_reason or "disconnected", None)
        wire = to_wire(action, self.action_type, self._capture_size)
        try:
            if self.send_actions:
                self._send(wire)
            state = self._receive(self.packet_timeout)
        except TimeoutError:
            return self._truncated("timeout", f"no packet for {self.packet_timeout:g} s")
        except BonkLinkProtocolError as exc:
            return self._truncated("protocol_error", str(exc))
        except OSError as exc:  # closed, reset, broken pipe
            return self._truncated("disconnected", str(exc) or type(exc).__name__)
        terminated = bool(is_dead(state) or (prev.is_playing and not state.is_playing))
        info = self._info(state, lost=terminated)
        reward, info["reward_terms"] = self.reward_fn.step(reward_variables(info))
        info["disconnected"] = False
        self._observed = state
        return reward, terminated, False, info

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """The last frame at the game's own resolution (as every env of the suite, also without
        a ``render_mode``: training records videos from it)."""
        if self._full_frame is None:
            if self._frame_bytes is None:
                width, height = self._capture_size
                return np.zeros((height, width, 3), np.uint8)
            self._full_frame = decode_frame_and_size(self._frame_bytes)[0]
        return self._full_frame.copy()

    def close(self) -> None:
        """Drop the connection (the plugin then waits for the next client)."""
        self._disconnect()
        super().close()

    # ------------------------------------------------------------------ helpers for users

    def click(self, nx: float, ny: float) -> tuple[dict[str, Any], float, bool, bool, dict]:
        """Step with a UI click at normalised (nx, ny), top-left origin, and nothing else."""
        if self.action_type == "box":
            return self.step(make_box_action(click=(nx, ny)))
        return self.step(
            {
                "move": np.zeros(2, np.float32),
                "aim": np.zeros(2, np.float32),
                "buttons": np.zeros(3, np.int8),
                "click": 1,
                "click_pos": np.array([nx, ny], np.float32),
            }
        )

    @property
    def connected(self) -> bool:
        """Whether a connection to the game is open."""
        return self._sock is not None

    @property
    def last_state(self) -> GameState | None:
        """The last decoded state (the packet the next action answers)."""
        return self._state

    @property
    def info_names(self) -> list[str]:
        """The scalar game variables `info` reports (`kills`, `xp`, `level` when the game sends
        them), as logged at episode end."""
        return list(INFO_VARIABLES)

    @property
    def variable_names(self) -> list[str]:
        """The game variables goals and rewards may name (all of them are in `info`)."""
        return list(REWARD_VARIABLES)

    @property
    def last_observation(self) -> Any:
        """The observation the last ``reset()`` or ``step()`` returned (None before the first)."""
        return self._last_obs

    # ------------------------------------------------------------------ internals

    def _connect(self, timeout: float) -> None:
        try:
            self._sock = connect_with_backoff(self.host, self.port, max(0.0, timeout))
        except ConnectionError as exc:
            raise ConnectionError(
                f"{exc}; start Megabonk with the BonkLink plugin on port {self.port}, or the "
                f"stand-in game: `metabonk bonklink-sim --port {self.port}`"
            ) from exc
        self._reader = PacketReader(self._sock)
        self._state = None

    def _disconnect(self) -> None:
        sock, self._sock, self._reader = self._sock, None, None
        self._state = None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def _send(self, action: Action) -> None:
        assert self._sock is not None
        self._sock.sendall(encode_action(action))
        self._state = None  # answered

    def _receive(self, timeout: float) -> GameState:
        assert self._reader is not None
        if timeout <= 0:
            raise TimeoutError("no time left to wait for a packet")
        state, frame = self._reader.recv(timeout)
        if frame is not None:
            self._frame, width, height = decode_frame_and_size(frame, self._builder.frame_size)
            self._capture_size = (width, height)
            self._frame_bytes = frame
            self._full_frame = None
            self._frame_age = 0
        elif self._frame_age >= 0:
            self._frame_age += 1
        self._state = state
        return state

    def _ready(self, state: GameState, fresh_since: float | None) -> bool:
        if not state.is_playing or is_dead(state):
            return False
        waiting_for_frame = (
            fresh_since is not None
            and self._frame_age < 0
            and time.monotonic() - fresh_since < self.frame_wait
        )
        if waiting_for_frame:
            return False
        # Start on a packet that carries a frame: the game sends one every few ticks, and a
        # step of `frameskip` packets that starts off that beat observes a frame up to
        # frameskip-1 ticks older than its state and its input (in recordings after a game
        # over, 3 of 4 ticks old: the frames lagged the actions they were labelled with)
        if self._frame_age > 0 and self._align_left > 0:
            self._align_left -= 1
            return False
        return True

    def _menu_action(self, state: GameState) -> Action:
        """Neutral on even ticks (so that presses have edges), else the next helper action."""
        self._menu_tick += 1
        if state.is_playing or not self._menu_actions or self._menu_tick % 2 == 0:
            return NEUTRAL_ACTION
        helper = self._menu_actions[(self._menu_tick // 2) % len(self._menu_actions)]
        if isinstance(helper, Action):
            return helper
        return to_wire(make_box_action(click=helper), "box", self._capture_size)

    def _truncated(
        self, reason: str, error: str | None
    ) -> tuple[float, bool, bool, dict[str, Any]]:
        """Drop the connection; the step is truncated (its observation stays the last one)."""
        self._disconnect()
        self._last_reason = reason
        info: dict[str, Any] = {
            "hp": self._last_info.get("hp"),
            "max_hp": self._last_info.get("max_hp"),
            "won": False,
            "lost": False,
            "reward_terms": {},
            "disconnected": reason == "disconnected",
            "truncation_reason": reason,
        }
        if error:
            info["error"] = error
        return 0.0, False, True, info

    def _info(self, state: GameState, lost: bool) -> dict[str, Any]:
        game_time = float(state.game_time)
        info: dict[str, Any] = {
            "hp": float(state.health),
            "max_hp": float(state.max_health),
            "won": False,
            "lost": bool(lost),
            "game_time": game_time,
            "survival_time": max(0.0, game_time - self._episode_start),
            "is_playing": bool(state.is_playing),
            "is_paused": bool(state.is_paused),
            "position": np.array(state.position, np.float32),
            "velocity": np.array(state.velocity, np.float32),
            "enemies": state.enemies.copy(),
            "menu": state.menu,
            "options": list(state.options),
            "frame_age": self._frame_age,
        }
        if state.stats is not None:
            info["kills"] = int(state.stats.kills)
            info["xp"] = float(state.stats.xp)
            info["level"] = int(state.stats.level)
        if state.input_snapshot is not None:
            info["human_action"] = snapshot_to_action(state.input_snapshot, self.action_type)
        return info


def check_frame_size(frame_size: Any) -> tuple[int, int]:
    """`frame_size` as (height, width) if it is two positive ints, else a ValueError saying so.

    >>> check_frame_size((90, 160))
    (90, 160)
    """
    try:
        height, width = frame_size
    except (TypeError, ValueError):
        height = width = None
    sizes = (height, width)
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in sizes):
        raise ValueError(
            f"frame_size must be (height, width), two ints >= 1 such as (90, 160), not {frame_size!r}"
        )
    return int(height), int(width)  # type: ignore[arg-type]


def _menu_actions(submit: bool, clicks: Sequence[Sequence[float]]) -> list[Any]:
    actions: list[Any] = [Action(interact=True)] if submit else []
    for point in clicks:
        x, y = float(point[0]), float(point[1])
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
            raise ValueError(f"menu_clicks are normalised 0..1 points, got {point!r}")
        actions.append((x, y))
    return actions
