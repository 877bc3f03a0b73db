"""Exact GBA screen decoding from VRAM: the background tile under every 8x8 screen cell and the
OAM sprites, each named by a stable token (a hash of the picture the hardware would draw).

Why: a policy or a language model reasons better about "the same door tile" than about 192
pixel values, and the GBA already holds the screen as tiles. Reading the display registers
(DISPCNT, BGxCNT, scroll, affine parameters), the tilemap screenblocks, the tile graphics, the
palettes and OAM gives the tile grid exactly, at a fraction of an env step's cost.

A token is a 31-bit hash of the 8x8 picture: the tile's 4bpp (or 8bpp) pixels after its
horizontal / vertical flips, looked up in its palette bank (transparent pixels hash as
transparent). So the same picture gets the same token wherever it sits in VRAM, in any run and
any process; a fully transparent tile is token 0. Hashes are cached per (char block, tilemap
entry) and recomputed only for tiles whose graphics or palette bank changed.

Conventions: a screen cell (row r, column c) takes the tile that covers its centre pixel
(8c + 4, 8r + 4) in the topmost background, by BG priority then BG number, whose tile there
is not fully transparent; with a fine scroll (not a multiple of 8) a cell straddles tiles and
the centre decides. Affine backgrounds (modes 1, 2) take the tile at the transformed centre.
Bitmap modes (3-5) have no tiles: their cells are hashed from the frame's pixels with the same
stable hash. Windows, blending and mosaic are ignored (they change colours, not tiles).

>>> import numpy as np
>>> snap = VramSnapshot.blank()
>>> snap.set_io16(0x000, 0x0100)          # DISPCNT: mode 0, BG0 on
>>> snap.set_io16(0x008, 31 << 8)         # BG0CNT: char block 0, screenblock 31, 256x256
>>> snap.vram[32:64] = 0x11               # tile 1: every pixel colour 1
>>> snap.set_palette(0, 1, 0x7FFF)         # BG bank 0 colour 1: white
>>> snap.vram[31 * 0x800 : 31 * 0x800 + 2] = [1, 0]  # map entry (0, 0) -> tile 1
>>> screen = VramTokenizer().decode(snap)
>>> screen.tiles.shape, bool(screen.tiles[0, 0] != 0), int(screen.tiles[0, 1])
((20, 30), True, 0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

IO_ADDRESS = 0x04000000
PALETTE_ADDRESS = 0x05000000
VRAM_ADDRESS = 0x06000000
OAM_ADDRESS = 0x07000000
IO_SIZE = 0x60  # DISPCNT .. BG3 affine parameters
PALETTE_SIZE = 0x400
VRAM_SIZE = 0x18000
OAM_SIZE = 0x400

SCREEN_W, SCREEN_H = 240, 160
CELL = 8
GRID_H, GRID_W = SCREEN_H // CELL, SCREEN_W // CELL  # 20, 30

#: OBJ sizes in pixels (width, height) by [shape][size].
OBJ_SIZES = (
    ((8, 8), (16, 16), (32, 32), (64, 64)),
    ((16, 8), (32, 8), (32, 16), (64, 32)),
    ((8, 16), (8, 32), (16, 32), (32, 64)),
)

#: Columns of `ScreenTiles.sprites`.
SPRITE_FIELDS = ("x", "y", "w", "h", "token", "tile", "palette", "priority", "oam")

_MASK64 = (1 << 64) - 1
_rng = np.random.default_rng(0x4D455441424F4E4B)  # fixed: tokens are the same in every process
#: Per-pixel multipliers (odd 64-bit constants) for the picture hash; 64 * 64 covers 64x64 sprites.
_PIXEL_KEYS = (
    _rng.integers(1, 2**63, size=64 * 64, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
).astype(np.uint64)
_NO_SALT = np.uint64(0)
_SPRITE_SALT = np.uint64(0x9E3779B97F4A7C15)
_BITMAP_SALT = np.uint64(0xC2B2AE3D27D4EB4F)
TRANSPARENT = np.uint64(0x10000)  # outside the 15-bit colour range


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping)."""
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint64(30))
        h = h * np.uint64(0xBF58476D1CE4E5B9)
        h = h ^ (h >> np.uint64(27))
        h = h * np.uint64(0x94D049BB133111EB)
        h = h ^ (h >> np.uint64(31))
    return h


