"""Savestates of the SkyEmu backend: a SkyEmu state image plus what it takes to land exactly.

SkyEmu's `/load` restores a state and then emulates one frame, so a state loaded is one frame
later than when it was saved. The backend therefore keeps, for every savestate, SkyEmu's image
of the frame *before*, the buttons held during the missing frame, and the RAM writes made after
it: loading sets those buttons, `/load`s the image (SkyEmu runs the missing frame) and replays
the writes, landing on exactly the saved moment. `kind="power_on"` means "the ROM just loaded"
(`/load_rom`), which needs no image. `replay` holds the steps and writes made after that moment,
replayed on loading: saving never rewinds the running game, so it never changes it.

The bytes are `MAGIC`, a JSON header and the image; `GBAEnv.save_state(path)` gzips them into a
`.state` file like any other backend's state. stable-retro `.state` files hold mGBA states, which
SkyEmu cannot read: `unpack_state` says so and names the fix.

>>> cp = Checkpoint("image", b"PNG...", buttons=1, writes=((0x02000008, b"\\x05"),), rom_sha1="ab")
>>> unpack_state(pack_state(cp)) == cp
True
>>> later = cp.then([("step", 3, 0), ("write", 0x02000008, b"\\x01")])
>>> unpack_state(pack_state(later)) == later
True
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

from metabonk_gym.skyemu.errors import SkyEmuStateError

MAGIC = b"MBSKYEMU\x01"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_MAX_HEADER = 1 << 20


@dataclass(frozen=True)
class Checkpoint:
    """A machine state SkyEmu can be put back into exactly (see the module docstring)."""

    kind: str  # "power_on" or "image"
    image: bytes = b""  # SkyEmu state image of the frame before the state
    buttons: int = 0  # KEYINPUT-order mask held during the frame /load runs
    writes: tuple[tuple[int, bytes], ...] = field(default=())  # RAM writes after that frame
    rom_sha1: str = ""
    #: ("step", frames, buttons) and ("write", address, data) after the writes, replayed on load.
    replay: tuple[tuple[str, int, Any], ...] = field(default=())

    def base(self) -> Checkpoint:
        """The same checkpoint without its replay."""
        return Checkpoint(self.kind, self.image, self.buttons, self.writes, self.rom_sha1)

    def then(self, ops: list[tuple[str, int, Any]]) -> Checkpoint:
        """The same checkpoint followed by more operations to replay."""
        return Checkpoint(
            self.kind, self.image, self.buttons, self.writes, self.rom_sha1, (*self.replay, *ops)
        )

    def with_writes(self, writes: list[tuple[int, bytes]]) -> Checkpoint:
        """The same checkpoint followed by more RAM writes."""
        return Checkpoint(
            self.kind, self.image, self.buttons, (*self.writes, *writes), self.rom_sha1, self.replay
        )


def pack_state(checkpoint: Checkpoint) -> bytes:
    """Serialise a checkpoint as the opaque bytes `save_state()` returns."""
    header = json.dumps(
        {
            "kind": checkpoint.kind,
            "buttons": checkpoint.buttons,
            "writes": [[address, data.hex()] for address, data in checkpoint.writes],
            "rom_sha1": checkpoint.rom_sha1,
            "load_runs_one_frame": True,
            "replay": [
                ["s", a, b] if kind == "step" else ["w", a, bytes(b).hex()]
                for kind, a, b in checkpoint.replay
            ],
        },
        separators=(",", ":"),
    ).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + checkpoint.image


def unpack_state(state: bytes) -> Checkpoint:
    """Parse `pack_state` bytes; a bare SkyEmu state image is taken as it is (one frame later)."""
    if state.startswith(PNG_SIGNATURE):
        return Checkpoint("image", bytes(state), buttons=0, writes=(), rom_sha1="")
    if not state.startswith(MAGIC):
        if len(state) >= 4 and state[3] == 0x01 and state[0] < 0x20:
            raise SkyEmuStateError(
                "this is a stable-retro savestate (an mGBA core state), which SkyEmu cannot load: "
                "SkyEmu has its own PNG-carried states. Use a named start instead (state='room1', "
                "'start', 'wave5'... work on every backend, see env.unwrapped.integration.state_names()), "
                "or a state saved from a SkyEmu env with env.unwrapped.save_state(path)"
            )
        raise SkyEmuStateError(
            f"not a savestate of the SkyEmu backend (starts {bytes(state[:12])!r}); make one with "
            "env.unwrapped.save_state(path) on a backend='skyemu' env"
        )
    offset = len(MAGIC)
    if len(state) < offset + 4:
        raise SkyEmuStateError("SkyEmu savestate is truncated")
    (length,) = struct.unpack_from("<I", state, offset)
    if length > _MAX_HEADER or len(state) < offset + 4 + length:
        raise SkyEmuStateError("SkyEmu savestate is truncated or corrupt (bad header length)")
    try:
        header = json.loads(state[offset + 4 : offset + 4 + length])
        kind = str(header["kind"])
        writes = tuple((int(a), bytes.fromhex(d)) for a, d in header["writes"])
        replay = tuple(
            ("step", int(a), int(b)) if op == "s" else ("write", int(a), bytes.fromhex(b))
            for op, a, b in header.get("replay", ())
            if op in ("s", "w")
        )
        checkpoint = Checkpoint(
            kind,
            bytes(state[offset + 4 + length :]),
            int(header["buttons"]),
            writes,
            str(header["rom_sha1"]),
            replay,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise SkyEmuStateError(f"SkyEmu savestate header is corrupt: {exc}") from exc
    if kind not in ("power_on", "image") or (kind == "image" and not checkpoint.image):
        raise SkyEmuStateError(f"SkyEmu savestate of unknown kind {kind!r} or without its image")
    return checkpoint
