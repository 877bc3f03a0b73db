"""BonkLink v1 codec: byte layouts checked against ``struct``, caps, trailers, frames, and
property-based round trips and fuzzing of every decoder."""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import threading
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from metabonk_gym.bonklink.codec import (
    MAX_ENEMIES,
    MAX_FRAME_LEN,
    MAX_OPTIONS,
    MAX_STATE_LEN,
    Action,
    BonkLinkProtocolError,
    GameState,
    GameStats,
    InputSnapshot,
    check_frame_len,
    check_state_len,
    decode_7bit_int,
    decode_action_payload,
    decode_frame,
    decode_frame_and_size,
    decode_packet,
    decode_state,
    encode_7bit_int,
    encode_action,
    encode_frame_jpeg,
    encode_frame_raw,
    encode_packet,
    encode_state,
    encode_string,
    read_frame_header,
)
from metabonk_gym.bonklink.transport import ConnectionClosed, PacketReader

# ------------------------------------------------------------------ hand-written reference bytes


def ref_string(text: str) -> bytes:
    """.NET BinaryWriter.Write(string), written out by hand."""
    data = text.encode("utf-8")
    n, out = len(data), bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out) + data


def ref_state(
    pos=(1.5, 0.0, -2.25),
    vel=(0.5, 0.0, 0.25),
    health=80.0,
    max_health=120.0,
    game_time=12.5,
    playing=True,
    paused=False,
    enemies=((3.0, 0.0, 4.0, 10.0), (-1.0, 0.0, 0.5, 7.5)),
    menu="Gameplay",
    options=("Damage +25%", "Héal"),
) -> bytes:
    out = struct.pack("<3f3f2ff??i", *pos, *vel, health, max_health, game_time, playing, paused,
                      len(enemies))  # fmt: skip
    for enemy in enemies:
        out += struct.pack("<4f", *enemy)
    out += ref_string(menu) + struct.pack("<i", len(options))
    for option in options:
        out += ref_string(option)
    return out


HINP = struct.pack("<Ii4f4?2f", 0x504E4948, 1, 0.5, -1.0, 0.25, 0.0, True, False, True, True,
                   0.75, 0.125)  # fmt: skip


