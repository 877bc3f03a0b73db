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
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec

from metabonk_gym.bonklink import ENTRY_POINT, ENV_ID
from metabonk_gym.bonklink.actions import (
    ActionType,
    action_space,
    make_box_action,
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
from metabonk_gym.bonklink.reward import RewardConfig, is_dead, reward_terms
from metabonk_gym.bonklink.transport import PacketReader, connect_with_backoff

__all__ = ["ENTRY_POINT", "ENV_ID", "MegabonkEnv"]


class MegabonkEnv(gym.Env[dict[str, Any], Any]):
    """A gymnasium env speaking BonkLink v1 to Megabonk (or to ``bonklink-sim``).

    Args:
        host, port: where the plugin listens (MetaBonk's launchers use 5560; the plugin's own
            default is 5555).
        connect_timeout: seconds to keep retrying a connection (with backoff) before failing.
        packet_timeout: seconds without a packet before an episode is truncated ("timeout").
        reset_timeout: seconds ``reset()`` may take to reach gameplay before raising.
        frame_size: (height, width) of the observed frame; the game's frame is resized to it.
        k_enemies: enemy slots in the state vector (nearest first, relative to the player).
        max_options: level-up option slots in the observation.
        action_type: ``"box"`` (flat, SB3-friendly; see :mod:`.actions`) or ``"dict"``.
        reward_weights: overrides of :class:`~metabonk_gym.bonklink.reward.RewardConfig`.
        menu_submit: while waiting for gameplay, press submit (interact) every other tick.
        menu_clicks: normalised (x, y) points (top-left origin) to click, in turn, while
            waiting for gameplay, e.g. the game's Play button.
        capture_size: the game's capture (width, height), used for clicks before the first frame
            arrives (afterwards the frames' own size is used).
        frame_wait: on a fresh connection, ``reset()`` waits up to this long for a first frame.
        render_mode: ``"rgb_array"`` returns the game's last frame at its own size.
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
        port: int = 5560,
        *,
        connect_timeout: float = 30.0,
        packet_timeout: float = 5.0,
        reset_timeout: float = 60.0,
        frame_size: Sequence[int] = (90, 160),
        k_enemies: int = 8,
        max_options: int = 4,
        action_type: ActionType = "box",
        reward_weights: Mapping[str, float] | None = None,
        menu_submit: bool = True,
        menu_clicks: Sequence[Sequence[float]] = (),
        capture_size: Sequence[int] = (320, 180),
        frame_wait: float = 1.0,
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'rgb_array', not {render_mode!r}")
        self.host, self.port = host, int(port)
        self.connect_timeout = float(connect_timeout)
        self.packet_timeout = float(packet_timeout)
        self.reset_timeout = float(reset_timeout)
        self.frame_wait = float(frame_wait)
        self.action_type: ActionType = action_type
        self.reward_config = RewardConfig.from_mapping(reward_weights)
        self.render_mode = render_mode
        self._obs = ObservationBuilder(
            (int(frame_size[0]), int(frame_size[1])), k_enemies, max_options
        )
        self.observation_space = self._obs.space
        self.action_space = action_space(action_type)
        self._menu_actions = _menu_actions(menu_submit, menu_clicks)
        self._capture_size = (int(capture_size[0]), int(capture_size[1]))

        self._sock: socket.socket | None = None
        self._reader: PacketReader | None = None
        self._state: GameState | None = None  # the last packet received (owed an answer)
        self._frame = np.zeros((*self._obs.frame_size, 3), np.uint8)
        self._frame_bytes: bytes | None = None
        self._frame_age = -1  # packets since the last frame; -1 before the first
        self._full_frame: np.ndarray | None = None
        self._menu_tick = 0
        self._last_obs: dict[str, Any] | None = None
        self._last_reason: str | None = None

        if self.spec is None:
            # Not made by gym.make (which sets the spec afterwards): describe ourselves.
            kwargs = {
                "host": host,
                "port": int(port),
                "connect_timeout": connect_timeout,
                "packet_timeout": packet_timeout,
                "reset_timeout": reset_timeout,
                "frame_size": tuple(frame_size),
                "k_enemies": k_enemies,
                "max_options": max_options,
                "action_type": action_type,
                "reward_weights": dict(reward_weights) if reward_weights else None,
                "menu_submit": menu_submit,
                "menu_clicks": [tuple(p) for p in menu_clicks],
                "capture_size": tuple(capture_size),
                "frame_wait": frame_wait,
            }
            self.spec = EnvSpec(ENV_ID, ENTRY_POINT, nondeterministic=True, kwargs=kwargs)

    # ------------------------------------------------------------------ gym API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Wait for gameplay and return its first observation.

        Connects (or reconnects) first when needed; ``options={"reconnect": True}`` forces a
        fresh connection. Raises :class:`ConnectionError` when the game cannot be reached
        within ``connect_timeout`` and :class:`TimeoutError` when gameplay does not start within
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
                    self._send(self._menu_action(self._state))
                    self._receive(wait)
            except (OSError, BonkLinkProtocolError) as exc:  # EOF, reset, timeout, garbage
                last_error = exc
                self._disconnect()
                failures += 1
                time.sleep(min(1.0, 0.02 * 2**failures, max(0.0, deadline - time.monotonic())))
        self._last_reason = None
        assert self._state is not None
        obs = self._obs.build(self._state, self._frame)
        self._last_obs = obs
        info = self._info(self._state)
        info["disconnected"] = False
        return obs, info

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Send ``action`` for the current packet, then wait for the next one."""
        prev = self._state
        if self._sock is None or prev is None:
            return self._truncated(self._last_reason or "disconnected", None)
        wire = to_wire(action, self.action_type, self._capture_size)
        try:
            self._send(wire)
            state = self._receive(self.packet_timeout)
        except TimeoutError:
            return self._truncated("timeout", f"no packet for {self.packet_timeout:g} s")
        except BonkLinkProtocolError as exc:
            return self._truncated("protocol_error", str(exc))
        except OSError as exc:  # closed, reset, broken pipe
            return self._truncated("disconnected", str(exc) or type(exc).__name__)
        terminated = bool(is_dead(state) or (prev.is_playing and not state.is_playing))
        terms = reward_terms(prev, state, terminated, self.reward_config)
        obs = self._obs.build(state, self._frame)
        self._last_obs = obs
        info = self._info(state)
        info["disconnected"] = False
        info["reward_terms"] = terms
        return obs, float(sum(terms.values())), terminated, False, info

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """The last frame at the game's own resolution (``rgb_array`` mode)."""
        if self.render_mode != "rgb_array":
            return None
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

    # ------------------------------------------------------------------ internals

    def _connect(self, timeout: float) -> None:
        self._sock = connect_with_backoff(self.host, self.port, max(0.0, timeout))
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
            self._frame, width, height = decode_frame_and_size(frame, self._obs.frame_size)
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
        return not waiting_for_frame

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
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self._disconnect()
        self._last_reason = reason
        last = self._last_obs
        if last is None:
            obs = self._obs.build(GameState(), self._frame)
        else:
            obs = {
                "frame": last["frame"].copy(),
                "state": last["state"].copy(),
                "menu": np.int64(last["menu"]),
                "options": last["options"].copy(),
            }
        info: dict[str, Any] = {
            "disconnected": reason == "disconnected",
            "truncation_reason": reason,
        }
        if error:
            info["error"] = error
        return obs, 0.0, False, True, info

    def _info(self, state: GameState) -> dict[str, Any]:
        info: dict[str, Any] = {
            "health": float(state.health),
            "max_health": float(state.max_health),
            "game_time": float(state.game_time),
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


def _menu_actions(submit: bool, clicks: Sequence[Sequence[float]]) -> list[Any]:
    actions: list[Any] = [Action(interact=True)] if submit else []
    for point in clicks:
        x, y = float(point[0]), float(point[1])
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
            raise ValueError(f"menu_clicks are normalised 0..1 points, got {point!r}")
        actions.append((x, y))
    return actions
