"""MegabonkEnv over real TCP on loopback.

The first half talks to a raw-socket game written here with ``struct`` alone (not the project's
codec), so the bytes the env puts on the wire are checked against the spec's layout. The second
half runs the env against ``bonklink-sim``: gymnasium's and SB3's env checkers, a short PPO run,
and the vector helper.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import gymnasium as gym
import numpy as np
import pytest
from strict_checker import check_env_strict

from metabonk_gym import make_vec
from metabonk_gym.bonklink.actions import BOX_LAYOUT, make_box_action
from metabonk_gym.bonklink.env import MegabonkEnv
from metabonk_gym.bonklink.observation import ENEMY_LAYOUT, STATE_LAYOUT, scale_state
from metabonk_gym.bonklink.sim import BonkLinkSim

pytestmark = pytest.mark.net

# ------------------------------------------------------------------ the raw game peer


def dotnet_string(text: str) -> bytes:
    data = text.encode("utf-8")
    n, out = len(data), bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n >> 7 else 0))
        n >>= 7
        if not n:
            return bytes(out) + data


def state_bytes(
    pos=(0.0, 0.0, 0.0),
    vel=(0.0, 0.0, 0.0),
    health=100.0,
    max_health=100.0,
    game_time=0.0,
    playing=True,
    paused=False,
    enemies=(),
    menu="Gameplay",
    options=(),
    trailer=b"",
) -> bytes:
    out = struct.pack("<3f3f3f??i", *pos, *vel, health, max_health, game_time, playing, paused,
                      len(enemies))  # fmt: skip
    out += b"".join(struct.pack("<4f", *e) for e in enemies)
    out += dotnet_string(menu) + struct.pack("<i", len(options))
    out += b"".join(dotnet_string(o) for o in options)
    return out + trailer


def packet(state: bytes, frame: bytes = b"") -> bytes:
    return struct.pack("<i", len(state)) + state + struct.pack("<i", len(frame)) + frame


def raw_frame(top_down: np.ndarray) -> bytes:
    h, w, _ = top_down.shape
    return b"MBRF" + struct.pack("<3i", w, h, 3) + top_down[::-1].tobytes()


class Peer:
    """One accepted connection of the raw game."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        conn.settimeout(5.0)

    def send(self, data: bytes) -> None:
        self.conn.sendall(data)

    def recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.conn.recv(n - len(out))
            if not chunk:
                raise EOFError("client closed")
            out += chunk
        return out

    def action(self) -> bytes:
        """One whole action message, length prefix included, as raw bytes."""
        head = self.recv_exact(4)
        (size,) = struct.unpack("<i", head)
        assert size in (20, 28), size
        return head + self.recv_exact(size)

    def nothing_pending(self, wait: float = 0.05) -> bool:
        time.sleep(wait)
        self.conn.setblocking(False)
        try:
            self.conn.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True
        finally:
            self.conn.settimeout(5.0)
        return False

    def wait_closed(self) -> bool:
        try:
            return self.conn.recv(1) == b""
        except OSError:
            return True


class RawGame:
    """A loopback TCP game that runs ``script(peer)`` for each connection, in turn."""

    def __init__(self, *scripts: Callable[[Peer], None], port: int = 0) -> None:
        self.server = socket.create_server(("127.0.0.1", port))
        self.port = self.server.getsockname()[1]
        self.scripts = list(scripts)
        self.errors: list[BaseException] = []
        self.connections = 0
        self.actions: list[bytes] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.server.settimeout(10.0)
        for script in self.scripts:
            try:
                conn, _ = self.server.accept()
            except OSError as exc:
                self.errors.append(exc)
                return
            self.connections += 1
            peer = Peer(conn)
            try:
                script(peer)
            except BaseException as exc:  # reported by close()
                self.errors.append(exc)
            finally:
                conn.close()

    def close(self) -> None:
        self._thread.join(timeout=10)
        self.server.close()
        assert not self.errors, self.errors