# ------------------------------------------------------------------ .NET primitives


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (255, "ff01"),
        (300, "ac02"),
        (16383, "ff7f"),
        (16384, "808001"),
        (2**31 - 1, "ffffffff07"),
    ],
)
def test_7bit_int_matches_dotnet(value: int, encoded: str) -> None:
    assert encode_7bit_int(value).hex() == encoded
    assert decode_7bit_int(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


def test_7bit_int_edge_cases() -> None:
    assert decode_7bit_int(bytes.fromhex("8000"), 0) == (0, 2)  # non-canonical: .NET accepts
    for bad in ("80", "ffffffff10", "ffffffff08", "ffffffffff01", ""):
        with pytest.raises(BonkLinkProtocolError):
            decode_7bit_int(bytes.fromhex(bad), 0)
    with pytest.raises(BonkLinkProtocolError):
        encode_7bit_int(-1)


def test_string_length_counts_utf8_bytes() -> None:
    assert encode_string("é") == b"\x02\xc3\xa9"
    assert encode_string("x" * 200) == b"\xc8\x01" + b"x" * 200
    assert encode_string("") == b"\x00"


# ------------------------------------------------------------------ state layout


def test_state_layout_matches_struct() -> None:
    state = GameState(
        position=(1.5, 0.0, -2.25),
        velocity=(0.5, 0.0, 0.25),
        health=80.0,
        max_health=120.0,
        game_time=12.5,
        is_playing=True,
        is_paused=False,
        enemies=np.array([[3, 0, 4, 10], [-1, 0, 0.5, 7.5]], np.float32),
        menu="Gameplay",
        options=("Damage +25%", "Héal"),
    )
    assert encode_state(state) == ref_state()
    decoded = decode_state(ref_state())
    assert decoded == state
    assert decoded.position == (1.5, 0.0, -2.25)
    assert decoded.options == ("Damage +25%", "Héal")
    assert decoded.enemies.dtype == np.float32 and decoded.enemies.shape == (2, 4)
    assert decoded.input_snapshot is None and decoded.stats is None


def test_hinp_trailer() -> None:
    decoded = decode_state(ref_state() + HINP)
    assert decoded.input_snapshot == InputSnapshot(
        0.5, -1.0, 0.25, 0.0, True, False, True, True, 0.75, 0.125
    )
    assert encode_state(decoded) == ref_state() + HINP


def test_stats_trailer_and_order() -> None:
    stats = struct.pack("<Iiifi", int.from_bytes(b"MBST", "little"), 1, 7, 12.0, 3)
    decoded = decode_state(ref_state() + HINP + stats)
    assert decoded.stats == GameStats(7, 12.0, 3)
    assert decoded.input_snapshot is not None


@pytest.mark.parametrize(
    "tail",
    [
        b"ZZZZ" + b"\x01" * 40,  # unknown magic
        struct.pack("<Ii", 0x504E4948, 2) + b"\x00" * 50,  # HINP of an unknown version
        b"\x01",  # too short to be a magic
        b"\x01\x02\x03",
        b"ABCDEFG",  # too short for magic + version
    ],
)
def test_unknown_trailers_are_skipped(tail: bytes) -> None:
    assert decode_state(ref_state() + tail) == decode_state(ref_state())
    assert decode_state(ref_state() + HINP + tail).input_snapshot is not None


def test_known_trailer_truncated_is_an_error() -> None:
    for cut in (4, 6, 8, len(HINP) - 1):
        with pytest.raises(BonkLinkProtocolError, match="truncated"):
            decode_state(ref_state() + HINP[:cut])


def test_counts_are_checked_and_capped() -> None:
    head = struct.pack("<9f??", *([0.0] * 9), True, False)
    with pytest.raises(BonkLinkProtocolError, match="negative enemy count"):
        decode_state(head + struct.pack("<i", -1) + b"\x00" * 64)
    with pytest.raises(BonkLinkProtocolError, match="truncated"):
        decode_state(head + struct.pack("<i", 2**31 - 1) + b"\x00" * 64)
    # More enemies than the cap: all are read past (the menu still decodes), 256 are kept.
    many = ref_state(enemies=[(float(i), 0.0, 0.0, 1.0) for i in range(300)], menu="Arena")
    decoded = decode_state(many)
    assert len(decoded.enemies) == MAX_ENEMIES and decoded.menu == "Arena"
    assert decoded.enemies[-1, 0] == MAX_ENEMIES - 1
    options = tuple(f"o{i}" for i in range(70))
    decoded = decode_state(ref_state(options=options) + HINP)
    assert decoded.options == options[:MAX_OPTIONS] and decoded.input_snapshot is not None
    bad_options = ref_state(options=())[:-4] + struct.pack("<i", -5)
    with pytest.raises(BonkLinkProtocolError, match="negative option count"):
        decode_state(bad_options)
    huge_string = ref_state(options=())[:-4] + struct.pack("<i", 1) + bytes.fromhex("ffffffff07")
    with pytest.raises(BonkLinkProtocolError, match="string length"):
        decode_state(huge_string)


def test_every_strict_prefix_of_a_state_is_rejected() -> None:
    data = ref_state()
    for cut in range(len(data)):
        with pytest.raises(BonkLinkProtocolError):
            decode_state(data[:cut])


# ------------------------------------------------------------------ packets


def test_packet_layout_and_length_caps() -> None:
    state, frame = ref_state(), b"\xff\xd8jpegish"
    packet = encode_packet(state, frame)
    assert packet == struct.pack("<i", len(state)) + state + struct.pack("<i", len(frame)) + frame
    decoded, got_frame, used = decode_packet(packet + b"next")
    assert decoded == decode_state(state) and got_frame == frame and used == len(packet)
    assert decode_packet(encode_packet(state))[1] is None  # frame_len 0: keep the last frame
    for bad in (0, -1, MAX_STATE_LEN + 1, -(2**31)):
        with pytest.raises(BonkLinkProtocolError, match="state_len"):
            decode_packet(struct.pack("<i", bad) + state)
    check_state_len(MAX_STATE_LEN)
    check_frame_len(MAX_FRAME_LEN)
    check_frame_len(0)
    for bad in (-1, MAX_FRAME_LEN + 1):
        with pytest.raises(BonkLinkProtocolError, match="frame_len"):
            decode_packet(struct.pack("<i", len(state)) + state + struct.pack("<i", bad))


def test_every_strict_prefix_of_a_packet_is_rejected() -> None:
    packet = encode_packet(ref_state(), b"\xff\xd8" + b"x" * 10)
    for cut in range(len(packet)):
        with pytest.raises(BonkLinkProtocolError):
            decode_packet(packet[:cut])


# ------------------------------------------------------------------ frames


def test_raw_frame_rows_are_flipped() -> None:
    top_down = np.zeros((4, 3, 3), np.uint8)
    top_down[0] = (255, 0, 0)  # top row red
    top_down[3] = (0, 0, 255)  # bottom row blue
    top_down[1, 1] = (1, 2, 3)
    # On the wire: MBRF, w, h, c, then rows bottom-to-top.
    wire = (
        b"MBRF"
        + struct.pack("<3i", 3, 4, 3)
        + b"".join(top_down[r].tobytes() for r in (3, 2, 1, 0))
    )
    assert encode_frame_raw(top_down) == wire
    decoded = decode_frame(wire)
    assert decoded.shape == (4, 3, 3) and decoded.dtype == np.uint8
    np.testing.assert_array_equal(decoded, top_down)
    assert read_frame_header(wire) == ("raw_rgb", 3, 4)
    resized = decode_frame(encode_frame_raw(np.full((180, 320, 3), 9, np.uint8)), (90, 160))
    assert resized.shape == (90, 160, 3) and (resized == 9).all()


@pytest.mark.parametrize(
    "wire",
    [
        b"MBRF" + struct.pack("<3i", 3, 4, 4) + b"\x00" * 48,  # 4 channels
        b"MBRF" + struct.pack("<3i", 3, 4, 3) + b"\x00" * 35,  # short
        b"MBRF" + struct.pack("<3i", 3, 4, 3) + b"\x00" * 37,  # long
        b"MBRF" + struct.pack("<3i", -3, -4, 3) + b"\x00" * 36,
        b"MBRF" + struct.pack("<3i", 2**30, 2**30, 3),  # claims 3 EiB
        b"MBRF\x00",
        b"PNG\x00" + b"\x00" * 20,
        b"",
    ],
)
def test_bad_raw_frames(wire: bytes) -> None:
    with pytest.raises(BonkLinkProtocolError):
        decode_frame(wire)


def _gradient(height: int = 180, width: int = 320) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 255 // width, y * 255 // height, np.full_like(x, 128)], -1).astype(
        np.uint8
    )


