"""Exact VRAM decoding: synthetic display memory for each register and layout rule, then the real
games, where a reference renderer built on the same decoding must reproduce the emulator's
screen pixel for pixel."""

from __future__ import annotations

import numpy as np
import pytest
from metabonk_gym.wrappers.vram import (
    GRID_H,
    GRID_W,
    SPRITE_FIELDS,
    VramSnapshot,
    VramTokenizer,
    decode_display,
    read_snapshot,
    render,
)

SB = 31  # screenblock used by the synthetic layouts


def _tile(snap: VramSnapshot, index: int, rows: list[list[int]], charblock: int = 0) -> None:
    """Write a 4bpp tile from 8 rows of 8 colour indices."""
    data = np.zeros(32, np.uint8)
    for y, row in enumerate(rows):
        for x, v in enumerate(row):
            data[y * 4 + x // 2] |= (v & 15) << (4 * (x & 1))
    base = charblock * 0x4000 + index * 32
    snap.vram[base : base + 32] = data


def _entry(snap: VramSnapshot, x: int, y: int, value: int, sb: int = SB) -> None:
    address = sb * 0x800 + (y * 32 + x) * 2
    snap.vram[address : address + 2] = (value & 0xFF, value >> 8)


def _pattern(seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 16, (8, 8)).tolist()


def _bg0_snapshot(cnt_extra: int = 0) -> VramSnapshot:
    snap = VramSnapshot.blank()
    snap.set_io16(0x00, 0x0100)  # mode 0, BG0
    snap.set_io16(0x08, SB << 8 | cnt_extra)
    for i in range(16):
        snap.set_palette(0, i, i * 0x0421)
        snap.set_palette(1, i, 0x7C00 | i)
    return snap


def test_display_registers_decode() -> None:
    snap = VramSnapshot.blank()
    snap.set_io16(0x00, 0x1F40)  # mode 0, BG0..BG3, OBJ, 1D mapping
    for i, prio in enumerate((3, 1, 1, 0)):
        snap.set_io16(0x08 + 2 * i, prio | (i << 2) | ((28 + i) << 8))
    snap.set_io16(0x10 + 4 * 2, 300)  # BG2HOFS (9 bits)
    display = decode_display(snap)
    assert [bg.index for bg in display.backgrounds] == [3, 1, 2, 0]  # priority, then BG number
    bg2 = next(bg for bg in display.backgrounds if bg.index == 2)
    assert (bg2.charblock, bg2.screenblock, bg2.hofs) == (2, 30, 300)
    assert display.obj_enabled and display.obj_1d and not display.bitmap


def test_same_picture_same_token_anywhere_flips_and_banks() -> None:
    snap = _bg0_snapshot()
    pattern = _pattern(1)
    _tile(snap, 1, pattern)
    _tile(snap, 7, pattern)  # the same picture in another slot
    _tile(snap, 2, [row[::-1] for row in pattern])  # stored mirrored
    _tile(snap, 3, _pattern(2))
    _entry(snap, 0, 0, 1)
    _entry(snap, 1, 0, 7)
    _entry(snap, 2, 0, 2 | 0x400)  # mirrored again by the hflip bit: the same picture
    _entry(snap, 3, 0, 1 | 0x400)  # a mirror image: another picture
    _entry(snap, 4, 0, 1 | 1 << 12)  # palette bank 1: other colours
    _entry(snap, 5, 0, 3)
    tiles = VramTokenizer().decode(snap).tiles
    assert tiles[0, 0] == tiles[0, 1] == tiles[0, 2] != 0
    assert len({int(t) for t in tiles[0, :6]}) == 4
    assert (tiles[1:] == 0).all() and (tiles[0, 6:] == 0).all()  # tile 0 is transparent


def test_tokens_follow_vram_changes() -> None:
    snap = _bg0_snapshot()
    _tile(snap, 1, _pattern(1))
    _entry(snap, 0, 0, 1)
    tok = VramTokenizer()
    first = int(tok.decode(snap).tiles[0, 0])
    assert int(tok.decode(snap).tiles[0, 0]) == first  # cached
    _tile(snap, 1, _pattern(5))  # new graphics in the same slot
    second = int(tok.decode(snap).tiles[0, 0])
    assert second not in (0, first)
    snap.set_palette(0, 3, 0x1234)
    assert int(tok.decode(snap).tiles[0, 0]) != second  # palette change
    _tile(snap, 1, _pattern(1))
    for i in range(16):
        snap.set_palette(0, i, i * 0x0421)
    assert int(tok.decode(snap).tiles[0, 0]) == first  # back to the same picture, same token
    assert int(VramTokenizer().decode(snap).tiles[0, 0]) == first  # and in a fresh tokenizer


def test_scroll_and_wide_screenblocks() -> None:
    snap = _bg0_snapshot(cnt_extra=1 << 14)  # 512 x 256: two screenblocks side by side
    snap.set_io16(0x08, (SB - 1) << 8 | 1 << 14)
    _tile(snap, 1, _pattern(1))
    _tile(snap, 2, _pattern(2))
    _entry(snap, 31, 0, 1, sb=SB - 1)  # last column of the left block
    _entry(snap, 0, 0, 2, sb=SB)  # first column of the right block
    snap.set_io16(0x10, 31 * 8)  # scroll so that map column 31 is screen column 0
    tiles = VramTokenizer().decode(snap).tiles
    assert tiles[0, 0] != 0 and tiles[0, 1] != 0 and tiles[0, 0] != tiles[0, 1]
    # a fine scroll of 3 pixels keeps the cell's centre on the same tile
    snap.set_io16(0x10, 31 * 8 + 3)
    assert (VramTokenizer().decode(snap).tiles[0, :2] == tiles[0, :2]).all()


def test_layers_by_priority_and_transparency() -> None:
    snap = _bg0_snapshot()
    snap.set_io16(0x00, 0x0300)  # BG0 and BG1
    snap.set_io16(0x08, 1 | SB << 8)  # BG0 priority 1
    snap.set_io16(0x0A, 0 | (SB - 1) << 8)  # BG1 priority 0: in front
    _tile(snap, 1, _pattern(1))
    _tile(snap, 2, _pattern(2))
    for x in range(30):
        _entry(snap, x, 0, 1, sb=SB)
    _entry(snap, 4, 0, 2, sb=SB - 1)
    screen = VramTokenizer().decode(snap)
    assert screen.layer[0, 4] == 1 and screen.layer[0, 5] == 0  # BG1's tile 0 is transparent
    assert screen.tile_index[0, 4] == 2 and screen.tile_index[0, 5] == 1
    assert screen.tiles[0, 4] != screen.tiles[0, 5]


def test_8bpp_tiles() -> None:
    snap = _bg0_snapshot(cnt_extra=0x80)
    data = np.arange(1, 65, dtype=np.uint8)
    snap.vram[64:128] = data  # tile 1 in 64-byte units
    for i in range(256):
        snap.set_palette(i // 16, i % 16, i * 3)
    _entry(snap, 0, 0, 1)
    screen = VramTokenizer().decode(snap)
    assert screen.tiles[0, 0] != 0 and screen.tile_index[0, 0] == 1


def test_sprites_sizes_visibility_and_cells() -> None:
    snap = _bg0_snapshot()
    snap.set_io16(0x00, 0x1140)  # BG0 + OBJ, 1D
    for i in range(16):
        snap.set_palette(0, i, 0x0100 + i, obj=True)
    obj_tiles = 0x10000
    snap.vram[obj_tiles : obj_tiles + 32 * 8] = 0x11  # 8 opaque OBJ tiles
    for i in range(128):
        snap.set_obj(i, 0x0200, 0, 0)  # hidden
    snap.set_obj(0, 20, 1 << 14 | 100, 0)  # 16x16 at (100, 20): cell centres x 12..13, y 2..3
    snap.set_obj(1, 0x4000 | 156, 400, 4 | 2 << 10)  # wide 16x8 at (-112, 156): off screen
    snap.set_obj(2, 250, 1 << 14 | 4, 0)  # 16x16 at y = 250 - 256 = -6: the top edge
    snap.set_obj(3, 0x0200 | 40, 40, 0)  # hidden flag
    screen = VramTokenizer().decode(snap)
    assert screen.sprites.shape == (2, len(SPRITE_FIELDS))
    x, y, w, h, token, tile, _pal, _prio, oam = screen.sprites[0].tolist()
    assert (x, y, w, h, tile, oam) == (100, 20, 16, 16, 0, 0) and token != 0
    assert screen.sprites[1, :4].tolist() == [4, -6, 16, 16]
    assert set(map(tuple, np.argwhere(screen.sprite_cells == 0).tolist())) == {
        (2, 12),
        (2, 13),
        (3, 12),
        (3, 13),
    }
    assert (
        screen.sprite_map[screen.sprite_cells >= 0] == token
    ).all()  # the same picture: one token
    assert (screen.sprite_cells[0, 0:2] == 1).all()  # the top-edge sprite covers row 0's centres


def test_front_background_hides_sprites_behind_it() -> None:
    snap = _bg0_snapshot()
    snap.set_io16(0x00, 0x1140)
    _tile(snap, 1, _pattern(1))
    _entry(snap, 0, 0, 1)  # BG0 priority 0 at cell (0, 0)
    snap.vram[0x10000 : 0x10000 + 32] = 0x11
    for i in range(128):
        snap.set_obj(i, 0x0200, 0, 0)
    snap.set_obj(0, 0, 0, 1 << 10)  # 8x8 sprite at (0, 0), priority 1: behind BG0 there
    snap.set_obj(1, 0, 8, 1 << 10)  # at (8, 0): over a transparent BG cell
    screen = VramTokenizer().decode(snap)
    assert screen.sprite_map[0, 0] == 0 and screen.sprite_map[0, 1] != 0


# ------------------------------------------------------------------------------- real games
def _play(env, steps: int, seed: int):
    rng = np.random.default_rng(seed)
    action = 0
    for i in range(steps):
        if i % 5 == 0:
            action = int(rng.integers(env.action_space.n))
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()
        yield obs, info


@pytest.mark.parametrize("env_id", ["MetaBonk/BonkQuest-v0", "MetaBonk/BonkArena-v0"])
def test_reference_render_matches_the_emulator(make_env, env_id: str) -> None:
    env = make_env(env_id)
    env.reset(seed=3)
    tok = VramTokenizer()
    for i, (obs, _) in enumerate(_play(env, 240, seed=3)):
        snap = read_snapshot(env)
        screen = tok.decode(snap)
        if i % 20:
            continue
        assert (render(snap) == obs).all(), (
            f"step {i}: the decoded VRAM does not draw the emulator's screen"
        )
        # every background token names one picture (cells under no sprite)
        cells = (
            obs.reshape(GRID_H, 8, GRID_W, 8, 3)
            .transpose(0, 2, 1, 3, 4)
            .reshape(GRID_H * GRID_W, -1)
        )
        tokens = screen.tiles.ravel()
        touched = np.zeros((GRID_H, GRID_W), bool)  # cells any sprite overlaps, if only by a pixel
        for x, y, w, h in screen.sprites[:, :4].tolist():
            touched[max(y, 0) // 8 : (y + h + 7) // 8, max(x, 0) // 8 : (x + w + 7) // 8] = True
        free = ~touched.ravel()
        for token in np.unique(tokens[free]):
            group = cells[free & (tokens == token)]
            assert (group == group[0]).all()


def test_background_tokens_stable_until_the_room_changes(make_env) -> None:
    env = make_env("MetaBonk/BonkQuest-v0", state="room1")
    env.reset(seed=0)
    tok = VramTokenizer()
    first = tok.decode(read_snapshot(env)).tiles.copy()
    for _ in range(5):
        env.step(0)
        assert (tok.decode(read_snapshot(env)).tiles == first).all()
    env.reset(seed=0, options={"state": "room2"})
    room2 = tok.decode(read_snapshot(env)).tiles
    assert (room2 != first).sum() > 50
    # the wall and floor pictures are shared by both rooms: shared tokens
    assert len(set(np.unique(room2)) & set(np.unique(first))) >= 3