@pytest.fixture
def raw_game() -> Iterator[Callable[..., RawGame]]:
    games: list[RawGame] = []

    def factory(*scripts: Callable[[Peer], None]) -> RawGame:
        games.append(RawGame(*scripts))
        return games[-1]

    yield factory
    for game in games:
        game.close()


def env_for(game: RawGame, **kwargs) -> MegabonkEnv:
    kwargs.setdefault("connect_timeout", 5.0)
    kwargs.setdefault("packet_timeout", 5.0)
    kwargs.setdefault("reset_timeout", 10.0)
    kwargs.setdefault("frame_wait", 0.0)
    return MegabonkEnv(port=game.port, **kwargs)


def test_spaces() -> None:
    env = MegabonkEnv(frame_size=(36, 64), k_enemies=3, max_options=2)
    assert env.action_space == gym.spaces.Box(-1, 1, (len(BOX_LAYOUT),), np.float32)
    space = env.observation_space  # by default: everything a packet holds
    assert sorted(space) == ["menu", "options", "pixels", "state"]
    assert space["pixels"].shape == (36, 64, 3) and space["pixels"].dtype == np.uint8
    assert space["state"].shape == (len(STATE_LAYOUT) + 3 * len(ENEMY_LAYOUT),)
    assert space["options"].shape == (2,)
    assert not env.connected  # nothing connects before reset
    env.close()
    rgb = MegabonkEnv(frame_size=(36, 64), obs_type="rgb").observation_space
    assert sorted(rgb) == ["pixels", "state"] and rgb["state"].high.max() == 10.0  # scaled
    gray = MegabonkEnv(frame_size=(36, 64), obs_type="grayscale", downscale=2).observation_space
    assert gray["pixels"].shape == (18, 32, 1)
    state = MegabonkEnv(k_enemies=3, obs_type="state").observation_space
    assert state == gym.spaces.Box(
        -10.0, 10.0, (len(STATE_LAYOUT) + 3 * len(ENEMY_LAYOUT),), np.float32
    )


# ------------------------------------------------------------------ decoding into obs and info

FRAME = np.zeros((18, 32, 3), np.uint8)
FRAME[:9] = (200, 10, 10)  # top half red, bottom half blue: a missed flip shows
FRAME[9:] = (10, 10, 200)


def test_reset_decodes_state_frame_and_info(raw_game) -> None:
    enemies = [(10.0, 0.0, 0.0, 5.0), (1.0, 0.0, 2.0, 9.0), (-1.0, 0.0, -1.0, 3.0)]

    def script(peer: Peer) -> None:
        state = state_bytes(pos=(1.0, 0.0, 1.0), vel=(2.0, 0.0, -1.0), health=60.0,
                            max_health=120.0, game_time=3.5, enemies=enemies,
                            options=("Damage +25%", "Heal 40%"))  # fmt: skip
        peer.send(packet(state, raw_frame(FRAME)))
        peer.wait_closed()

    game = raw_game(script)
    env = env_for(game, frame_size=(18, 32), k_enemies=2, max_options=3)
    obs, info = env.reset(seed=1)
    assert obs in env.observation_space
    np.testing.assert_array_equal(obs["pixels"], FRAME)
    vec = obs["state"]
    np.testing.assert_allclose(vec[:11], [1, 0, 1, 2, 0, -1, 0.5, 3.5, 1, 0, 3])
    slots = vec[11:].reshape(2, 5)  # nearest first, relative to the player
    np.testing.assert_allclose(slots[0], [0, 0, 1, 9, 1])
    np.testing.assert_allclose(slots[1], [-2, 0, -2, 3, 1])
    assert obs["menu"] == 0 and obs["options"][2] == 0 and (obs["options"][:2] > 0).all()
    assert env.last_observation is obs
    assert info["hp"] == 60.0 and info["max_hp"] == 120.0 and info["game_time"] == 3.5
    assert info["won"] is False and info["lost"] is False and info["reward_terms"] == {}
    assert info["is_playing"] and not info["is_paused"] and info["menu"] == "Gameplay"
    assert info["options"] == ["Damage +25%", "Heal 40%"]
    np.testing.assert_array_equal(info["position"], [1, 0, 1])
    assert info["enemies"].shape == (3, 4) and info["frame_age"] == 0
    assert "kills" not in info and info["disconnected"] is False
    np.testing.assert_array_equal(env.render(), FRAME)  # also without a render_mode
    env.close()


