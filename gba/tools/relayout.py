"""Copy a bundled game's sources with its RAM laid out differently: GameState's fields shuffled
and padded (seeded), so that no address of the shipped integration holds in the rebuilt ROM.

The RAM-search figures of issue 24 (`metabonk bench integrate`) run on such a build: nothing
about where a variable lives is known in advance. The header (magic, frame, seed, cmd; the host
command interface) stays first, as gba/README.md requires; every other field moves, and padding
arrays of 1-48 bytes go in between. The offsets the compiler will use are computed here (natural
alignment) and checked by `_Static_assert`s written into the copied header, and written to
OUT/layout.json (name -> {address, type, shape}) for the figures' ground truth. Usage:

    python3 tools/relayout.py bonkquest OUT --seed 1   # then compile OUT/*.c (make relaid)

The shipped ROMs are never touched.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
from pathlib import Path

EWRAM = 0x02000000
CTYPES = {
    "u8": (1, "|u1"),
    "s8": (1, "|i1"),
    "u16": (2, "<u2"),
    "s16": (2, "<i2"),
    "u32": (4, "<u4"),
    "s32": (4, "<i4"),
}
HEADER_BYTES = 16
FIELD = re.compile(r"^\s*(u8|s8|u16|s16|u32|s32) ([^;]+);")


def _names(decl: str, defines: dict[str, int]) -> list[tuple[str, list[int]]]:
    """`a, b` or `x[N][M]` -> [(name, shape)]."""
    out = []
    for part in decl.split(","):
        m = re.fullmatch(r"\s*(\w+)((?:\[\w+\])*)\s*", part)
        assert m, f"cannot parse field {part!r}"
        dims = [int(d) if d.isdigit() else defines[d] for d in re.findall(r"\[(\w+)\]", m[2])]
        out.append((m[1], dims))
    return out


def relayout(header: str, seed: int) -> tuple[str, dict[str, dict]]:
    """The header text with GameState shuffled and padded, and the new layout."""
    defines = {m[1]: int(m[2]) for m in re.finditer(r"#define (\w+) (\d+)u?\b", header)}
    start = header.index("typedef struct {\n    BonkHeader hdr;")
    body_start = header.index("\n", header.index("BonkHeader hdr;", start)) + 1
    end = header.index("} GameState;", start)
    lines = [ln for ln in header[body_start:end].splitlines() if ln.strip()]
    fields = [ln.split("/*")[0].rstrip() for ln in lines]
    for ln in fields:
        assert FIELD.match(ln), f"cannot parse: {ln!r}"
    rng = random.Random(seed)
    rng.shuffle(fields)
    out_fields: list[str] = []
    for i, ln in enumerate(fields):
        out_fields.append(f"    u8 relay_pad{i}[{rng.randint(1, 48)}];")
        out_fields.append("    " + ln.strip())
    layout: dict[str, dict] = {}
    offset = HEADER_BYTES
    for ln in out_fields:
        m = FIELD.match(ln)
        assert m
        size, type_ = CTYPES[m[1]]
        for name, shape in _names(m[2], defines):
            offset = (offset + size - 1) // size * size
            count = 1
            for d in shape:
                count *= d
            if not name.startswith("relay_pad"):
                layout[name] = {"address": EWRAM + offset, "type": type_, "shape": shape}
            offset += size * count
    asserts = [
        f"_Static_assert(__builtin_offsetof(GameState, {name}) == {spec['address'] - EWRAM}, "
        f'"relayout {name}");'
        for name, spec in layout.items()
    ]
    struct = "\n".join(out_fields) + "\n"
    text = header[:body_start] + struct + header[end:]
    # the shipped layout's own checks no longer hold: drop them, check the new one instead
    text = "\n".join(
        ln for ln in text.splitlines() if not re.match(r"\s*(_Static_assert\(|CHECK_OFFSET\()", ln)
    )
    guard = text.rindex("#endif")
    text = text[:guard] + "\n".join(asserts) + "\n\n" + text[guard:]
    return text + "\n", layout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game", help="the game's folder under gba/ (bonkquest, bonkarena)")
    parser.add_argument("out", type=Path, help="where the relaid sources and layout.json go")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    source = Path(__file__).resolve().parents[1] / args.game
    args.out.mkdir(parents=True, exist_ok=True)
    for path in [*source.glob("*.c"), *source.glob("*.h")]:
        shutil.copy(path, args.out / path.name)
    text, layout = relayout((source / "game.h").read_text(), args.seed)
    (args.out / "game.h").write_text(text)
    (args.out / "layout.json").write_text(json.dumps(layout, indent=1) + "\n")


if __name__ == "__main__":
    main()
