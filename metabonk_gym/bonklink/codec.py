"""BonkLink v1 wire codec: every message of the protocol, byte for byte.

The protocol is the one the MetaBonk BonkLink BepInEx plugin speaks (see ``docs/megabonk.md`` and
the v1 spec). Numbers are little-endian with .NET ``BinaryWriter`` encodings; strings carry a
7-bit encoded (LEB128) byte length. Every length and count read from the wire is checked against
what is actually left in the buffer, and against the protocol caps, *before* anything is
allocated, so a hostile or desynchronised peer can only ever produce a
:class:`BonkLinkProtocolError`, never a huge allocation or a hang.

This module is pure (no sockets); :mod:`metabonk_gym.bonklink.transport` frames it over TCP.

>>> encode_7bit_int(300), decode_7bit_int(b"\\xac\\x02", 0)
(b'\\xac\\x02', (300, 2))
>>> decode_action_payload(encode_action_payload(Action(fire=True))).fire
True
"""

from __future__ import annotations

import io
import math
import struct
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from metabonk_gym.errors import BonkLinkProtocolError as BonkLinkProtocolError  # re-exported

__all__ = [
    "ACTION_CLICK_LEN",
    "ACTION_PLAIN_LEN",
    "HINP_MAGIC",
    "JPEG_MAX_PIXELS_PER_BYTE",
    "MAX_ACTION_LEN",
    "MAX_ENEMIES",
    "MAX_FRAME_LEN",
    "MAX_FRAME_PIXELS",
    "MAX_OPTIONS",
    "MAX_STATE_LEN",
    "NEUTRAL_ACTION",
    "STAT_MAGIC",
    "Action",
    "BonkLinkProtocolError",
    "GameState",
    "GameStats",
    "InputSnapshot",
    "check_frame_len",
    "check_state_len",
    "decode_7bit_int",
    "decode_action_payload",
    "decode_frame",
    "decode_frame_and_size",
    "decode_packet",
    "decode_state",
    "encode_7bit_int",
    "encode_action",
    "encode_action_payload",
    "encode_frame_jpeg",
    "encode_frame_raw",
    "encode_packet",
    "encode_state",
    "encode_string",
    "frame_format",
    "read_frame_header",
]

#: A client rejects ``state_len <= 0`` or above this (spec: "Game -> client").
MAX_STATE_LEN = 262_144
#: A client rejects ``frame_len < 0`` or above this.
MAX_FRAME_LEN = 4_194_304
#: The plugin accepts action payloads with ``0 < payload_len < 1024``.
MAX_ACTION_LEN = 1023
#: Decoded states keep at most this many enemies / level-up options (the rest are read and skipped).
MAX_ENEMIES = 256
MAX_OPTIONS = 64
#: Largest JPEG a client decodes (a JPEG header can claim 65535x65535 in a few bytes).
MAX_FRAME_PIXELS = 4096 * 4096
#: A JPEG may also decode to at most this many pixels per byte it holds: baseline JPEG needs
#: several bits per 8x8 block even for a flat image (well under 256 pixels a byte), so a frame
#: claiming more is lying about its size, and decoding it would allocate what the claim says.
JPEG_MAX_PIXELS_PER_BYTE = 1024

#: ``uint32`` magic of the human-input trailer: the bytes ``H I N P`` read little-endian.
HINP_MAGIC = 0x504E4948
#: ``uint32`` magic of this project's game-stats trailer (bytes ``M B S T``): kills, XP and level.
#: It is an extension in the sense of the spec ("a later extension can add its own magic-tagged
#: trailer"); v1 clients that do not know it skip it.
STAT_MAGIC = int.from_bytes(b"MBST", "little")

JPEG_SOI = b"\xff\xd8"
RAW_MAGIC = b"MBRF"

ACTION_PLAIN_LEN = 20  # <4f4?
ACTION_CLICK_LEN = 28  # <4f4?2i

_FLT_MAX = 3.4028234663852886e38
_F32 = struct.Struct("<f")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_HEAD = struct.Struct("<9f??i")  # pos, vel, health, maxHealth, gameTime, isPlaying, isPaused, n
_HINP = struct.Struct("<Ii4f4?2f")  # magic, version, move/look, buttons, click
_STAT = struct.Struct("<Iiifi")  # magic, version, kills, xp, level
_ACTION_PLAIN = struct.Struct("<i4f4?")
_ACTION_CLICK = struct.Struct("<i4f4?2i")
_ACTION_FIELDS = struct.Struct("<4f4?")
_CLICK_FIELDS = struct.Struct("<2i")
_RAW_HEAD = struct.Struct("<4s3i")
_ENEMY_SIZE = 16