def test_contract_observations_are_scaled(raw_game) -> None:
    """obs_type state / rgb / grayscale: the state vector at fixed scales (what policies learn
    from), beside the frame (as luma for grayscale)."""
    state = state_bytes(pos=(4.0, 0.0, -8.0), game_time=30.0)

    def script(peer: Peer) -> None:
        peer.send(packet(state, raw_frame(FRAME)))
        peer.wait_closed()

    full = env_for(raw_game(script), frame_size=(18, 32))
    raw = full.reset()[0]["state"]
    full.close()
    for obs_type in ("state", "rgb", "grayscale"):
        env = env_for(raw_game(script), frame_size=(18, 32), obs_type=obs_type)
        obs, _ = env.reset()
        vec = obs if obs_type == "state" else obs["state"]
        np.testing.assert_array_equal(vec, scale_state(raw))
        np.testing.assert_allclose(vec[[0, 2, 7]], [0.1, -0.2, 0.1])  # 40 units, 300 s
        if obs_type == "grayscale":
            assert obs["pixels"].shape == (18, 32, 1) and obs["pixels"][0, 0, 0] == 66  # luma
        env.close()


def test_actions_on_the_wire(raw_game) -> None:
    received: list[bytes] = []
    extra: list[bool] = []

    def script(peer: Peer) -> None:
        peer.send(packet(state_bytes(), raw_frame(FRAME)))
        for i in range(3):
            received.append(peer.action())
            extra.append(peer.nothing_pending())
            peer.send(packet(state_bytes(game_time=(i + 1) / 60)))
        peer.wait_closed()

    game = raw_game(script)
    env = env_for(game, frame_size=(18, 32))
    env.reset()
    env.step(make_box_action(move=(0.5, -0.25), aim=(1.0, 0.0), fire=True))
    # A click at normalised (0.25, 0.1), top-left origin, on the 32x18 capture: column 8, row 1
    # from the top, i.e. y = 18 - 1 - 1 = 16 from the bottom.
    env.step(make_box_action(click=(0.25, 0.1), interact=True))
    env.step(np.array([2, -3, np.nan, 0, 0, 0, 0, 0, 0, 0], np.float32))  # clamped, NaN -> 0
    env.close()
    game.close()
    assert received[0] == struct.pack("<i4f4?", 20, 0.5, -0.25, 1.0, 0.0, True, False, False, False)
    assert received[1] == struct.pack("<i4f4?2i", 28, 0, 0, 0, 0, False, False, True, True, 8, 16)
    assert received[2] == struct.pack("<i4f4?", 20, 1.0, -1.0, 0.0, 0.0, False, False, False, False)
    assert extra == [True, True, True]  # exactly one action per packet


def test_dict_actions(raw_game) -> None:
    received: list[bytes] = []

    def script(peer: Peer) -> None:
        peer.send(packet(state_bytes(), raw_frame(FRAME)))
        received.append(peer.action())
        peer.send(packet(state_bytes()))
        peer.wait_closed()

    game = raw_game(script)
    env = env_for(game, frame_size=(18, 32), action_type="dict")
    env.reset()
    action = {
        "move": np.array([0.0, 1.0], np.float32),
        "aim": np.array([-1.0, 0.0], np.float32),
        "buttons": np.array([0, 1, 0], np.int8),
        "click": 1,
        "click_pos": np.array([1.0, 1.0], np.float32),  # bottom-right corner
    }
    assert action in env.action_space
    env.step(action)
    env.close()
    game.close()
    assert received[0] == struct.pack("<i4f4?2i", 28, 0, 1, -1, 0, False, True, False, True, 31, 0)