def hash_pictures(colours: np.ndarray, salt: np.uint64 = _NO_SALT) -> np.ndarray:
    """Stable 31-bit tokens (>= 1) for pictures given as (n, pixels) uint64 colour values.

    >>> a = np.zeros((2, 64), np.uint64); a[1, 5] = 7
    >>> t = hash_pictures(a); bool(t[0] != t[1]), t.dtype.name
    (True, 'int32')
    """
    n, k = colours.shape
    with np.errstate(over="ignore"):
        h = (colours * _PIXEL_KEYS[:k]).sum(axis=1, dtype=np.uint64) ^ (salt + np.uint64(k))
    token = (_mix(h) >> np.uint64(33)).astype(np.int64)
    token[token == 0] = 1
    return token.astype(np.int32)


# ------------------------------------------------------------------------------ snapshot
@dataclass
class VramSnapshot:
    """The memory the display hardware reads: I/O registers, palette, VRAM, OAM (uint8 arrays)."""

    io: np.ndarray
    palette: np.ndarray
    vram: np.ndarray
    oam: np.ndarray

    @classmethod
    def blank(cls) -> VramSnapshot:
        """All zeros (writable), for tests and examples."""
        return cls(
            np.zeros(IO_SIZE, np.uint8),
            np.zeros(PALETTE_SIZE, np.uint8),
            np.zeros(VRAM_SIZE, np.uint8),
            np.zeros(OAM_SIZE, np.uint8),
        )

    def io16(self, offset: int) -> int:
        return int(self.io[offset]) | int(self.io[offset + 1]) << 8

    def set_io16(self, offset: int, value: int) -> None:
        self.io[offset : offset + 2] = (value & 0xFF, (value >> 8) & 0xFF)

    def set_palette(self, bank: int, index: int, rgb15: int, obj: bool = False) -> None:
        """Set colour `index` of 16-colour `bank` (BG, or OBJ when `obj`) to a BGR555 value."""
        offset = (0x200 if obj else 0) + (bank * 16 + index) * 2
        self.palette[offset : offset + 2] = (rgb15 & 0xFF, rgb15 >> 8)

    def set_obj(self, i: int, attr0: int, attr1: int, attr2: int) -> None:
        """Write OAM entry `i`'s three attributes."""
        words = np.array([attr0, attr1, attr2], np.uint16).view(np.uint8)
        self.oam[i * 8 : i * 8 + 6] = words


def read_snapshot(env: Any) -> VramSnapshot:
    """Read the display memory of a GBA env (`env.unwrapped.memory`) in one go.

    On the embedded mGBA core all regions come from one copy of the memory blocks (~30 us).
    """
    io, palette, vram, oam = env.unwrapped.memory.regions(
        [
            (IO_ADDRESS, IO_SIZE),
            (PALETTE_ADDRESS, PALETTE_SIZE),
            (VRAM_ADDRESS, VRAM_SIZE),
            (OAM_ADDRESS, OAM_SIZE),
        ]
    )
    return VramSnapshot(io, palette, vram, oam)


# ------------------------------------------------------------------------------ registers
@dataclass(frozen=True)
class Background:
    """One enabled background layer as the registers describe it."""

    index: int
    priority: int
    charblock: int
    screenblock: int
    bpp8: bool
    size: int
    affine: bool
    hofs: int = 0
    vofs: int = 0
    wrap: bool = False
    # affine: texture = ref + (pa, pb; pc, pd) @ screen, all 8.8 / 20.8 fixed point
    params: tuple[int, int, int, int, int, int] = (256, 0, 0, 256, 0, 0)


@dataclass(frozen=True)
class Display:
    """DISPCNT and the enabled layers, in drawing order (front first)."""

    mode: int
    obj_1d: bool
    obj_enabled: bool
    forced_blank: bool
    backgrounds: tuple[Background, ...]

    @property
    def bitmap(self) -> bool:
        return self.mode >= 3


def _s16(v: int) -> int:
    return v - 0x10000 if v & 0x8000 else v


def _s28(v: int) -> int:
    v &= 0x0FFFFFFF
    return v - 0x10000000 if v & 0x08000000 else v