# --------------------------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputSnapshot:
    """The ``HINP`` trailer: the human's own input on that tick (for recording demonstrations).

    ``click_nx``/``click_ny`` are normalised 0..1 with a top-left origin.
    """

    move_x: float = 0.0
    move_y: float = 0.0
    look_x: float = 0.0
    look_y: float = 0.0
    fire: bool = False
    ability: bool = False
    interact: bool = False
    ui_click: bool = False
    click_nx: float = 0.0
    click_ny: float = 0.0


@dataclass(frozen=True)
class GameStats:
    """This project's ``MBST`` trailer (sent by ``bonklink-sim``; not by the deployed plugin)."""

    kills: int = 0
    xp: float = 0.0
    level: int = 0


@dataclass(eq=False)
class GameState:
    """One decoded state block.

    ``enemies`` is a float32 array of shape (n, 4): x, y, z, health (at most :data:`MAX_ENEMIES`
    rows are kept). ``menu`` is ``"Gameplay"`` during play, else a scene or menu name.
    """

    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    health: float = 100.0
    max_health: float = 100.0
    game_time: float = 0.0
    is_playing: bool = False
    is_paused: bool = False
    enemies: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))
    menu: str = ""
    options: tuple[str, ...] = ()
    input_snapshot: InputSnapshot | None = None
    stats: GameStats | None = None

    def __eq__(self, other: object) -> bool:
        """Field-wise equality; floats compare by their float32 bits so NaN equals NaN."""
        if not isinstance(other, GameState):
            return NotImplemented
        return encode_state(self) == encode_state(other)


@dataclass(frozen=True)
class Action:
    """One client -> game action.

    ``click_x``/``click_y`` are capture-pixel coordinates with a **bottom-left** origin and are
    only sent when ``ui_click`` is true.
    """

    move_x: float = 0.0
    move_y: float = 0.0
    aim_x: float = 0.0
    aim_y: float = 0.0
    fire: bool = False
    ability: bool = False
    interact: bool = False
    ui_click: bool = False
    click_x: int = 0
    click_y: int = 0


NEUTRAL_ACTION = Action()

# --------------------------------------------------------------------------------------------
# .NET primitives
# --------------------------------------------------------------------------------------------