def test_reset_answers_menus_one_action_per_packet(raw_game) -> None:
    received: list[bytes] = []

    def script(peer: Peer) -> None:
        for _ in range(4):
            peer.send(packet(state_bytes(playing=False, menu="MainMenu"), raw_frame(FRAME)))
            received.append(peer.action())
            assert peer.nothing_pending(0.02)
        peer.send(packet(state_bytes(playing=True)))  # gameplay, but between frames
        received.append(peer.action())
        peer.send(packet(state_bytes(playing=True, game_time=0.1), raw_frame(FRAME)))
        peer.wait_closed()

    game = raw_game(script)
    env = env_for(game, frame_size=(18, 32), menu_clicks=[(0.5, 0.7)])
    obs, info = env.reset()
    # gameplay starts on the packet with the next frame (answered neutral until then)
    assert info["is_playing"] and info["frame_age"] == 0
    assert info["game_time"] == pytest.approx(0.1)
    env.close()
    game.close()
    submit = struct.pack("<i4f4?", 20, 0, 0, 0, 0, False, False, True, False)
    neutral = struct.pack("<i4f4?", 20, 0, 0, 0, 0, False, False, False, False)
    # Row floor(0.7 * 18) = 12 from the top is y = 5 from the bottom; column 16.
    click = struct.pack("<i4f4?2i", 28, 0, 0, 0, 0, False, False, False, True, 16, 5)
    assert received == [submit, neutral, click, neutral, neutral]


def test_keeps_the_last_frame_and_reports_its_age(raw_game) -> None:
    other = np.full_like(FRAME, 77)

    def script(peer: Peer) -> None:
        peer.send(packet(state_bytes(), raw_frame(FRAME)))
        peer.action()
        peer.send(packet(state_bytes(game_time=0.1)))
        peer.action()
        peer.send(packet(state_bytes(game_time=0.2), raw_frame(other)))
        peer.wait_closed()

    game = raw_game(script)
    env = env_for(game, frame_size=(18, 32), render_mode="rgb_array")
    env.reset()
    obs, _, _, _, info = env.step(env.action_space.sample() * 0)
    np.testing.assert_array_equal(obs["pixels"], FRAME)
    assert info["frame_age"] == 1
    obs, _, _, _, info = env.step(env.action_space.sample() * 0)
    np.testing.assert_array_equal(obs["pixels"], other)
    np.testing.assert_array_equal(env.render(), other)
    assert info["frame_age"] == 0
    env.close()


def test_reward_and_death(raw_game) -> None:
    stats_magic = int.from_bytes(b"MBST", "little")

    def script(peer: Peer) -> None:
        stats = struct.pack("<Iiifi", stats_magic, 1, 2, 5.0, 1)
        peer.send(packet(state_bytes(health=100.0, game_time=1.0, trailer=stats)))
        peer.action()
        stats = struct.pack("<Iiifi", stats_magic, 1, 3, 6.0, 1)  # one kill, one XP
        peer.send(packet(state_bytes(health=90.0, game_time=1.5, trailer=stats)))
        peer.action()
        peer.send(packet(state_bytes(health=0.0, game_time=1.6, playing=False, menu="Dead")))
        peer.wait_closed()

    game = raw_game(script)
    clock = {
        "only": "increase",
        "below": 1.0,
        "when": ["is_playing"],
        "unless": ["is_paused", "lost"],
    }
    terms = {
        "survival": {"type": "delta", "variable": "game_time", "weight": 1.0, **clock},
        "health": {"type": "fraction_delta", "variable": "hp", "of": "max_hp", "weight": 10.0,
                   "was": ["is_playing"]},
        "kill": {"type": "delta", "variable": "kills", "weight": 2.0, "only": "increase",
                 "optional": True},
        "xp": {"type": "delta", "variable": "xp", "weight": 0.5, "only": "increase",
               "optional": True},
        "death": {"type": "event", "variable": "lost", "weight": -7.0},
    }  # fmt: skip
    env = env_for(game, reward=terms)
    _, info = env.reset()
    assert (info["kills"], info["xp"], info["level"]) == (2, 5.0, 1)
    _, reward, terminated, truncated, info = env.step(env.action_space.sample() * 0)
    assert not terminated and not truncated
    assert info["reward_terms"] == pytest.approx(
        {"survival": 0.5, "health": -1.0, "kill": 2.0, "xp": 0.5, "death": 0.0}
    )
    assert reward == pytest.approx(2.0)
    _, reward, terminated, truncated, info = env.step(env.action_space.sample() * 0)
    assert terminated and not truncated and info["hp"] == 0.0 and info["lost"] is True
    assert info["reward_terms"]["death"] == -7.0 and info["reward_terms"]["survival"] == 0.0
    env.close()


