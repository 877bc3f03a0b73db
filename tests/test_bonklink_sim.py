"""bonklink-sim: the arena game's rules, and the server's protocol behaviour over loopback TCP
(pacing, frames, stubs, one client at a time), and the CLI command."""

from __future__ import annotations

import dataclasses
import socket
import struct
import threading
import time

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from metabonk_gym.bonklink.actions import click_to_plugin
from metabonk_gym.bonklink.codec import (
    Action,
    GameState,
    decode_frame,
    encode_action,
    read_frame_header,
)
from metabonk_gym.bonklink.game import (
    GAME_OVER,
    GAMEPLAY,
    LEVEL_UP,
    MAIN_MENU,
    UPGRADES,
    ArenaGame,
    card_rects,
    start_button_rect,
)
from metabonk_gym.bonklink.render import FrameRenderer
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.bonklink.transport import ConnectionClosed, PacketReader, connect_with_backoff

SUBMIT = Action(interact=True)
IDLE = Action()


def click_at(rect_center: tuple[float, float]) -> Action:
    x, y = click_to_plugin(*rect_center, 320, 180)
    return Action(ui_click=True, click_x=x, click_y=y)


def started(seed: int = 0) -> ArenaGame:
    game = ArenaGame(seed=seed)
    assert game.menu == MAIN_MENU and not game.is_playing
    game.tick(SUBMIT)
    assert game.menu == GAMEPLAY and game.is_playing
    return game


# ------------------------------------------------------------------ the game


def test_menu_start_by_click_or_submit() -> None:
    game = ArenaGame(seed=0)
    game.tick(click_at((0.05, 0.05)))  # outside the button
    assert game.menu == MAIN_MENU
    game.tick(click_at(start_button_rect().center))
    assert game.menu == GAMEPLAY


def test_enemies_chase_and_hurt_then_death_returns_to_a_menu() -> None:
    game = started()
    game.config = dataclasses.replace(game.config, auto_cooldown=1e9)  # no weapon
    for _ in range(120):
        game.tick(IDLE)
    assert game.n_enemies > 0
    first = np.hypot(game.ex[0] - game.px, game.ez[0] - game.pz)
    for _ in range(60):
        game.tick(IDLE)
    assert np.hypot(game.ex[0] - game.px, game.ez[0] - game.pz) < first
    for _ in range(60 * 120):
        game.tick(IDLE)
        if game.menu == GAME_OVER:
            break
    assert game.menu == GAME_OVER and not game.is_playing and game.health == 0.0
    state = game.state()
    assert state.health == 0.0 and not state.is_playing and state.menu == GAME_OVER
    game.tick(click_at(start_button_rect().center))
    assert game.menu == GAMEPLAY and game.health == game.max_health and game.n_enemies == 0


def test_automatic_weapon_kills_give_xp_and_a_level_up_menu() -> None:
    game = started(seed=1)
    for _ in range(60 * 60):
        game.tick(IDLE)
        if game.menu == LEVEL_UP:
            break
    assert game.menu == LEVEL_UP and game.is_playing and game.is_paused
    assert game.kills >= 5 and game.xp >= 5 and game.level == 2
    assert len(game.options) == 3 and set(game.options) <= set(UPGRADES)
    state = game.state()
    assert state.options == game.options and state.stats is not None
    assert state.stats.kills == game.kills
    # Paused: time stands still, and clicking outside the cards does nothing.
    clock = game.game_time
    game.tick(click_at((0.5, 0.1)))
    assert game.menu == LEVEL_UP and game.game_time == clock
    chosen = game.options[2]
    before = (game.max_health, game.damage_mult, game.projectile_count)
    game.tick(click_at(card_rects()[2].center))
    assert game.menu == GAMEPLAY and game.options == ()
    assert chosen in UPGRADES
    if chosen == "Max HP +20":
        assert game.max_health == before[0] + 20


def test_moving_and_manual_fire() -> None:
    game = started()
    for _ in range(60):
        game.tick(Action(move_x=1.0))
    assert game.px == pytest.approx(6.0, rel=0.05) and game.vx == pytest.approx(6.0)
    game.tick(Action(aim_x=0.0, aim_y=1.0, fire=True))
    assert game.n_shots >= 1 and game.svz[game.n_shots - 1] > 0


def test_same_seed_same_game() -> None:
    a, b = started(seed=5), started(seed=5)
    rng = np.random.default_rng(0)
    for _ in range(600):
        action = Action(*rng.uniform(-1, 1, 4).tolist(), *(rng.random(3) > 0.5).tolist())
        a.tick(action)
        b.tick(action)
    assert a.state() == b.state()