def decode_display(snap: VramSnapshot) -> Display:
    """Decode DISPCNT and BGxCNT / scroll / affine registers.

    >>> s = VramSnapshot.blank(); s.set_io16(0, 0x1300); s.set_io16(8, 0x1C01); s.set_io16(10, 0x1D02)
    >>> d = decode_display(s)
    >>> [(b.index, b.priority, b.screenblock) for b in d.backgrounds], d.obj_enabled
    ([(0, 1, 28), (1, 2, 29)], True)
    """
    dispcnt = snap.io16(0)
    mode = dispcnt & 7
    layers: list[Background] = []
    if mode <= 2:
        for i in range(4):
            if not dispcnt & (0x100 << i):
                continue
            affine = (mode == 1 and i == 2) or (mode == 2 and i >= 2)
            if (mode == 1 and i == 3) or (mode == 2 and i < 2):
                continue  # not displayed in this mode
            cnt = snap.io16(0x08 + 2 * i)
            params: tuple[int, int, int, int, int, int] = (256, 0, 0, 256, 0, 0)
            if affine:
                base = 0x20 + 0x10 * (i - 2)
                pa, pb, pc, pd = (_s16(snap.io16(base + 2 * k)) for k in range(4))
                x = _s28(snap.io16(base + 8) | snap.io16(base + 10) << 16)
                y = _s28(snap.io16(base + 12) | snap.io16(base + 14) << 16)
                params = (pa, pb, pc, pd, x, y)
            layers.append(
                Background(
                    index=i,
                    priority=cnt & 3,
                    charblock=(cnt >> 2) & 3,
                    screenblock=(cnt >> 8) & 31,
                    bpp8=bool(cnt & 0x80) or affine,
                    size=cnt >> 14,
                    affine=affine,
                    hofs=snap.io16(0x10 + 4 * i) & 0x1FF,
                    vofs=snap.io16(0x12 + 4 * i) & 0x1FF,
                    wrap=bool(cnt & 0x2000),
                    params=params,
                )
            )
    layers.sort(key=lambda b: (b.priority, b.index))
    return Display(
        mode=mode,
        obj_1d=bool(dispcnt & 0x40),
        obj_enabled=bool(dispcnt & 0x1000),
        forced_blank=bool(dispcnt & 0x80),
        backgrounds=tuple(layers),
    )