def test_stubbed_plugin_degrades_gracefully(raw_game) -> None:
    """The deployed plugin: health 100/100, no enemies, no options, no kills: survival only,
    and death seen as the game leaving gameplay."""

    def script(peer: Peer) -> None:
        for i in range(4):
            peer.send(packet(state_bytes(game_time=i / 60, pos=(i, 0, 0))))
            peer.action()
        peer.send(packet(state_bytes(game_time=4 / 60, playing=False, menu="MainMenu")))
        peer.wait_closed()

    game = raw_game(script)
    env = env_for(game)
    env.reset()
    rewards = []
    for _ in range(4):
        _, reward, terminated, _, info = env.step(env.action_space.sample())
        rewards.append(reward)
    assert rewards[:3] == pytest.approx([1 / 60] * 3)
    assert terminated and "kills" not in info and info["enemies"].shape == (0, 4)
    assert np.isfinite(rewards).all()
    env.close()


def test_human_input_snapshot_becomes_an_action(raw_game) -> None:
    hinp = struct.pack("<Ii4f4?2f", 0x504E4948, 1, 0.5, -0.5, 1.0, 0.0, True, False, False, True,
                       0.25, 0.75)  # fmt: skip

    def script(peer: Peer) -> None:
        peer.send(packet(state_bytes(trailer=hinp + b"FUTR" + b"\x00" * 12)))
        peer.wait_closed()

    game = raw_game(script)
    env = env_for(game)
    _, info = env.reset()
    expected = make_box_action((0.5, -0.5), (1.0, 0.0), fire=True, click=(0.25, 0.75))
    np.testing.assert_allclose(info["human_action"], expected)
    env.close()


# ------------------------------------------------------------------ a misbehaving game

BAD_PACKETS = {
    "negative state_len": struct.pack("<i", -1),
    "zero state_len": struct.pack("<i", 0),
    "huge state_len": struct.pack("<i", 262_145) + b"\x00" * 64,
    "negative frame_len": packet(state_bytes())[:-4] + struct.pack("<i", -5),
    "huge frame_len": packet(state_bytes())[:-4] + struct.pack("<i", 4_194_305),
    "truncated state": packet(state_bytes()[:30]),
    "negative enemy count": packet(state_bytes()[:38] + struct.pack("<i", -3) + b"\x00" * 20),
    "huge string": packet(struct.pack("<9f??i", *[0.0] * 9, True, False, 0) + b"\xff" * 5),
    "garbage frame": packet(state_bytes(), b"\xff\xd8garbage"),
    "garbage": bytes(range(7, 200)) * 3,
}


