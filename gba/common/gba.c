/* Shared helpers for the bundled games; see gba.h. */
#include "gba.h"
#include "font.h"

u16 key_cur, key_prev;

void irq_init_vblank(void) {
    REG_IME = 0;
    REG_DISPSTAT |= 0x0008; /* VBlank IRQ */
    REG_IE = 0x0001;
    REG_IF = 0xFFFF;
    REG_IME = 1;
}

void keys_poll(void) {
    key_prev = key_cur;
    key_cur = (u16)(~REG_KEYINPUT & 0x03FF);
}

u32 rng_next(u32 *state) {
    u32 x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

u32 rng_range(u32 *state, u32 n) { return n ? rng_next(state) % n : 0; }

u32 seed_mix(u32 seed) {
    u32 z = seed + 0x9E3779B9u;
    z = (z ^ (z >> 16)) * 0x85EBCA6Bu;
    z = (z ^ (z >> 13)) * 0xC2B2AE35u;
    z ^= z >> 16;
    return z ? z : 0x12345678u;
}

void mem_copy32(volatile u32 *dst, const u32 *src, int words) {
    for (int i = 0; i < words; i++) dst[i] = src[i];
}

void mem_fill32(volatile u32 *dst, u32 value, int words) {
    for (int i = 0; i < words; i++) dst[i] = value;
}

void font_load(volatile u32 *charblock, int font_tile_base) {
    mem_copy32(charblock + font_tile_base * 8, font_tiles, FONT_GLYPHS * 8);
}

static int font_index(char c) {
    const char *chars = FONT_CHARS;
    if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
    for (int i = 0; chars[i]; i++)
        if (chars[i] == c) return i;
    return 0; /* unknown characters draw as a space */
}

void text_put(volatile u16 *sb, int x, int y, const char *s, int base, int pal) {
    for (; *s && x < 32; s++, x++) sb[y * 32 + x] = SE(base + font_index(*s), pal);
}

void text_put_uint(volatile u16 *sb, int x, int y, u32 v, int width, int base, int pal) {
    char buf[11];
    for (int i = width - 1; i >= 0; i--) {
        buf[i] = (char)('0' + v % 10);
        v /= 10;
    }
    buf[width] = 0;
    text_put(sb, x, y, buf, base, pal);
}

void map_fill(volatile u16 *sb, int x, int y, int w, int h, u16 entry) {
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++) sb[j * 32 + i] = entry;
}

void oam_hide_all(void) {
    for (int i = 0; i < 128; i++) OAM[i * 4] = ATTR0_HIDE;
}

void obj_set(int i, int x, int y, int tile, int size16, int pal, int hflip) {
    volatile u16 *o = OAM + i * 4;
    o[0] = (u16)((y & 0xFF) | ATTR0_SQUARE);
    o[1] = (u16)((x & 0x1FF) | (size16 ? ATTR1_SIZE_16 : ATTR1_SIZE_8) | (hflip ? ATTR1_HFLIP : 0));
    o[2] = (u16)((tile & 0x3FF) | (pal << 12));
}

void obj_hide(int i) { OAM[i * 4] = ATTR0_HIDE; }