def test_renderer_draws_320x180_frames() -> None:
    game = started()
    renderer = FrameRenderer()
    for _ in range(300):
        game.tick(IDLE)
    frame = renderer.render(game).copy()  # the renderer reuses its buffer
    assert frame.shape == (180, 320, 3) and frame.dtype == np.uint8
    assert (frame == (80, 200, 255)).all(-1).sum() >= 49  # the player, centred
    menu = renderer.render(ArenaGame(seed=0)).copy()
    assert menu.std() > 0 and not np.array_equal(menu, frame)


# ------------------------------------------------------------------ the server


def client(port: int) -> tuple[socket.socket, PacketReader]:
    sock = connect_with_backoff("127.0.0.1", port, 5.0)
    return sock, PacketReader(sock)


@pytest.mark.net
def test_lockstep_one_packet_per_action_and_frames_every_6th_tick() -> None:
    with BonkLinkSim(port=0, mode="lockstep", seed=0) as sim:
        sock, reader = client(sim.port)
        state, frame = reader.recv(5.0)  # a packet with a frame as soon as we connect
        assert frame is not None and read_frame_header(frame) == ("jpeg", 320, 180)
        assert state.menu == MAIN_MENU and not state.is_playing
        frames = []
        for i in range(24):
            sock.sendall(encode_action(SUBMIT if i == 0 else IDLE))
            state, frame = reader.recv(5.0)
            frames.append(frame is not None)
        assert state.is_playing and state.game_time == pytest.approx(23 / 60, abs=1e-4)
        assert frames == [(i + 1) % 6 == 0 for i in range(24)]  # 60 Hz ticks, 10 Hz frames
        with pytest.raises(TimeoutError):  # nothing is pushed without an action
            reader.recv(0.2)
        sock.close()
    assert sim.stats.packets == 25 and sim.stats.actions == 24


@pytest.mark.net
def test_raw_frames_and_real_values() -> None:
    with BonkLinkSim(port=0, mode="lockstep", frame_format="raw_rgb", seed=2) as sim:
        sock, reader = client(sim.port)
        _, frame = reader.recv(5.0)
        assert frame is not None and frame[:4] == b"MBRF"
        assert struct.unpack_from("<3i", frame, 4) == (320, 180, 3)
        assert len(frame) == 16 + 320 * 180 * 3
        assert decode_frame(frame).shape == (180, 320, 3)
        state = _play(sock, reader, 400)
        assert state.max_health == 100.0 and len(state.enemies) > 0 and state.stats is not None
        sock.close()


def _play(sock: socket.socket, reader: PacketReader, ticks: int) -> GameState:
    state = None
    for i in range(ticks):
        sock.sendall(encode_action(SUBMIT if i == 0 else IDLE))
        state, _ = reader.recv(5.0)
    assert state is not None
    return state


@pytest.mark.net
def test_plugin_stubs_send_the_deployed_constants() -> None:
    with BonkLinkSim(port=0, mode="lockstep", plugin_stubs=True, seed=2) as sim:
        sock, reader = client(sim.port)
        reader.recv(5.0)
        state = _play(sock, reader, 400)
        assert sim.game.n_enemies > 0  # the game itself is real
        assert (state.health, state.max_health) == (100.0, 100.0)
        assert len(state.enemies) == 0 and state.options == () and state.stats is None
        assert state.is_playing and state.menu == GAMEPLAY and state.game_time > 0
        sock.close()


@pytest.mark.net
def test_input_snapshot_trailer_echoes_the_input() -> None:
    with BonkLinkSim(port=0, mode="lockstep", input_snapshot=True) as sim:
        sock, reader = client(sim.port)
        reader.recv(5.0)
        x, y = click_to_plugin(0.25, 0.75, 320, 180)
        sock.sendall(encode_action(Action(0.5, -0.5, 1.0, 0.0, True, ui_click=True, click_x=x,
                                          click_y=y)))  # fmt: skip
        state, _ = reader.recv(5.0)
        snap = state.input_snapshot
        assert snap is not None and (snap.move_x, snap.fire, snap.ui_click) == (0.5, True, True)
        assert snap.click_nx == pytest.approx(0.25, abs=0.01)
        assert snap.click_ny == pytest.approx(0.75, abs=0.01)
        sock.close()


@pytest.mark.net
def test_realtime_pushes_at_update_hz_with_frames_at_jpeg_hz() -> None:
    with BonkLinkSim(port=0, mode="realtime", update_hz=60, jpeg_hz=10) as sim:
        sock, reader = client(sim.port)
        start = time.monotonic()
        got = []
        while time.monotonic() - start < 0.6:
            state, frame = reader.recv(2.0)  # never answered: the game goes on anyway
            got.append(frame is not None)
        sock.close()
    assert 15 <= len(got) <= 45  # about 36: paced, not flooding (a busy machine may lag)
    assert 0 < sum(got) <= len(got) // 6 + 1
    assert sim.stats.actions == 0