@pytest.mark.parametrize("bad", BAD_PACKETS.values(), ids=BAD_PACKETS.keys())
def test_malformed_packet_truncates_and_reset_reconnects(raw_game, bad: bytes) -> None:
    closed: list[bool] = []

    def first(peer: Peer) -> None:
        peer.send(packet(state_bytes()))
        peer.action()
        peer.send(bad)
        closed.append(peer.wait_closed())  # the env drops the connection to resync

    def second(peer: Peer) -> None:
        peer.send(packet(state_bytes(game_time=9.0)))
        peer.wait_closed()

    game = raw_game(first, second)
    env = env_for(game)
    env.reset()
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert truncated and not terminated and reward == 0.0
    assert info["truncation_reason"] == "protocol_error" and info["error"]
    assert info["disconnected"] is False and obs in env.observation_space
    assert not env.connected
    # Stepping again stays truncated (and never hangs) until reset.
    assert env.step(env.action_space.sample())[3]
    _, info = env.reset()
    assert info["game_time"] == 9.0 and game.connections == 2
    env.close()
    game.close()
    assert closed == [True]


def test_game_closing_mid_packet(raw_game) -> None:
    def first(peer: Peer) -> None:
        peer.send(packet(state_bytes()))
        peer.action()
        peer.send(packet(state_bytes())[:25])  # then the game goes away

    def second(peer: Peer) -> None:
        peer.send(packet(state_bytes(game_time=2.0)))
        peer.wait_closed()

    game = raw_game(first, second)
    env = env_for(game)
    env.reset()
    _, _, terminated, truncated, info = env.step(env.action_space.sample())
    assert truncated and not terminated
    assert info["disconnected"] is True and info["truncation_reason"] == "disconnected"
    _, info = env.reset()
    assert info["game_time"] == 2.0
    env.close()


def test_silent_game_times_out(raw_game) -> None:
    release = threading.Event()

    def script(peer: Peer) -> None:
        peer.send(packet(state_bytes()))
        peer.action()
        release.wait(10)  # silent

    game = raw_game(script)
    env = env_for(game, packet_timeout=0.3)
    env.reset()
    start = time.monotonic()
    _, _, terminated, truncated, info = env.step(env.action_space.sample())
    elapsed = time.monotonic() - start
    release.set()
    assert truncated and not terminated and info["truncation_reason"] == "timeout"
    assert 0.25 <= elapsed < 2.0
    env.close()


def test_reset_against_a_silent_game_raises(raw_game) -> None:
    release = threading.Event()
    game = raw_game(lambda peer: release.wait(10), lambda peer: release.wait(10))
    env = env_for(game, packet_timeout=0.3, reset_timeout=1.0)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        env.reset()
    assert time.monotonic() - start < 3.0
    release.set()
    env.close()


def test_connect_retries_with_backoff() -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    games: list[RawGame] = []

    def late_game() -> None:
        time.sleep(0.6)

        def script(peer: Peer) -> None:
            peer.send(packet(state_bytes(game_time=4.0)))
            peer.wait_closed()

        games.append(RawGame(script, port=port))

    thread = threading.Thread(target=late_game)
    thread.start()
    env = MegabonkEnv(port=port, connect_timeout=10.0, frame_wait=0.0)
    start = time.monotonic()
    _, info = env.reset()
    assert time.monotonic() - start >= 0.5 and info["game_time"] == 4.0
    env.close()
    thread.join()
    games[0].close()


def test_no_game_raises_connection_error() -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    env = MegabonkEnv(port=port, connect_timeout=0.5)
    start = time.monotonic()
    with pytest.raises(ConnectionError, match=f"metabonk bonklink-sim --port {port}"):
        env.reset()
    assert time.monotonic() - start < 3.0
    env.close()


# ------------------------------------------------------------------ against bonklink-sim


@pytest.fixture
def sim() -> Iterator[BonkLinkSim]:
    server = BonkLinkSim(port=0, mode="lockstep", seed=3)
    server.start()
    yield server
    server.stop()


def test_gymnasium_check_env(sim: BonkLinkSim) -> None:
    env = MegabonkEnv(port=sim.port, frame_size=(45, 80), render_mode="rgb_array")
    check_env_strict(env)  # its warnings fail the test
    env.close()


