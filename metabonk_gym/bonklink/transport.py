"""TCP framing for BonkLink v1: buffered packet and action readers, and a connect with backoff.

Both directions are length-prefixed streams. The readers keep one growable buffer per socket and
read whatever the kernel has in one ``recv_into``; a length prefix is validated against the
protocol caps as soon as its 4 bytes arrive, and the buffer grows only as received data fills it,
so a lying length never causes an allocation (a client "never tries to allocate what a bad length
says"). Nothing here pickles or evaluates anything from the wire.

>>> from metabonk_gym.bonklink.codec import Action, encode_action
>>> game_side, client_side = socket.socketpair()
>>> client_side.sendall(encode_action(Action(move_x=0.5)))
>>> reader = ActionReader(game_side)
>>> reader.fill() > 0, reader.pop().move_x, reader.pop()
(True, 0.5, None)
>>> game_side.close(); client_side.close()
"""

from __future__ import annotations

import random
import socket
import struct
import time

from metabonk_gym.bonklink.codec import (
    MAX_ACTION_LEN,
    MAX_FRAME_LEN,
    MAX_STATE_LEN,
    Action,
    BonkLinkProtocolError,
    GameState,
    check_frame_len,
    check_state_len,
    decode_action_payload,
    decode_state,
)
from metabonk_gym.errors import ConnectionClosed as ConnectionClosed  # re-exported

__all__ = [
    "ActionReader",
    "ConnectionClosed",
    "PacketReader",
    "RecvBuffer",
    "connect_with_backoff",
]

_I32 = struct.Struct("<i")
_INITIAL_CAPACITY = 1 << 16


class RecvBuffer:
    """A receive buffer over one socket that grows only as far as the data received.

    ``limit`` bounds the capacity (the largest whole message the protocol allows).
    """

    def __init__(self, sock: socket.socket, limit: int) -> None:
        """Buffer what ``sock`` (a connected socket) receives, in at most ``limit`` bytes."""
        self.sock = sock
        self.limit = limit
        self._buf = bytearray(min(_INITIAL_CAPACITY, limit))
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0

    @property
    def available(self) -> int:
        """Bytes received and not yet consumed."""
        return self._end - self._start

    def i32(self, offset: int) -> int:
        """Read an int32 at ``offset`` past the unconsumed start (caller checked availability)."""
        return _I32.unpack_from(self._buf, self._start + offset)[0]

    def view(self, offset: int, size: int) -> memoryview:
        """A view of received bytes; valid until the next :meth:`recv_some`."""
        start = self._start + offset
        return self._view[start : start + size]

    def consume(self, size: int) -> None:
        """Drop ``size`` bytes from the front."""
        self._start += size
        if self._start == self._end:
            self._start = self._end = 0

    def recv_some(self) -> int:
        """One ``recv_into`` into the free space; raises :class:`ConnectionClosed` on EOF.

        Socket timeouts propagate as :class:`TimeoutError` (``socket.timeout``).
        """
        if self._end == len(self._buf):
            self._make_room()
        count = self.sock.recv_into(self._view[self._end :])
        if count == 0:
            raise ConnectionClosed("connection closed by peer")
        self._end += count
        return count

    def _make_room(self) -> None:
        pending = self._end - self._start
        if self._start > 0:  # compact first: the data already received moves to the front
            self._buf[:pending] = bytes(self._view[self._start : self._end])  # may overlap
            self._start, self._end = 0, pending
            if pending < len(self._buf):
                return
        if len(self._buf) >= self.limit:  # pragma: no cover - the callers' caps prevent this
            raise BonkLinkProtocolError("message larger than the protocol allows")
        grown = bytearray(min(self.limit, 2 * len(self._buf)))
        grown[:pending] = self._view[:pending]
        self._buf = grown
        self._view = memoryview(grown)


class PacketReader:
    """Reads game -> client packets: ``int32 state_len | state | int32 frame_len | frame``."""

    def __init__(self, sock: socket.socket) -> None:
        """Read from ``sock``, a connected TCP socket (blocking or not)."""
        self._rx = RecvBuffer(sock, 8 + MAX_STATE_LEN + MAX_FRAME_LEN)
        self.sock = sock

    def recv(self, timeout: float | None) -> tuple[GameState, bytes | None]:
        """Return the next ``(state, frame bytes or None)``.

        Raises :class:`TimeoutError` when no whole packet arrives within ``timeout`` seconds
        (``None`` waits forever), :class:`ConnectionClosed` on EOF and
        :class:`~metabonk_gym.errors.BonkLinkProtocolError` on a malformed packet.
        """
        rx = self._rx
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            avail = rx.available
            if avail >= 4:
                state_len = rx.i32(0)
                check_state_len(state_len)
                if avail >= 8 + state_len:
                    frame_len = rx.i32(4 + state_len)
                    check_frame_len(frame_len)
                    total = 8 + state_len + frame_len
                    if avail >= total:
                        state = decode_state(rx.view(4, state_len))
                        frame = bytes(rx.view(8 + state_len, frame_len)) if frame_len else None
                        rx.consume(total)
                        return state, frame
            _recv_before(rx, deadline)


class ActionReader:
    """Reads client -> game actions (``int32 payload_len | payload``), as the plugin does."""

    def __init__(self, sock: socket.socket) -> None:
        """Read from ``sock``, a connected TCP socket (blocking or not)."""
        self._rx = RecvBuffer(sock, 4 + MAX_ACTION_LEN)
        self.sock = sock

    def pop(self) -> Action | None:
        """Decode one buffered action, or return None when none is complete yet."""
        rx = self._rx
        if rx.available < 4:
            return None
        size = rx.i32(0)
        if size <= 0 or size > MAX_ACTION_LEN:
            raise BonkLinkProtocolError(f"bad action payload_len {size}")
        if rx.available < 4 + size:
            return None
        action = decode_action_payload(rx.view(4, size))
        rx.consume(4 + size)
        return action

    def fill(self) -> int:
        """Read what the socket has (it must be readable, or non-blocking)."""
        return self._rx.recv_some()


def _recv_before(rx: RecvBuffer, deadline: float | None) -> None:
    if deadline is None:
        rx.sock.settimeout(None)
    else:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out waiting for data")
        rx.sock.settimeout(remaining)
    rx.recv_some()


def connect_with_backoff(
    host: str,
    port: int,
    timeout: float,
    *,
    first_delay: float = 0.05,
    max_delay: float = 1.0,
) -> socket.socket:
    """Connect over TCP, retrying with exponential backoff (and jitter) for up to ``timeout`` s.

    The game may still be loading, or restarting its listener; a swarm of clients should not
    retry in lockstep, hence the jitter. Sets ``TCP_NODELAY`` like the plugin does.
    Raises :class:`ConnectionError` with the last failure when time runs out.
    """
    deadline = time.monotonic() + timeout
    delay = first_delay
    jitter = random.Random()
    while True:
        remaining = deadline - time.monotonic()
        try:
            sock = socket.create_connection((host, port), timeout=max(0.05, min(remaining, 5.0)))
        except OSError as exc:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ConnectionError(
                    f"could not connect to BonkLink at {host}:{port} within {timeout:g} s: {exc}"
                ) from exc
            time.sleep(min(remaining, delay * (0.5 + jitter.random())))
            delay = min(max_delay, delay * 2)
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