def encode_7bit_int(value: int) -> bytes:
    """Encode a non-negative int32 as .NET ``Write7BitEncodedInt`` does (LEB128, low bits first)."""
    if not 0 <= value <= 0x7FFF_FFFF:
        raise BonkLinkProtocolError(f"7-bit encoded length out of int32 range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_7bit_int(buf: bytes | bytearray | memoryview, offset: int) -> tuple[int, int]:
    """Decode a .NET 7-bit encoded int32 at ``offset``; return ``(value, next_offset)``.

    Mirrors ``BinaryReader.Read7BitEncodedInt``: at most 5 bytes, the fifth carrying at most 4
    bits. A value of 2**31 or more is a negative int32, which ``ReadString`` rejects; so do we.
    """
    result = 0
    end = len(buf)
    for i in range(5):
        if offset >= end:
            raise BonkLinkProtocolError("truncated 7-bit encoded length")
        byte = buf[offset]
        offset += 1
        if i == 4 and byte > 0x0F:
            raise BonkLinkProtocolError("7-bit encoded length overflows int32")
        result |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            break
    if result > 0x7FFF_FFFF:
        raise BonkLinkProtocolError(f"negative string length: {result - (1 << 32)}")
    return result, offset


def encode_string(text: str) -> bytes:
    """Encode a string as ``BinaryWriter.Write(string)``: 7-bit byte length, then UTF-8."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BonkLinkProtocolError(f"string is not encodable as UTF-8: {exc}") from exc
    return encode_7bit_int(len(data)) + data


def _decode_string(buf: memoryview, offset: int, what: str) -> tuple[str, int]:
    length, offset = decode_7bit_int(buf, offset)
    if length > len(buf) - offset:
        raise BonkLinkProtocolError(
            f"{what}: string length {length} exceeds the {len(buf) - offset} bytes left"
        )
    # .NET's UTF8Encoding replaces invalid sequences instead of throwing; so do we.
    text = bytes(buf[offset : offset + length]).decode("utf-8", errors="replace")
    return text, offset + length


def _skip_string(buf: memoryview, offset: int, what: str) -> int:
    length, offset = decode_7bit_int(buf, offset)
    if length > len(buf) - offset:
        raise BonkLinkProtocolError(
            f"{what}: string length {length} exceeds the {len(buf) - offset} bytes left"
        )
    return offset + length


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


def _f32(value: float) -> float:
    """Let ``value`` pass to ``struct``'s ``f`` format: a finite value too large for float32
    becomes +-inf (as a .NET ``(float)`` cast does) instead of raising ``OverflowError``."""
    if -_FLT_MAX <= value <= _FLT_MAX or not math.isfinite(value):
        return value
    try:
        _F32.pack(value)
    except OverflowError:
        return math.copysign(math.inf, value)
    return value


def encode_state(state: GameState) -> bytes:
    """Encode a state block (without the ``int32 state_len`` prefix), trailers included."""
    enemies = np.asarray(state.enemies, dtype="<f4").reshape(-1, 4)
    head = _HEAD.pack(
        *(_f32(v) for v in state.position),
        *(_f32(v) for v in state.velocity),
        _f32(state.health),
        _f32(state.max_health),
        _f32(state.game_time),
        bool(state.is_playing),
        bool(state.is_paused),
        len(enemies),
    )
    parts = [head, enemies.tobytes(), encode_string(state.menu), _I32.pack(len(state.options))]
    parts.extend(encode_string(option) for option in state.options)
    if state.input_snapshot is not None:
        s = state.input_snapshot
        parts.append(
            _HINP.pack(
                HINP_MAGIC,
                1,
                *(_f32(v) for v in (s.move_x, s.move_y, s.look_x, s.look_y)),
                s.fire,
                s.ability,
                s.interact,
                s.ui_click,
                _f32(s.click_nx),
                _f32(s.click_ny),
            )
        )
    if state.stats is not None:
        st = state.stats
        parts.append(_STAT.pack(STAT_MAGIC, 1, st.kills, _f32(st.xp), st.level))
    return b"".join(parts)


def decode_state(data: bytes | bytearray | memoryview) -> GameState:
    """Decode a state block (without its length prefix).

    Enemy and option counts are checked against the bytes actually left before anything is read;
    counts above the client caps (256 enemies, 64 options) are read past and dropped, so the rest
    of the block stays in sync. After the fixed fields, trailers are recognised by their magic:
    ``HINP`` (version 1) and ``MBST`` (version 1) are decoded; anything else is an unknown trailer
    and, since v1 trailers carry no length, everything from there to the end is skipped.
    """
    buf = memoryview(data)
    size = len(buf)
    if size < _HEAD.size:
        raise BonkLinkProtocolError(
            f"state truncated: {size} bytes, fixed fields need {_HEAD.size}"
        )
    (px, py, pz, vx, vy, vz, hp, max_hp, game_time, playing, paused, n_enemies) = _HEAD.unpack_from(
        buf, 0
    )
    offset = _HEAD.size
    if n_enemies < 0:
        raise BonkLinkProtocolError(f"negative enemy count: {n_enemies}")
    if n_enemies * _ENEMY_SIZE > size - offset:
        raise BonkLinkProtocolError(
            f"state truncated: {n_enemies} enemies need {n_enemies * _ENEMY_SIZE} bytes, "
            f"{size - offset} left"
        )
    kept = min(n_enemies, MAX_ENEMIES)
    enemies = np.frombuffer(buf, dtype="<f4", count=kept * 4, offset=offset).reshape(kept, 4)
    enemies = enemies.astype(np.float32)  # owns its memory (the buffer is reused by callers)
    offset += n_enemies * _ENEMY_SIZE
    menu, offset = _decode_string(buf, offset, "currentMenu")
    if size - offset < 4:
        raise BonkLinkProtocolError("state truncated before optionCount")
    (n_options,) = _I32.unpack_from(buf, offset)
    offset += 4
    if n_options < 0:
        raise BonkLinkProtocolError(f"negative option count: {n_options}")
    if n_options > size - offset:  # every string takes at least one byte
        raise BonkLinkProtocolError(
            f"state truncated: {n_options} options cannot fit in {size - offset} bytes"
        )
    options = []
    for i in range(n_options):
        if i < MAX_OPTIONS:
            text, offset = _decode_string(buf, offset, "levelUpOptions")
            options.append(text)
        else:
            offset = _skip_string(buf, offset, "levelUpOptions")
    snapshot, stats = _decode_trailers(buf, offset)
    return GameState(
        position=(px, py, pz),
        velocity=(vx, vy, vz),
        health=hp,
        max_health=max_hp,
        game_time=game_time,
        is_playing=playing,
        is_paused=paused,
        enemies=enemies,
        menu=menu,
        options=tuple(options),
        input_snapshot=snapshot,
        stats=stats,
    )


def _decode_trailers(buf: memoryview, offset: int) -> tuple[InputSnapshot | None, GameStats | None]:
    """Decode known magic-tagged trailers; stop (skipping the rest) at anything else."""
    snapshot: InputSnapshot | None = None
    stats: GameStats | None = None
    size = len(buf)
    while size - offset >= 4:
        (magic,) = _U32.unpack_from(buf, offset)
        if magic not in (HINP_MAGIC, STAT_MAGIC):
            break  # an unknown trailer: v1 trailers carry no length, so skip to the end
        trailer = _HINP if magic == HINP_MAGIC else _STAT
        if size - offset < 8:
            raise BonkLinkProtocolError("trailer truncated before its version")
        (version,) = _I32.unpack_from(buf, offset + 4)
        if version != 1:
            break  # a later version of a known trailer: unknown to us, skipped likewise
        if size - offset < trailer.size:
            raise BonkLinkProtocolError(f"{bytes(buf[offset : offset + 4])!r} trailer truncated")
        fields = trailer.unpack_from(buf, offset)
        if magic == HINP_MAGIC:
            snapshot = InputSnapshot(*fields[2:])
        else:
            stats = GameStats(*fields[2:])
        offset += trailer.size
    return snapshot, stats


# --------------------------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------------------------


def frame_format(data: bytes | bytearray | memoryview) -> Literal["jpeg", "raw_rgb"]:
    """Tell the two frame formats apart by their first bytes."""
    head = bytes(data[:4])
    if head.startswith(JPEG_SOI):
        return "jpeg"
    if head == RAW_MAGIC:
        return "raw_rgb"
    raise BonkLinkProtocolError(f"unknown frame format (first bytes {head.hex()})")


def read_frame_header(data: bytes | bytearray | memoryview) -> tuple[str, int, int]:
    """Return ``(format, width, height)`` after validating the header, without decoding pixels.

    A raw frame must hold exactly ``width*height*3`` bytes after its 16-byte header; a JPEG may
    claim at most :data:`MAX_FRAME_PIXELS` pixels.
    """
    fmt = frame_format(data)
    if fmt == "raw_rgb":
        if len(data) < _RAW_HEAD.size:
            raise BonkLinkProtocolError("raw frame header truncated")
        _, width, height, channels = _RAW_HEAD.unpack_from(data, 0)
        if channels != 3:
            raise BonkLinkProtocolError(f"raw frame has {channels} channels, expected 3")
        if width <= 0 or height <= 0:
            raise BonkLinkProtocolError(f"raw frame has bad size {width}x{height}")
        if width * height * 3 != len(data) - _RAW_HEAD.size:
            raise BonkLinkProtocolError(
                f"raw frame {width}x{height} needs {width * height * 3} bytes, "
                f"got {len(data) - _RAW_HEAD.size}"
            )
        return fmt, width, height
    width, height = _jpeg_size(data)
    return fmt, width, height


# JPEG start-of-frame markers (baseline, extended, progressive, lossless; Huffman or arithmetic).
_SOF_MARKERS = frozenset(
    (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF)
)
_MAX_JPEG_MARKERS = 4096


def _jpeg_size(data: bytes | bytearray | memoryview) -> tuple[int, int]:
    """Read a JPEG's (width, height) from its SOF segment, checking it against the caps.

    Walks the marker segments from SOI by their lengths (a bounded number of steps), so the
    pixel count is known and checked before any decoder allocates the image.
    """
    size = len(data)
    pos = 2
    for _ in range(_MAX_JPEG_MARKERS):
        if pos + 4 > size:
            raise BonkLinkProtocolError("JPEG frame truncated before its frame header")
        if data[pos] != 0xFF:
            raise BonkLinkProtocolError(f"bad JPEG frame: no marker at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # markers without a segment
            pos += 2
            continue
        if marker in (0x00, 0xD8, 0xD9, 0xDA):
            raise BonkLinkProtocolError("bad JPEG frame: no frame header before the image data")
        seg_len = (data[pos + 2] << 8) | data[pos + 3]
        if seg_len < 2:
            raise BonkLinkProtocolError("bad JPEG frame: bad segment length")
        if marker in _SOF_MARKERS:
            if seg_len < 8 or pos + 9 > size:
                raise BonkLinkProtocolError("JPEG frame header truncated")
            height = (data[pos + 5] << 8) | data[pos + 6]
            width = (data[pos + 7] << 8) | data[pos + 8]
            pixels = width * height
            if width <= 0 or height <= 0 or pixels > MAX_FRAME_PIXELS:
                raise BonkLinkProtocolError(f"JPEG frame size {width}x{height} out of range")
            if pixels > JPEG_MAX_PIXELS_PER_BYTE * size:
                raise BonkLinkProtocolError(
                    f"JPEG frame claims {width}x{height} pixels in only {size} bytes"
                )
            return width, height
        pos += 2 + seg_len
    raise BonkLinkProtocolError("bad JPEG frame: too many marker segments")


def decode_frame(
    data: bytes | bytearray | memoryview, size: tuple[int, int] | None = None
) -> np.ndarray:
    """Decode a frame into a top-down uint8 RGB array of shape (H, W, 3).

    Raw frames are stored bottom-to-top (Unity's order) and are flipped here. With ``size``
    (height, width) the image is also resized; JPEGs then use the decoder's DCT scaling
    (1/2, 1/4, 1/8), which is several times faster than a full decode.
    """
    return decode_frame_and_size(data, size)[0]


def decode_frame_and_size(
    data: bytes | bytearray | memoryview, size: tuple[int, int] | None = None
) -> tuple[np.ndarray, int, int]:
    """Like :func:`decode_frame`, also returning the frame's own ``(width, height)``."""
    from PIL import Image

    fmt, width, height = read_frame_header(data)  # sizes are checked before decoding
    try:
        if fmt == "raw_rgb":
            # ystep=-1: Pillow reads the rows bottom-up, i.e. flips them for free.
            pixels: Any = memoryview(data)[_RAW_HEAD.size :]  # no copy
            image = Image.frombuffer("RGB", (width, height), pixels, "raw", "RGB", 0, -1)
        else:
            image = _decode_jpeg(bytes(data), width, height, size)
        if size is not None and image.size != (size[1], size[0]):
            factor = image.size[0] // size[1]
            if factor > 1 and image.size == (size[1] * factor, size[0] * factor):
                image = image.reduce(factor)
            else:
                image = image.resize((size[1], size[0]), Image.Resampling.BILINEAR)
        out = np.frombuffer(image.tobytes(), np.uint8).reshape(image.size[1], image.size[0], 3)
        return out.copy(), width, height
    except BonkLinkProtocolError:
        raise
    except Exception as exc:  # truncated or corrupt image data
        raise BonkLinkProtocolError(f"bad {fmt} frame: {exc}") from exc


def _decode_jpeg(data: bytes, width: int, height: int, size: tuple[int, int] | None) -> Any:
    """Decode straight into RGB with libjpeg's DCT scaling; fall back to ``Image.open`` for
    what the direct path cannot do (e.g. CMYK JPEGs)."""
    from PIL import Image

    scale = 1
    if size is not None:
        ratio = min(width // max(1, size[1]), height // max(1, size[0]))
        scale = next(s for s in (8, 4, 2, 1) if ratio >= s)
    scaled = ((width + scale - 1) // scale, (height + scale - 1) // scale)
    try:
        return Image.frombytes("RGB", scaled, data, "jpeg", "RGB", "", scale, 0)
    except Exception:
        image = Image.open(io.BytesIO(data), formats=("JPEG",))
        if image.size != (width, height):
            raise BonkLinkProtocolError("JPEG frame size changed while decoding") from None
        if size is not None:
            image.draft("RGB", (size[1], size[0]))
        return image.convert("RGB")


def encode_frame_raw(rgb: np.ndarray) -> bytes:
    """Encode a top-down (H, W, 3) uint8 image as an ``MBRF`` frame (rows bottom-to-top)."""
    rgb = np.asarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise BonkLinkProtocolError(f"raw frames are (H, W, 3), got {rgb.shape}")
    height, width = rgb.shape[:2]
    return _RAW_HEAD.pack(RAW_MAGIC, width, height, 3) + rgb[::-1].tobytes()


def encode_frame_jpeg(rgb: np.ndarray, quality: int = 75) -> bytes:
    """Encode a top-down (H, W, 3) uint8 image as JPEG (the plugin's default, quality 75)."""
    from PIL import Image

    pixels = np.asarray(rgb, dtype=np.uint8)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ValueError(f"a frame is (H, W, 3) RGB, got shape {pixels.shape}")
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=quality)  # RGB from the shape (Pillow 13)
    return out.getvalue()


# --------------------------------------------------------------------------------------------
# Packets (game -> client)
# --------------------------------------------------------------------------------------------


def check_state_len(state_len: int) -> None:
    """Reject a state length outside ``0 < len <= 262144``."""
    if state_len <= 0 or state_len > MAX_STATE_LEN:
        raise BonkLinkProtocolError(f"bad state_len {state_len} (allowed 1..{MAX_STATE_LEN})")


def check_frame_len(frame_len: int) -> None:
    """Reject a frame length outside ``0 <= len <= 4194304``."""
    if frame_len < 0 or frame_len > MAX_FRAME_LEN:
        raise BonkLinkProtocolError(f"bad frame_len {frame_len} (allowed 0..{MAX_FRAME_LEN})")


def encode_packet(state: bytes | GameState, frame: bytes = b"") -> bytes:
    """Frame one game -> client packet: ``int32 state_len | state | int32 frame_len | frame``."""
    state_bytes = encode_state(state) if isinstance(state, GameState) else state
    check_state_len(len(state_bytes))
    check_frame_len(len(frame))
    return b"".join((_I32.pack(len(state_bytes)), state_bytes, _I32.pack(len(frame)), frame))


def decode_packet(data: bytes | bytearray | memoryview) -> tuple[GameState, bytes | None, int]:
    """Decode one packet from the start of ``data``.

    Returns ``(state, frame_bytes or None, bytes_consumed)``; a buffer that ends early raises.
    """
    buf = memoryview(data)
    if len(buf) < 4:
        raise BonkLinkProtocolError("packet truncated before state_len")
    (state_len,) = _I32.unpack_from(buf, 0)
    check_state_len(state_len)
    if len(buf) < 8 + state_len:
        raise BonkLinkProtocolError("packet truncated inside the state")
    state = decode_state(buf[4 : 4 + state_len])
    (frame_len,) = _I32.unpack_from(buf, 4 + state_len)
    check_frame_len(frame_len)
    start = 8 + state_len
    if len(buf) < start + frame_len:
        raise BonkLinkProtocolError("packet truncated inside the frame")
    frame = bytes(buf[start : start + frame_len]) if frame_len else None
    return state, frame, start + frame_len


# --------------------------------------------------------------------------------------------
# Actions (client -> game)
# --------------------------------------------------------------------------------------------


def encode_action(action: Action) -> bytes:
    """Encode an action with its ``int32 payload_len`` prefix (20 bytes, or 28 with a click)."""
    axes = (
        _f32(action.move_x),
        _f32(action.move_y),
        _f32(action.aim_x),
        _f32(action.aim_y),
    )
    buttons = (bool(action.fire), bool(action.ability), bool(action.interact))
    if action.ui_click:
        return _ACTION_CLICK.pack(
            ACTION_CLICK_LEN, *axes, *buttons, True, int(action.click_x), int(action.click_y)
        )
    return _ACTION_PLAIN.pack(ACTION_PLAIN_LEN, *axes, *buttons, False)


def encode_action_payload(action: Action) -> bytes:
    """The action's payload alone (no length prefix)."""
    return encode_action(action)[4:]


def decode_action_payload(payload: bytes | bytearray | memoryview) -> Action:
    """Decode an action payload as the plugin reads it.

    ``BinaryReader`` reads the fields in order and ignores anything after them; bools are true
    for any non-zero byte. A payload too short for its fields is a protocol error.
    """
    size = len(payload)
    if size <= 0 or size > MAX_ACTION_LEN:
        raise BonkLinkProtocolError(f"bad action payload_len {size} (allowed 1..{MAX_ACTION_LEN})")
    if size < ACTION_PLAIN_LEN:
        raise BonkLinkProtocolError(f"action payload truncated: {size} bytes")
    fields = _ACTION_FIELDS.unpack_from(payload, 0)
    click_x = click_y = 0
    if fields[7]:
        if size < ACTION_CLICK_LEN:
            raise BonkLinkProtocolError(f"click action payload truncated: {size} bytes")
        click_x, click_y = _CLICK_FIELDS.unpack_from(payload, ACTION_PLAIN_LEN)
    move_x, move_y, aim_x, aim_y, fire, ability, interact, ui_click = fields
    return Action(move_x, move_y, aim_x, aim_y, fire, ability, interact, ui_click, click_x, click_y)