# ------------------------------------------------------------------------------ maps
_CY, _CX = np.mgrid[0:GRID_H, 0:GRID_W]
_CENTRE_X = (_CX * CELL + CELL // 2).astype(np.int64)
_CENTRE_Y = (_CY * CELL + CELL // 2).astype(np.int64)


def layer_entries(snap: VramSnapshot, bg: Background) -> tuple[np.ndarray, np.ndarray]:
    """Tilemap entries (uint16, text layout: tile | hflip << 10 | vflip << 11 | bank << 12) under
    each cell centre, and a mask of cells the layer covers (affine layers without wrap end)."""
    if bg.affine:
        side = 128 << bg.size  # 128 .. 1024 px
        pa, pb, pc, pd, x0, y0 = bg.params
        tx = (x0 + pa * _CENTRE_X + pb * _CENTRE_Y) >> 8
        ty = (y0 + pc * _CENTRE_X + pd * _CENTRE_Y) >> 8
        inside = (tx >= 0) & (tx < side) & (ty >= 0) & (ty < side)
        if bg.wrap:
            tx, ty = tx % side, ty % side
            inside = np.ones_like(inside)
        else:
            tx, ty = np.clip(tx, 0, side - 1), np.clip(ty, 0, side - 1)
        address = bg.screenblock * 0x800 + (ty >> 3) * (side >> 3) + (tx >> 3)
        address = np.minimum(address, VRAM_SIZE - 1)
        # affine maps hold 8-bit tile numbers, always 8bpp, no flips or banks
        return snap.vram[address].astype(np.uint16), inside
    width = 512 if bg.size & 1 else 256
    height = 512 if bg.size & 2 else 256
    bx = (_CENTRE_X + bg.hofs) % width
    by = (_CENTRE_Y + bg.vofs) % height
    tx, ty = bx >> 3, by >> 3
    block = bg.screenblock + (tx >> 5) + (ty >> 5) * (width >> 8)
    address = (block * 0x800 + ((ty & 31) * 32 + (tx & 31)) * 2) % VRAM_SIZE
    entries = snap.vram[address].astype(np.uint16) | (snap.vram[address + 1].astype(np.uint16) << 8)
    return entries, np.ones(entries.shape, bool)


# ------------------------------------------------------------------------------ pictures
def _unpack_4bpp(data: np.ndarray) -> np.ndarray:
    """(n, 32) bytes -> (n, 8, 8) colour indices (low nibble is the left pixel)."""
    out = np.empty((data.shape[0], 32, 2), np.uint8)
    out[:, :, 0] = data & 0x0F
    out[:, :, 1] = data >> 4
    return out.reshape(-1, 8, 8)


def _tile_pixels(vram: np.ndarray, base: int, tiles: np.ndarray, bpp8: bool) -> np.ndarray:
    """Colour indices (n, 8, 8) of `tiles` (numbers in 32-byte units for 4bpp, 64 for 8bpp) from
    the char data at `base`; tiles past the end of the BG area read as transparent."""
    size = 64 if bpp8 else 32
    start = base + tiles.astype(np.int64) * size
    valid = start + size <= (0x10000 if base < 0x10000 else VRAM_SIZE)
    index = np.where(valid, start, 0)[:, None] + np.arange(size)
    data = vram[index]
    pixels = data.reshape(-1, 8, 8) if bpp8 else _unpack_4bpp(data)
    pixels[~valid] = 0
    return pixels


def _colours(pixels: np.ndarray, palette16: np.ndarray, bank_offset: np.ndarray) -> np.ndarray:
    """Map colour indices to BGR555 values (uint64), index 0 to TRANSPARENT."""
    flat = pixels.reshape(pixels.shape[0], -1).astype(np.int64)
    colours = palette16[flat + bank_offset[:, None]].astype(np.uint64)
    colours[flat == 0] = TRANSPARENT
    return colours


def _flip(pixels: np.ndarray, hflip: np.ndarray, vflip: np.ndarray) -> np.ndarray:
    out = pixels.copy()
    out[hflip] = out[hflip][:, :, ::-1]
    out[vflip] = out[vflip][:, ::-1, :]
    return out


# ------------------------------------------------------------------------------ screen
@dataclass
class ScreenTiles:
    """The decoded screen.

    - `tiles` int32 (20, 30): token of the front background tile per cell (0 = backdrop only);
    - `layer` int8 (20, 30): the BG number supplying it (-1 none);
    - `tile_index` int16 (20, 30): its tile number in its char block (-1 none);
    - `charblock` int8 (20, 30): that char block;
    - `sprites` int32 (n, 9): visible OAM sprites, front first, columns `SPRITE_FIELDS`;
    - `sprite_map` int32 (20, 30): token of the front sprite covering each cell's centre, unless
      a background of higher priority covers it there (0 none);
    - `sprite_cells` int16 (20, 30): its row in `sprites` (-1 none).
    """

    tiles: np.ndarray
    layer: np.ndarray
    tile_index: np.ndarray
    charblock: np.ndarray
    sprites: np.ndarray
    sprite_map: np.ndarray
    sprite_cells: np.ndarray
    mode: int = 0


_OBJ_DIMS = np.array(
    [OBJ_SIZES[min(shape, 2)][size] for shape in range(4) for size in range(4)], np.int64
)  # [shape * 4 + size] -> (w, h)


@dataclass
class VramTokenizer:
    """Decodes `VramSnapshot`s into `ScreenTiles`, caching tile and sprite hashes between calls.

    The caches are keyed on VRAM content: a tile's hashes are dropped when its 32 bytes or its
    palette bank change, sprite hashes when OBJ graphics or OBJ palettes change.
    """

    sprites: bool = True
    _tables: dict[tuple[int, bool], np.ndarray] = field(default_factory=dict)
    _sprite_cache: dict[tuple[int, int, int, bool], int] = field(default_factory=dict)
    _addresses: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    _vram: bytes | None = None
    _palette: bytes | None = None
    _io: bytes = b""
    _display: Display | None = None
    _background: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def reset(self) -> None:
        """Forget every cached hash."""
        self._tables.clear()
        self._sprite_cache.clear()
        self._vram = self._palette = None
        self._background = self._display = None
        self._io = b""

    # cache invalidation --------------------------------------------------------
    def _invalidate(self, snap: VramSnapshot) -> bool:
        """Drop the hashes of changed tiles; True when VRAM and palette are as last time."""
        vram, palette = snap.vram.tobytes(), snap.palette.tobytes()
        unchanged = vram == self._vram and palette == self._palette
        if self._vram is None or self._palette is None:
            self._tables.clear()
            self._sprite_cache.clear()
        else:
            if vram != self._vram:
                old = np.frombuffer(self._vram, np.uint64)
                changed = np.flatnonzero(
                    (snap.vram.view(np.uint64) != old).reshape(-1, 4).any(axis=1)
                )
                bg_slots = changed[changed < 0x10000 // 32]  # 32-byte tile slots
                for (cbb, bpp8), table in self._tables.items():
                    rel = bg_slots - cbb * 512
                    tiles = (rel // 2 if bpp8 else rel)[rel >= 0]
                    tiles = tiles[tiles < 1024]
                    if tiles.size:
                        table.reshape(16, 4, 1024)[:, :, tiles] = -1
                if changed.size and changed[-1] >= 0x10000 // 32:
                    self._sprite_cache.clear()
            if palette != self._palette:
                old16 = np.frombuffer(self._palette, np.uint16)
                new16 = snap.palette.view(np.uint16)
                banks = np.flatnonzero((old16[:256] != new16[:256]).reshape(16, 16).any(axis=1))
                for (_, bpp8), table in self._tables.items():
                    if bpp8 and banks.size:
                        table[:] = -1
                    elif banks.size:
                        table.reshape(16, 4, 1024)[banks] = -1
                if (old16[256:] != new16[256:]).any():
                    self._sprite_cache.clear()
        self._vram, self._palette = vram, palette
        return unchanged

    def _table(self, charblock: int, bpp8: bool) -> np.ndarray:
        key = (charblock, bpp8)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = np.full(1 << 16, -1, np.int64)
        return table

    # backgrounds -----------------------------------------------------------------
    def _entries(self, snap: VramSnapshot, bg: Background) -> tuple[np.ndarray, np.ndarray]:
        if bg.affine:
            return layer_entries(snap, bg)
        key = (bg.screenblock, bg.size, bg.hofs, bg.vofs)
        cached = self._addresses.get(key)
        if cached is None:
            if len(self._addresses) > 4096:
                self._addresses.clear()
            width = 512 if bg.size & 1 else 256
            height = 512 if bg.size & 2 else 256
            tx = ((_CENTRE_X + bg.hofs) % width) >> 3
            ty = ((_CENTRE_Y + bg.vofs) % height) >> 3
            block = bg.screenblock + (tx >> 5) + (ty >> 5) * (width >> 8)
            halfword = (block * 0x400 + (ty & 31) * 32 + (tx & 31)) % (VRAM_SIZE // 2)
            cached = self._addresses[key] = (halfword, np.ones(halfword.shape, bool))
        return snap.vram.view(np.uint16)[cached[0]], cached[1]

    def _layer_tokens(self, snap: VramSnapshot, bg: Background, entries: np.ndarray) -> np.ndarray:
        if bg.affine:  # 8-bit tile numbers; reuse the 8bpp table of that char block
            entries = entries & 0xFF
        table = self._table(bg.charblock, bg.bpp8)
        tokens = table[entries]
        missing = tokens < 0
        if missing.any():
            todo = np.unique(entries[missing])
            tiles = (todo & 0x3FF).astype(np.int64)
            pixels = _tile_pixels(snap.vram, bg.charblock * 0x4000, tiles, bg.bpp8)
            if not bg.affine:
                pixels = _flip(pixels, (todo & 0x400) != 0, (todo & 0x800) != 0)
            palette16 = snap.palette.view(np.uint16)
            bank = np.zeros(len(todo), np.int64) if bg.bpp8 else (todo >> 12).astype(np.int64) * 16
            colours = _colours(pixels, palette16, bank)
            new = hash_pictures(colours).astype(np.int64)
            new[(colours == TRANSPARENT).all(axis=1)] = 0
            table[todo] = new
            tokens = table[entries]
        return tokens

    def decode(
        self, snap: VramSnapshot, frame: np.ndarray | Callable[[], np.ndarray | None] | None = None
    ) -> ScreenTiles:
        """Decode one snapshot; `frame` (the screen, or a function returning it) is used only in
        bitmap modes 3-5."""
        unchanged = self._invalidate(snap)
        io = snap.io.tobytes()
        same_io = io == self._io and self._display is not None
        display = self._display if same_io and self._display is not None else decode_display(snap)
        if unchanged and same_io and self._background is not None and display.mode < 3:
            background = self._background
        else:
            background = self._decode_background(snap, display, frame)
            self._io, self._display, self._background = io, display, background
        tiles, layer, tile_index, charblock = (a.copy() for a in background)
        sprites = _NO_SPRITES
        sprite_map = np.zeros((GRID_H, GRID_W), np.int32)
        sprite_cells = np.full((GRID_H, GRID_W), -1, np.int16)
        if self.sprites and display.obj_enabled and not display.forced_blank:
            sprites = self._sprites(snap, display)
            if len(sprites):
                sprite_cells = self._cover(sprites, display, layer)
                tokens = np.concatenate([[0], sprites[:, 4]]).astype(np.int32)
                sprite_map = tokens[sprite_cells + 1]
        return ScreenTiles(
            tiles, layer, tile_index, charblock, sprites, sprite_map, sprite_cells, display.mode
        )

    def _decode_background(
        self,
        snap: VramSnapshot,
        display: Display,
        frame: np.ndarray | Callable[[], np.ndarray | None] | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        shape = (GRID_H, GRID_W)
        if display.bitmap and callable(frame):
            frame = frame()
        if display.bitmap and not display.forced_blank and isinstance(frame, np.ndarray):
            return (
                bitmap_tokens(frame),
                np.full(shape, 2, np.int8),
                np.full(shape, -1, np.int16),
                np.full(shape, -1, np.int8),
            )
        if display.forced_blank or display.bitmap or not display.backgrounds:
            return (
                np.zeros(shape, np.int32),
                np.full(shape, -1, np.int8),
                np.full(shape, -1, np.int16),
                np.full(shape, -1, np.int8),
            )
        tokens, entries = [], []
        for bg in display.backgrounds:
            entry, inside = self._entries(snap, bg)
            token = self._layer_tokens(snap, bg, entry)
            tokens.append(np.where(inside, token, 0))
            entries.append(entry & (0xFF if bg.affine else 0x3FF))
        all_tokens, all_entries = np.stack(tokens), np.stack(entries)
        first = (all_tokens != 0).argmax(axis=0)  # front-most layer with a visible tile
        chosen = np.take_along_axis(all_tokens, first[None], 0)[0]
        has = chosen != 0
        index = np.array([bg.index for bg in display.backgrounds], np.int8)
        blocks = np.array([bg.charblock for bg in display.backgrounds], np.int8)
        return (
            chosen.astype(np.int32),
            np.where(has, index[first], -1).astype(np.int8),
            np.where(has, np.take_along_axis(all_entries, first[None], 0)[0], -1).astype(np.int16),
            np.where(has, blocks[first], -1).astype(np.int8),
        )

    # sprites -----------------------------------------------------------------------
    @staticmethod
    def _cover(sprites: np.ndarray, display: Display, layer: np.ndarray) -> np.ndarray:
        """Per cell, the row of the front sprite covering the cell's centre pixel, unless a
        background of higher priority is on that cell (-1 none). Painted back to front."""
        cells = np.full((GRID_H, GRID_W), -1, np.int16)
        lut = np.full(5, 4, np.int8)
        for bg in display.backgrounds:
            lut[bg.index] = bg.priority
        bg_priority = lut[layer]
        row_min = bg_priority.min(axis=1).tolist()
        rows = sprites[:, :8].tolist()
        for row in range(len(rows) - 1, -1, -1):
            x, y, w, h, _, _, _, priority = rows[row]
            r0, r1 = max((y + 3) >> 3, 0), min(((y + h - 5) >> 3) + 1, GRID_H)
            c0, c1 = max((x + 3) >> 3, 0), min(((x + w - 5) >> 3) + 1, GRID_W)
            if r1 <= r0 or c1 <= c0:
                continue
            if priority <= min(row_min[r0:r1]):  # in front of every background on these rows
                cells[r0:r1, c0:c1] = row
            else:
                block = cells[r0:r1, c0:c1]
                block[bg_priority[r0:r1, c0:c1] >= priority] = row
        return cells

    def _sprites(self, snap: VramSnapshot, display: Display) -> np.ndarray:
        attrs = snap.oam.view(np.uint16).reshape(128, 4)
        # shown: affine, or regular without the hide bit; then decoded one by one in Python
        # (typically a few dozen entries: cheaper than 40 numpy calls on all 128)
        candidates = np.flatnonzero((attrs[:, 0] & 0x300) != 0x200)
        if not candidates.size:
            return _NO_SPRITES
        rows = []
        cache = self._sprite_cache
        obj_1d, bitmap = display.obj_1d, display.bitmap
        for i, (a0, a1, a2, _) in zip(candidates.tolist(), attrs[candidates].tolist()):
            shape = a0 >> 14
            if shape == 3 or a0 & 0x800:  # invalid shape, OBJ window
                continue
            w, h = OBJ_SIZES[shape][a1 >> 14]
            affine = bool(a0 & 0x100)
            box_w, box_h = (2 * w, 2 * h) if affine and a0 & 0x200 else (w, h)
            y = a0 & 0xFF
            if y + box_h > 256:
                y -= 256
            x = a1 & 0x1FF
            if x >= 256:
                x -= 512
            tile = a2 & 0x3FF
            if (
                x >= SCREEN_W
                or x + box_w <= 0
                or y >= SCREEN_H
                or y + box_h <= 0
                or (bitmap and tile < 512)
            ):
                continue  # off screen; OBJ tiles below 512 hold the bitmap in modes 3-5
            key = (a0 & 0xE300, a1 & (0xC000 if affine else 0xF000), a2 & 0xF3FF, obj_1d)
            token = cache.get(key)
            if token is None:
                token = cache[key] = self._sprite_token(
                    snap,
                    w,
                    h,
                    tile,
                    a2 >> 12,
                    bool(a0 & 0x2000),
                    bool(a1 & 0x1000) and not affine,
                    bool(a1 & 0x2000) and not affine,
                    obj_1d,
                )
            rows.append((x, y, box_w, box_h, token, tile, a2 >> 12, (a2 >> 10) & 3, i))
        if not rows:
            return _NO_SPRITES
        # front first: lower priority value, then lower OAM index
        rows.sort(key=lambda r: r[7])
        return np.array(rows, np.int32)

    @staticmethod
    def _sprite_token(
        snap: VramSnapshot,
        w: int,
        h: int,
        tile: int,
        bank: int,
        bpp8: bool,
        hflip: bool,
        vflip: bool,
        obj_1d: bool,
    ) -> int:
        tw, th = w // CELL, h // CELL
        step = 2 if bpp8 else 1
        r, c = np.mgrid[0:th, 0:tw]
        numbers = (tile + r * tw * step + c * step) if obj_1d else (tile + r * 32 + c * step)
        numbers = (numbers.ravel() & 0x3FF).astype(np.int64)
        # OBJ char data is numbered in 32-byte units from 0x10000, for 8bpp tiles too
        size = 64 if bpp8 else 32
        index = np.minimum(0x10000 + numbers[:, None] * 32 + np.arange(size), VRAM_SIZE - 1)
        data = snap.vram[index]
        pixels = data.reshape(-1, 8, 8) if bpp8 else _unpack_4bpp(data)
        picture = pixels.reshape(th, tw, 8, 8).transpose(0, 2, 1, 3).reshape(h, w)
        if hflip:
            picture = picture[:, ::-1]
        if vflip:
            picture = picture[::-1, :]
        palette16 = snap.palette.view(np.uint16)[256:]
        offset = np.zeros(1, np.int64) if bpp8 else np.array([bank * 16], np.int64)
        colours = _colours(picture.reshape(1, -1), palette16, offset)
        if (colours == TRANSPARENT).all():
            return 0
        return int(hash_pictures(colours, _SPRITE_SALT)[0])


_NO_SPRITES = np.zeros((0, len(SPRITE_FIELDS)), np.int32)


def bitmap_tokens(frame: np.ndarray) -> np.ndarray:
    """Stable tokens of the 8x8 cells of an RGB frame (bitmap modes): (20, 30) int32."""
    h, w = frame.shape[0] // CELL, frame.shape[1] // CELL
    cells = frame[: h * CELL, : w * CELL].reshape(h, CELL, w, CELL, -1).transpose(0, 2, 1, 3, 4)
    rgb = cells.reshape(h * w, CELL * CELL, -1).astype(np.uint64)
    packed = rgb[..., 0] << np.uint64(16) | (rgb[..., 1] << np.uint64(8) if rgb.shape[2] > 1 else 0)
    if rgb.shape[2] > 2:
        packed = packed | rgb[..., 2]
    return hash_pictures(packed, _BITMAP_SALT).reshape(h, w)


# ------------------------------------------------------------------------------ renderer
def bgr555_to_rgb(colours: np.ndarray) -> np.ndarray:
    """BGR555 -> uint8 RGB as the mGBA core in stable-retro outputs it (each 5-bit channel << 3)."""
    c = colours.astype(np.uint32)
    r, g, b = c & 31, (c >> 5) & 31, (c >> 10) & 31
    return (np.stack([r, g, b], axis=-1) << 3).astype(np.uint8)


def render(snap: VramSnapshot) -> np.ndarray:
    """Render a mode-0 snapshot (text BGs and regular sprites) to uint8 RGB (160, 240, 3).

    A reference renderer to check the decoder against the emulator's own screen; slow (~10 ms)
    and deliberately simple (no affine layers, windows, blending or mosaic).
    """
    display = decode_display(snap)
    palette16 = snap.palette.view(np.uint16)
    ys, xs = np.mgrid[0:SCREEN_H, 0:SCREEN_W]
    # per pixel: (priority rank, colour); rank lower = front. Sprites go before BGs of equal priority.
    best_rank = np.full((SCREEN_H, SCREEN_W), 1 << 30, np.int64)
    colour = np.full((SCREEN_H, SCREEN_W), int(palette16[0]), np.int64)
    for bg in display.backgrounds:
        if bg.affine:
            continue
        width = 512 if bg.size & 1 else 256
        height = 512 if bg.size & 2 else 256
        bx, by = (xs + bg.hofs) % width, (ys + bg.vofs) % height
        tx, ty = bx >> 3, by >> 3
        block = bg.screenblock + (tx >> 5) + (ty >> 5) * (width >> 8)
        address = (block * 0x800 + ((ty & 31) * 32 + (tx & 31)) * 2) % VRAM_SIZE
        entry = snap.vram[address].astype(np.int64) | snap.vram[address + 1].astype(np.int64) << 8
        px, py = bx & 7, by & 7
        px = np.where(entry & 0x400, 7 - px, px)
        py = np.where(entry & 0x800, 7 - py, py)
        tile = entry & 0x3FF
        if bg.bpp8:
            addr = bg.charblock * 0x4000 + tile * 64 + py * 8 + px
            index = np.where(addr < 0x10000, snap.vram[np.minimum(addr, VRAM_SIZE - 1)], 0).astype(
                np.int64
            )
            pal = index
        else:
            addr = bg.charblock * 0x4000 + tile * 32 + py * 4 + px // 2
            byte = np.where(addr < 0x10000, snap.vram[np.minimum(addr, VRAM_SIZE - 1)], 0).astype(
                np.int64
            )
            index = np.where(px & 1, byte >> 4, byte & 15)
            pal = (entry >> 12) * 16 + index
        rank = bg.priority * 8 + 4 + bg.index
        take = (index != 0) & (rank < best_rank)
        colour[take] = palette16[pal[take]]
        best_rank[take] = rank
    if display.obj_enabled:
        attrs = snap.oam.view(np.uint16).reshape(128, 4).astype(np.int64)
        for i in range(127, -1, -1):  # back to front: lower OAM index wins on ties
            a0, a1, a2 = attrs[i, 0], attrs[i, 1], attrs[i, 2]
            if a0 & 0x100 or a0 & 0x200 or (a0 >> 14) == 3 or ((a0 >> 10) & 3) >= 2:
                continue
            w, h = OBJ_SIZES[a0 >> 14][a1 >> 14]
            y = a0 & 0xFF
            y = y - 256 if y + h > 256 else y
            x = a1 & 0x1FF
            x = x - 512 if x >= 256 else x
            bpp8, tile, bank, prio = bool(a0 & 0x2000), a2 & 0x3FF, a2 >> 12, (a2 >> 10) & 3
            oy, ox = np.mgrid[0:h, 0:w]
            sx, sy = x + ox, y + oy
            on = (sx >= 0) & (sx < SCREEN_W) & (sy >= 0) & (sy < SCREEN_H)
            fx = w - 1 - ox if a1 & 0x1000 else ox
            fy = h - 1 - oy if a1 & 0x2000 else oy
            step = 2 if bpp8 else 1
            t = tile + (fy >> 3) * (w // 8 * step if display.obj_1d else 32) + (fx >> 3) * step
            if bpp8:
                addr = 0x10000 + (t & 0x3FF) * 32 + (fy & 7) * 8 + (fx & 7)
                index = snap.vram[np.minimum(addr, VRAM_SIZE - 1)].astype(np.int64)
                pal = 256 + index
            else:
                addr = 0x10000 + (t & 0x3FF) * 32 + (fy & 7) * 4 + (fx & 7) // 2
                byte = snap.vram[np.minimum(addr, VRAM_SIZE - 1)].astype(np.int64)
                index = np.where(fx & 1, byte >> 4, byte & 15)
                pal = 256 + bank * 16 + index
            rank = prio * 8
            take = on & (index != 0)
            ty_, tx_ = sy[take], sx[take]
            front = rank <= best_rank[ty_, tx_]
            colour[ty_[front], tx_[front]] = palette16[pal[take][front]]
            best_rank[ty_[front], tx_[front]] = rank
    return bgr555_to_rgb(colour)