@pytest.mark.net
def test_realtime_applies_at_most_one_action_per_tick() -> None:
    with BonkLinkSim(port=0, mode="realtime", update_hz=100, jpeg_hz=0) as sim:
        sock, reader = client(sim.port)
        reader.recv(2.0)
        sock.sendall(encode_action(SUBMIT) + encode_action(Action(move_x=1.0)) * 5)
        positions = []
        for _ in range(40):  # 0.4 s: room for a late client on a busy machine
            state, _ = reader.recv(2.0)
            positions.append(state.position[0])
        sock.close()
    steps = np.diff(positions)  # queued actions play out one per tick, then neutral
    assert (steps > 0).sum() == 5 and np.allclose(steps[-3:], 0)


@pytest.mark.net
def test_a_new_client_replaces_the_old() -> None:
    with BonkLinkSim(port=0, mode="lockstep") as sim:
        old, old_reader = client(sim.port)
        old_reader.recv(5.0)
        new, new_reader = client(sim.port)
        new_reader.recv(5.0)
        with pytest.raises((ConnectionClosed, ConnectionResetError)):
            old_reader.recv(2.0)
        new.sendall(encode_action(IDLE))
        new_reader.recv(5.0)
        old.close()
        new.close()
    assert sim.stats.clients == 2


@pytest.mark.net
@pytest.mark.parametrize("bad", [struct.pack("<i", 0), struct.pack("<i", 1024), b"\xff" * 8])
def test_bad_action_lengths_drop_the_client(bad: bytes) -> None:
    with BonkLinkSim(port=0, mode="lockstep") as sim:
        sock, reader = client(sim.port)
        reader.recv(5.0)
        sock.sendall(bad)
        with pytest.raises((ConnectionClosed, ConnectionResetError)):
            reader.recv(2.0)
        sock.close()
        again, again_reader = client(sim.port)  # and it serves the next one
        again_reader.recv(5.0)
        again.close()


@pytest.mark.net
def test_binds_loopback_by_default() -> None:
    sim = BonkLinkSim(port=0)
    sim.bind()
    assert sim.address[0] == "127.0.0.1"
    sim.stop()


# ------------------------------------------------------------------ the CLI


def _cli_app() -> typer.Typer:
    """The real `metabonk` app (registering the command group again would add unguarded
    duplicates to the shared `metabonk bench` group)."""
    from metabonk_gym.cli.main import app

    return app


def _free_port_pair() -> int:
    for _ in range(50):
        a = socket.create_server(("127.0.0.1", 0))
        port = a.getsockname()[1]
        try:
            b = socket.create_server(("127.0.0.1", port + 1))
        except OSError:
            a.close()
            continue
        a.close()
        b.close()
        return port
    raise RuntimeError("no free port pair")


@pytest.mark.net
@pytest.mark.parametrize("instances", [1, 2])
def test_cli_serves_instances_on_consecutive_ports(instances: int) -> None:
    port = _free_port_pair()
    result: dict[str, object] = {}
    args = ["bonklink-sim", "--port", str(port), "--lockstep", "--instances", str(instances),
            "--frame-format", "raw_rgb", "--plugin-stubs", "--duration", "8"]  # fmt: skip

    def run() -> None:
        result["r"] = CliRunner().invoke(_cli_app(), args)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        for i in range(instances):
            sock = connect_with_backoff("127.0.0.1", port + i, 20.0)
            state, frame = PacketReader(sock).recv(5.0)
            assert frame is not None and frame[:4] == b"MBRF" and state.max_health == 100.0
            sock.close()
    finally:
        thread.join(30)  # never leave the CLI running into the next test (it shares stdout)
    outcome = result["r"]
    assert outcome.exit_code == 0, outcome.output  # type: ignore[attr-defined]
    assert "stand-in" in outcome.output  # type: ignore[attr-defined]


@pytest.mark.net
def test_realtime_sim_caps_the_actions_it_queues() -> None:
    """A client flooding actions faster than UpdateHz cannot grow the server's memory."""
    import socket
    import time

    from metabonk_gym.bonklink.codec import NEUTRAL_ACTION, encode_action
    from metabonk_gym.bonklink.sim import MAX_PENDING_ACTIONS, BonkLinkSim

    with BonkLinkSim(port=0, mode="realtime", update_hz=10, jpeg_hz=0, seed=0) as server:
        sock = socket.create_connection(("127.0.0.1", server.port))
        burst = encode_action(NEUTRAL_ACTION) * (MAX_PENDING_ACTIONS * 4)
        sock.sendall(burst)
        time.sleep(0.5)
        assert len(server._pending) <= MAX_PENDING_ACTIONS
        sock.close()


def test_cli_several_instances_need_a_base_port() -> None:
    args = ["bonklink-sim", "--port", "0", "--instances", "2", "--duration", "1"]
    result = CliRunner().invoke(_cli_app(), args, env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "give a base port" in result.output, result.output
