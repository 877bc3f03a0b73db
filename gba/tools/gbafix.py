"""Finish a raw GBA binary: header complement check, then pad with 0xFF to 512 KiB.

The padding matters: the mGBA 0.7 core in stable-retro guesses that a small ROM (<= 256 KiB) that
refers to EWRAM is a multiboot image and runs it from the wrong place (a white screen). Usage:
python3 gbafix.py in.bin out.gba
"""

from __future__ import annotations

import sys
from pathlib import Path

PADDED_SIZE = 512 * 1024


def fix(data: bytes) -> bytes:
    rom = bytearray(data)
    if len(rom) > PADDED_SIZE:
        raise SystemExit(f"ROM is {len(rom)} bytes, more than {PADDED_SIZE}")
    check = 0
    for b in rom[0xA0:0xBD]:
        check = (check - b) & 0xFF
    rom[0xBD] = (check - 0x19) & 0xFF
    rom += b"\xff" * (PADDED_SIZE - len(rom))
    return bytes(rom)


if __name__ == "__main__":
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    dst.write_bytes(fix(src.read_bytes()))