def test_gymnasium_check_env_through_make(sim: BonkLinkSim) -> None:
    from gymnasium.utils.env_checker import check_env

    import metabonk_gym  # noqa: F401  (registers the ids)

    env = gym.make("MetaBonk/Megabonk-v0", port=sim.port, frame_size=(45, 80))
    assert env.spec is not None and env.spec.nondeterministic
    check_env(env.unwrapped)
    env.close()


def test_sb3_check_env_and_ppo_trains(sim: BonkLinkSim) -> None:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_checker import check_env

    env = MegabonkEnv(port=sim.port, frame_size=(36, 64), k_enemies=4)
    check_env(env)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: threads only contend (30 s instead of 2 s)
    try:
        model = PPO("MultiInputPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0,
                    device="cpu", verbose=0)  # fmt: skip
        before = [p.detach().clone() for p in model.policy.parameters()]
        model.learn(total_timesteps=256)
        changed = [not torch.equal(a, b) for a, b in zip(before, model.policy.parameters())]
    finally:
        torch.set_num_threads(threads)
    assert model.num_timesteps >= 256
    assert any(changed), "PPO's updates left every policy parameter as it was"
    env.close()


def test_every_step_observes_its_own_last_frame_after_any_reset() -> None:
    # the game sends a frame every 4th tick; an env whose steps of 4 ticks start off that
    # beat observed a frame 1-3 ticks older than its state and its input, as recordings did
    # after a game over. Put the game off the beat (one tick by another client), then reset.
    with BonkLinkSim(port=0, mode="lockstep", update_hz=60, jpeg_hz=15, seed=4) as server:
        env = MegabonkEnv(port=server.port, frameskip=4, frame_size=(45, 80))
        env.reset()
        nudge = MegabonkEnv(port=server.port, frameskip=1, frame_size=(45, 80))
        nudge.reset()  # the game takes one client at a time: this one replaces env's
        nudge.step(nudge.action_space.sample() * 0)
        nudge.close()
        _, info = env.reset(options={"reconnect": True})
        ages = [info["frame_age"]]
        for _ in range(12):
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            ages.append(info["frame_age"])
            assert not (terminated or truncated)
        env.close()
    assert ages == [0] * 13


def test_env_against_the_realtime_sim() -> None:
    with BonkLinkSim(port=0, mode="realtime", update_hz=120, jpeg_hz=20, seed=1) as server:
        env = MegabonkEnv(port=server.port)
        obs, info = env.reset()
        assert info["frame_age"] >= 0 and obs["pixels"].any()
        for _ in range(30):
            obs, _, terminated, truncated, info = env.step(env.action_space.sample())
            assert not truncated
            if terminated:
                env.reset()
        env.close()
    assert server.stats.actions >= 30
    assert server.stats.actions <= server.stats.packets  # never more than one per packet


def _sims_on_consecutive_ports(n: int) -> list[BonkLinkSim]:
    """``n`` lockstep sims on ports p..p+n-1 (retrying where a neighbour port is taken)."""
    for _ in range(50):
        first = BonkLinkSim(port=0, mode="lockstep", seed=0)
        servers = [first]
        try:
            base = first.start()
            for i in range(1, n):
                servers.append(BonkLinkSim(port=base + i, mode="lockstep", seed=i))
                servers[-1].start()
        except OSError:
            for server in servers:
                server.stop()
            continue
        return servers
    raise RuntimeError("no run of free consecutive ports")


def test_make_vec_uses_consecutive_ports() -> None:
    servers = _sims_on_consecutive_ports(2)
    envs = make_vec(
        "MetaBonk/Megabonk-v0", 2, base_port=servers[0].port, context="spawn", frame_size=(36, 64)
    )
    try:
        obs, infos = envs.reset(seed=0)
        assert obs["pixels"].shape == (2, 36, 64, 3)
        for _ in range(5):
            obs, rewards, terminated, truncated, infos = envs.step(envs.action_space.sample())
        assert not truncated.any()
    finally:
        envs.close()
        for server in servers:
            server.stop()
    assert [server.stats.clients for server in servers] == [1, 1]
