"""`.state` files: a gzipped core state, as stable-retro writes them, plus this project's checksum.

A file this project writes carries the SHA-256 of the state it holds in a gzip header extra
field (subfield `MB`), which gzip readers, stable-retro's included, skip: the files stay plain
stable-retro savestates. Reading one verifies the checksum; a file without it (made elsewhere, or
changed since) is *unverified*, and the env tries it in a throwaway process before its emulator
loads it (`metabonk_gym.gba.backends.probe`). Decompression stops at the core's state size, so a
small file that would inflate to gigabytes is refused after reading a few hundred kilobytes.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "x.state"
>>> write_state_file(path, b"core state")
>>> read_state(path, max_bytes=100)
StateFile(state=b'core state', verified=True)
>>> import gzip; _ = path.write_bytes(gzip.compress(b"core state"))
>>> read_state(path, max_bytes=100).verified
False
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path
from typing import NamedTuple

from metabonk_gym.errors import CorruptSavestateError, MissingFolderError
from metabonk_gym.utils import atomic_write_bytes

#: gzip extra-field subfield id of this project's checksum: "MB", version byte, SHA-256.
SUBFIELD = b"MB"
VERSION = 1
#: Extra bytes a state may inflate to beyond the size the caller expects (then refused).
MARGIN = 4096
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_FTEXT, _FHCRC, _FEXTRA, _FNAME, _FCOMMENT = 1, 2, 4, 8, 16


class StateFile(NamedTuple):
    """A state read from a file: its bytes and whether this project's checksum vouched for them."""

    state: bytes
    verified: bool


def encode_state(state: bytes) -> bytes:
    """The bytes of a `.state` file holding `state`: gzip with the checksum in its header.

    >>> import gzip; gzip.decompress(encode_state(b"abc"))
    b'abc'
    """
    payload = bytes([VERSION]) + hashlib.sha256(state).digest()
    extra = SUBFIELD + struct.pack("<H", len(payload)) + payload
    # magic, deflate, FEXTRA, mtime 0 (reproducible files), max compression, OS unknown
    header = b"\x1f\x8b\x08" + bytes([_FEXTRA]) + bytes(4) + b"\x02\xff"
    header += struct.pack("<H", len(extra)) + extra
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = deflate.compress(state) + deflate.flush()
    trailer = struct.pack("<II", zlib.crc32(state), len(state) & 0xFFFFFFFF)
    return header + body + trailer


def write_state_file(path: str | Path, state: bytes) -> None:
    """Write `state` to `path` as a checksummed `.state` file, atomically. The folder must exist
    (a typo in a path should not create folders)."""
    path = Path(path).expanduser()
    if not path.parent.is_dir():
        raise MissingFolderError(
            f"cannot save the state to {path}: the folder {path.parent} does not exist; create "
            "it first or choose another path"
        )
    atomic_write_bytes(path, encode_state(state))


def _checksum(raw: bytes, where: Path) -> bytes | None:
    """The SHA-256 this project wrote into the gzip header, or None when there is none."""
    if len(raw) < 10 or raw[:3] != b"\x1f\x8b\x08":
        raise CorruptSavestateError(
            f"savestate {where} is not a gzipped core state (no gzip header); re-create it with "
            "env.unwrapped.save_state(path)"
        )
    if not raw[3] & _FEXTRA or len(raw) < 12:
        return None
    (xlen,) = struct.unpack_from("<H", raw, 10)
    extra, at = raw[12 : 12 + xlen], 0
    while at + 4 <= len(extra):
        sid, (length,) = extra[at : at + 2], struct.unpack_from("<H", extra, at + 2)
        data = extra[at + 4 : at + 4 + length]
        if sid == SUBFIELD and len(data) == 33 and data[0] == VERSION:
            return data[1:]
        at += 4 + length
    return None


def inflate(raw: bytes, max_bytes: int, where: Path | str = "savestate") -> bytes:
    """Decompress gzip `raw`, refusing anything that inflates to more than `max_bytes`.

    >>> import gzip; inflate(gzip.compress(bytes(10)), 100)
    b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00'
    >>> inflate(gzip.compress(bytes(1000)), 100)
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.CorruptSavestateError: savestate inflates to more than 100 bytes, ...
    """
    out = bytearray()
    data = raw
    while data:
        decoder = zlib.decompressobj(31)  # gzip, with its CRC-32 and length checked
        try:
            out += decoder.decompress(data, max_bytes + 1 - len(out))
            if len(out) > max_bytes:
                raise CorruptSavestateError(
                    f"{where} inflates to more than {max_bytes} bytes, more than any state of "
                    "this emulator: refused (a corrupt file or a decompression bomb)"
                )
            if not decoder.eof:
                raise CorruptSavestateError(f"{where} is truncated (the gzip stream ends early)")
        except zlib.error as exc:
            raise CorruptSavestateError(
                f"{where} is not a gzipped core state ({exc}); re-create it with "
                "env.unwrapped.save_state(path)"
            ) from exc
        data = decoder.unused_data.lstrip(b"\x00")  # more gzip members, or padding
    return bytes(out)


def read_state(path: str | Path, max_bytes: int) -> StateFile:
    """Read a `.state` file: the state (at most `max_bytes`) and whether its checksum held."""
    path = Path(path).expanduser()
    try:
        with open(path, "rb") as handle:
            # deflate never grows data by more than a few per cent: a bigger file is no state
            raw = handle.read(max_bytes + max_bytes // 8 + 65536 + 1)
            if handle.read(1) or len(raw) > max_bytes + max_bytes // 8 + 65536:
                raise CorruptSavestateError(
                    f"savestate {path} is larger than any compressed state of this emulator "
                    f"({max_bytes} bytes uncompressed at most): refused"
                )
    except FileNotFoundError:
        raise CorruptSavestateError(f"savestate file not found: {path}") from None
    except IsADirectoryError:
        raise CorruptSavestateError(f"savestate {path} is a folder, not a file") from None
    if raw.startswith(PNG_SIGNATURE):  # a SkyEmu state image: that backend reads it
        return StateFile(raw, False)
    digest = _checksum(raw, path)
    state = inflate(raw, max_bytes, f"savestate {path}")
    return StateFile(state, digest is not None and hashlib.sha256(state).digest() == digest)