def test_jpeg_frames_decode_and_resize() -> None:
    image = _gradient()
    data = encode_frame_jpeg(image)
    assert data[:2] == b"\xff\xd8"
    full, width, height = decode_frame_and_size(data)
    assert (width, height) == (320, 180) and full.shape == (180, 320, 3)
    assert np.abs(full.astype(int) - image).mean() < 3
    small = decode_frame(data, (90, 160))
    assert small.shape == (90, 160, 3)
    assert np.abs(small.astype(int) - image[::2, ::2]).mean() < 4
    odd = decode_frame(data, (84, 84))
    assert odd.shape == (84, 84, 3)
    # A Pillow-written progressive or grayscale JPEG decodes too.
    buf = io.BytesIO()
    Image.fromarray(image[:, :, 0]).save(buf, "JPEG", progressive=True)
    gray = decode_frame(buf.getvalue(), (90, 160))
    assert gray.shape == (90, 160, 3)


def test_bad_jpeg_frames() -> None:
    data = encode_frame_jpeg(_gradient())
    sof = data.index(b"\xff\xc0")
    bomb = bytearray(data)
    bomb[sof + 5 : sof + 9] = struct.pack(">HH", 60000, 60000)  # 3.6 G pixels claimed
    liar = bytearray(data)
    liar[sof + 5 : sof + 9] = struct.pack(">HH", 4000, 4000)  # allowed size, far too few bytes
    with pytest.raises(BonkLinkProtocolError, match="claims 4000x4000"):
        read_frame_header(bytes(liar))
    cases = [data[:200], data[: len(data) // 2], bytes(bomb), bytes(liar), b"\xff\xd8\xff\xd9"]
    cases.append(b"\xff\xd8")
    cases.append(b"\xff\xd8" + b"\xff" * 100_000)  # endless fill bytes
    for bad in cases:
        with pytest.raises(BonkLinkProtocolError):
            decode_frame(bad, (90, 160))


def test_huge_claims_allocate_nothing() -> None:
    """A bad length is rejected before anything of its size is allocated."""
    data = encode_frame_jpeg(_gradient())
    sof = data.index(b"\xff\xc0")
    bomb = bytearray(data)
    bomb[sof + 5 : sof + 9] = struct.pack(">HH", 4000, 4000)  # allowed size, truncated data
    claims = [
        lambda: decode_packet(struct.pack("<i", MAX_STATE_LEN) + b"\x00" * 10),
        lambda: decode_packet(struct.pack("<i", 42) + ref_state()[:42] + struct.pack("<i", -7)),
        lambda: decode_state(struct.pack("<9f??i", *[0.0] * 9, 1, 0, 2**31 - 1)),
        lambda: decode_frame(b"MBRF" + struct.pack("<3i", 40000, 40000, 3) + b"\x00" * 64),
        lambda: decode_frame(bytes(bomb[: sof + 40])),
    ]
    for claim in claims:
        tracemalloc.start()
        try:
            with pytest.raises(BonkLinkProtocolError):
                claim()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 256 * 1024, peak


@pytest.mark.net
def test_packet_reader_allocates_only_what_arrives() -> None:
    """Over TCP: a header claiming a 4 MiB frame, then 100 bytes and EOF."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    state = ref_state()

    def game() -> None:
        conn, _ = server.accept()
        conn.sendall(struct.pack("<i", len(state)) + state + struct.pack("<i", MAX_FRAME_LEN))
        conn.sendall(b"\xff\xd8" + b"\x00" * 98)
        conn.close()

    thread = threading.Thread(target=game)
    thread.start()
    client = socket.create_connection(("127.0.0.1", port))
    reader = PacketReader(client)
    tracemalloc.start()
    try:
        with pytest.raises(ConnectionClosed):
            reader.recv(5.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        client.close()
        thread.join()
        server.close()
    assert peak < 512 * 1024, peak


# ------------------------------------------------------------------ actions


def test_action_layout_matches_struct() -> None:
    plain = Action(0.5, -0.25, 1.0, 0.0, fire=True, interact=True)
    assert encode_action(plain) == struct.pack("<i4f4?", 20, 0.5, -0.25, 1.0, 0.0, 1, 0, 1, 0)
    assert len(encode_action(plain)) == 24
    click = Action(ui_click=True, click_x=17, click_y=163)
    assert encode_action(click) == struct.pack("<i4f4?2i", 28, 0, 0, 0, 0, 0, 0, 0, 1, 17, 163)
    # A click's coordinates are only sent when uiClick is true.
    assert len(encode_action(Action(click_x=5, click_y=6))) == 24


def test_action_payload_decoding_mirrors_binaryreader() -> None:
    payload = struct.pack("<4f4B", 0.1, 0.2, 0.3, 0.4, 7, 0, 255, 0) + b"extra"
    action = decode_action_payload(payload)
    assert (action.fire, action.ability, action.interact, action.ui_click) == (
        True,
        False,
        True,
        False,
    )
    click = struct.pack("<4f4?2i", 0, 0, 0, 0, 0, 0, 0, 1, -3, 99)
    assert decode_action_payload(click).click_x == -3
    for bad in (b"", b"\x00" * 19, click[:24], b"\x00" * 1024):
        with pytest.raises(BonkLinkProtocolError):
            decode_action_payload(bad)


# ------------------------------------------------------------------ property-based

f32 = st.floats(width=32, allow_nan=False)
f32_any = st.floats(width=32)
texts = st.text(max_size=24)
snapshots = st.builds(
    InputSnapshot, f32, f32, f32, f32, st.booleans(), st.booleans(), st.booleans(),
    st.booleans(), f32, f32,
)  # fmt: skip
int32 = st.integers(-(2**31), 2**31 - 1)
states = st.builds(
    GameState,
    position=st.tuples(f32, f32, f32),
    velocity=st.tuples(f32, f32, f32),
    health=f32,
    max_health=f32,
    game_time=f32,
    is_playing=st.booleans(),
    is_paused=st.booleans(),
    enemies=st.lists(st.tuples(f32_any, f32_any, f32_any, f32_any), max_size=12).map(
        lambda rows: np.array(rows, np.float32).reshape(-1, 4)
    ),
    menu=texts,
    options=st.lists(texts, max_size=5).map(tuple),
    input_snapshot=st.none() | snapshots,
    stats=st.none() | st.builds(GameStats, int32, f32, int32),
)
actions = st.builds(
    Action, f32, f32, f32, f32, st.booleans(), st.booleans(), st.booleans(), st.booleans(),
    int32, int32,
)  # fmt: skip

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_STATES = settings(FUZZ, max_examples=120)  # drawing whole states is the slow part


@FUZZ_STATES
@given(states)
def test_state_round_trip(state: GameState) -> None:
    data = encode_state(state)
    decoded = decode_state(data)
    assert decoded.position == state.position and decoded.velocity == state.velocity
    assert (decoded.health, decoded.max_health, decoded.game_time) == (
        state.health,
        state.max_health,
        state.game_time,
    )
    assert (decoded.is_playing, decoded.is_paused) == (state.is_playing, state.is_paused)
    assert decoded.enemies.tobytes() == state.enemies.tobytes()  # bitwise, NaNs included
    assert (decoded.menu, decoded.options) == (state.menu, state.options)
    assert decoded.input_snapshot == state.input_snapshot and decoded.stats == state.stats
    packet = encode_packet(data, b"\xff\xd8frame")
    again, frame, used = decode_packet(packet)
    assert again == state and frame == b"\xff\xd8frame" and used == len(packet)


@FUZZ
@given(actions)
def test_action_round_trip(action: Action) -> None:
    wire = encode_action(action)
    assert struct.unpack_from("<i", wire)[0] == len(wire) - 4
    decoded = decode_action_payload(wire[4:])
    expected = action if action.ui_click else Action(*[getattr(action, f) for f in
                                                      ("move_x", "move_y", "aim_x", "aim_y",
                                                       "fire", "ability", "interact")])  # fmt: skip
    assert decoded == expected


def _only_protocol_errors(fn, data: bytes) -> None:
    """Decoding either succeeds or raises the protocol error (anything else fails the test)."""
    with contextlib.suppress(BonkLinkProtocolError):
        fn(data)


@FUZZ
@given(st.binary(max_size=600))
def test_fuzz_random_bytes(data: bytes) -> None:
    for fn in (decode_state, decode_packet, decode_action_payload, decode_frame):
        _only_protocol_errors(fn, data)
    _only_protocol_errors(decode_frame, b"\xff\xd8" + data)
    _only_protocol_errors(decode_frame, b"MBRF" + data)
    _only_protocol_errors(decode_packet, struct.pack("<i", len(data)) + data)


@FUZZ_STATES
@given(states, st.data())
def test_fuzz_truncated_and_mutated(state: GameState, data: st.DataObject) -> None:
    packet = encode_packet(state, encode_frame_raw(np.zeros((2, 2, 3), np.uint8)))
    cut = data.draw(st.integers(0, len(packet) - 1))
    with pytest.raises(BonkLinkProtocolError):
        decode_packet(packet[:cut])
    mutated = bytearray(packet)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(packet) - 1))] = data.draw(st.integers(0, 255))
    _only_protocol_errors(decode_packet, bytes(mutated))
    _only_protocol_errors(decode_state, bytes(mutated[4:]))


@FUZZ
@given(st.data())
def test_fuzz_jpeg_mutations(data: st.DataObject) -> None:
    jpeg = bytearray(_SMALL_JPEG)
    for _ in range(data.draw(st.integers(1, 6))):
        jpeg[data.draw(st.integers(0, len(jpeg) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(jpeg)))
    _only_protocol_errors(lambda b: decode_frame(b, (8, 8)), bytes(jpeg[:cut]))


_SMALL_JPEG = encode_frame_jpeg(_gradient(24, 32))


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    game, _ = server.accept()
    server.close()
    return game, client


@pytest.mark.net
@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=40)
@given(st.lists(states, min_size=1, max_size=4), st.lists(st.binary(max_size=300), max_size=4))
def test_packets_round_trip_over_tcp(sent: list[GameState], frames: list[bytes]) -> None:
    """Packets streamed back to back over loopback TCP come out whole and in order."""
    game, client = _tcp_pair()
    try:
        frames = [b"\xff\xd8" + f if f else b"" for f in frames] + [b""] * len(sent)
        stream = b"".join(encode_packet(s, f) for s, f in zip(sent, frames, strict=False))
        threading.Thread(target=game.sendall, args=(stream,), daemon=True).start()
        reader = PacketReader(client)
        for state, frame in zip(sent, frames, strict=False):
            got_state, got_frame = reader.recv(5.0)
            assert got_state == state and got_frame == (frame or None)
    finally:
        game.close()
        client.close()


@pytest.mark.net
@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=100)
@given(st.binary(max_size=2000), st.integers(1, 64))
def test_fuzz_the_stream_reader_over_tcp(garbage: bytes, chunk: int) -> None:
    """Random bytes, in random-sized writes, then EOF: the reader raises a protocol error or
    reports the closed connection; it never hangs."""
    game, client = _tcp_pair()
    try:
        for i in range(0, len(garbage), chunk):
            game.sendall(garbage[i : i + chunk])
        game.close()
        reader = PacketReader(client)
        with contextlib.suppress(BonkLinkProtocolError, ConnectionClosed):
            while True:
                reader.recv(5.0)
    finally:
        client.close()
