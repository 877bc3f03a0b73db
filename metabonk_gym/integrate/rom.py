"""What a GBA ROM's cartridge header says (title, game code, maker) and whether it is one at all.

`metabonk integrate new` reads it to name a game folder, and refuses a file that is not a GBA
ROM in one line before anything is written: too small for a header, no branch at its entry
point, or the fixed byte 0x96 missing at 0xB2 (GBATEK's cartridge header).

>>> header = bytearray(0xC0); header[3] = 0xEA; header[0xB2] = 0x96
>>> header[0xA0:0xA9] = b"BONKQUEST"; header[0xAC:0xB0] = b"BQST"
>>> info = parse_header(bytes(header) + bytes(64), "x.gba")
>>> info.title, info.code, info.folder_name
('BONKQUEST', 'BQST', 'Bonkquest')
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from metabonk_gym.errors import IntegrateError
from metabonk_gym.utils import printable

HEADER_BYTES = 0xC0
#: The largest GBA ROM (32 MiB); anything bigger is not one.
MAX_ROM_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class RomInfo:
    """A GBA ROM's header fields and SHA-1."""

    path: Path
    title: str
    code: str
    maker: str
    sha1: str
    size: int

    @property
    def folder_name(self) -> str:
        """A folder name from the title (`BONK QUEST` -> `BonkQuest`), else the file name."""
        words = re.findall(r"[A-Za-z0-9]+", self.title) or [self.path.stem]
        return "".join(w[:1].upper() + w[1:].lower() for w in words)

    def describe(self) -> str:
        """The header's title and game code for a person (quoted, so control bytes show escaped;
        blank fields said in words: many homebrew ROMs leave them empty).

        >>> RomInfo(Path("x.gba"), "", "", "", "0" * 40, 0).describe()
        'no title or game code in its header'
        >>> RomInfo(Path("x.gba"), "HATWIZARD", "HATW", "GC", "0" * 40, 0).describe()
        "title 'HATWIZARD', game code 'HATW'"
        """
        parts = [
            f"{label} {value!r}"
            for label, value in (("title", self.title), ("game code", self.code))
            if value
        ]
        return ", ".join(parts) if parts else "no title or game code in its header"


def parse_header(data: bytes, where: str | Path) -> RomInfo:
    """Check that `data` is a GBA ROM and read its header (`where` names it in errors)."""
    if len(data) < HEADER_BYTES:
        raise IntegrateError(
            f"{where} is not a GBA ROM: {len(data)} bytes, too small for the 192-byte cartridge header"
        )
    if len(data) > MAX_ROM_BYTES:
        raise IntegrateError(f"{where} is not a GBA ROM: {len(data)} bytes, more than 32 MiB")
    if data[3] != 0xEA or data[0xB2] != 0x96:
        raise IntegrateError(
            f"{where} is not a GBA ROM: no ARM branch at its entry point or no fixed byte 0x96 at "
            "0xB2 of the cartridge header; give the .gba file you dumped from your cartridge"
        )

    def text(lo: int, hi: int) -> str:
        # control bytes (ESC sequences) would act on the terminal that prints the title
        return printable(data[lo:hi].split(b"\0")[0].decode("ascii", "replace")).strip()

    return RomInfo(
        Path(where),
        text(0xA0, 0xAC),
        text(0xAC, 0xB0),
        text(0xB0, 0xB2),
        hashlib.sha1(data).hexdigest(),
        len(data),
    )


def read_rom(path: str | Path) -> RomInfo:
    """The header of the ROM at `path` (a one-line error for a missing file or not a ROM)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise IntegrateError(f"ROM file not found: {path}")
    if path.stat().st_size > MAX_ROM_BYTES:
        raise IntegrateError(f"{path} is not a GBA ROM: more than 32 MiB")
    return parse_header(path.read_bytes(), path)
