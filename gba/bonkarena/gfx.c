/* BonkArena graphics: palettes, tiles, the arena map with the HUD rows (BG1), the menu and
 * end boxes (BG0), sprites. BG1 (priority 2) holds the arena, the HUD on row 0 and the XP bar
 * on row 19. BG0 (priority 0) is switched on only while a box is shown; sprites sit between
 * them (priority 1) so the box covers them. Both backgrounds read char block 0.
 * Speed: mGBA redraws only what changed, and every enabled background costs a full pass over
 * each line, so during play a single background is on and nothing is written that did not
 * change (see draw_hud). */
#include "game.h"
#include "art.h"
#include "font.h"

#define SB_BOX 28   /* BG0 map: menu / end boxes */
#define SB_ARENA 29 /* BG1 map: arena, HUD (row 0) and XP bar (row 19) */

/* OAM slots: the player on top, then projectiles, enemies, gems */
#define OAM_PLAYER 0
#define OAM_PROJ 1
#define OAM_ENEMY (OAM_PROJ + MAX_PROJ)
#define OAM_GEM (OAM_ENEMY + MAX_ENEMIES)

/* BG palette banks: 0 arena, 1..4 text colours (index 1 ink, index 2 HUD background) */
#define PAL_WHITE 1
#define PAL_YELLOW 2
#define PAL_RED 3
#define PAL_GREEN 4

static const u16 bg_palette[16] = {
    RGB15(9, 8, 8),    /* 0 backdrop: the floor */
    RGB15(9, 8, 8),    /* 1 floor */
    RGB15(12, 11, 11), /* 2 floor highlight */
    RGB15(6, 5, 6),    /* 3 floor seam */
    RGB15(8, 17, 5),   /* 4 grass */
    RGB15(4, 11, 3),   /* 5 dark grass */
    RGB15(10, 7, 13),  /* 6 brick */
    RGB15(15, 12, 18), /* 7 brick highlight */
    RGB15(5, 3, 8),    /* 8 mortar */
    RGB15(31, 16, 2),  /* 9 flame */
    RGB15(31, 29, 10), /* a flame core */
    RGB15(2, 3, 8),    /* b HUD */
    RGB15(8, 28, 31),  /* c XP bar */
    RGB15(5, 6, 11),   /* d XP bar empty */
    RGB15(3, 2, 4),    /* e shadow */
    RGB15(31, 31, 31), /* f white */
};

static const u16 text_ink[5] = {0, RGB15(31, 31, 31), RGB15(31, 28, 6), RGB15(31, 9, 8), RGB15(10, 31, 12)};

static const u16 obj_palette[16] = {
    0,
    RGB15(2, 2, 4),    /* k outline */
    RGB15(31, 31, 31), /* w white */
    RGB15(31, 22, 16), /* s skin */
    RGB15(6, 12, 28),  /* b blue */
    RGB15(3, 5, 16),   /* B dark blue */
    RGB15(12, 28, 8),  /* g green */
    RGB15(4, 16, 4),   /* G dark green */
    RGB15(21, 9, 27),  /* p purple */
    RGB15(11, 3, 16),  /* P dark purple */
    RGB15(29, 5, 5),   /* r red */
    RGB15(16, 2, 4),   /* R dark red */
    RGB15(31, 28, 6),  /* y yellow */
    RGB15(31, 16, 2),  /* o orange */
    RGB15(20, 20, 22), /* e grey */
    RGB15(8, 28, 31),  /* c cyan */
};

/* sprite art letter -> OBJ palette index */
static int art_index(char c) {
    static const char letters[] = ".kwsbBgGpPrRyoec";
    for (int i = 0; i < 16; i++)
        if (letters[i] == c) return i;
    return 0;
}

/* One 8x8 block of character art (rows[y] + x0) as a 4bpp tile: pixel x in bits 4x..4x+3. */
static void art_tile(volatile u32 *dst, const char *const *rows, int x0, int digits) {
    for (int y = 0; y < 8; y++) {
        u32 w = 0;
        for (int x = 0; x < 8; x++) {
            char c = rows[y][x0 + x];
            u32 v = (u32)(digits ? (c <= '9' ? c - '0' : c - 'a' + 10) : art_index(c));
            w |= v << (4 * x);
        }
        dst[y] = w;
    }
}

static void load_tiles(void) {
    volatile u32 *bg = CHARBLOCK(0);
    for (int t = 0; t < ART_BG; t++) {
        int id = t < BGT_XPBAR ? t : t - BGT_XPBAR + BGT_FLOOR_TR; /* skip the XP bar tiles */
        art_tile(bg + id * 8, art_bg[t], 0, 1);
    }
    /* XP bar: n columns filled, a HUD-coloured row above and below */
    for (int n = 0; n <= 8; n++) {
        volatile u32 *dst = bg + (BGT_XPBAR + n) * 8;
        u32 row = 0;
        for (int x = 0; x < 8; x++) row |= (u32)(x < n ? 0xC : 0xD) << (4 * x);
        for (int y = 0; y < 8; y++) dst[y] = (y == 0 || y == 7) ? 0xBBBBBBBBu : row;
    }
    /* the font twice: transparent, and with colour 2 (the HUD bar) behind the glyphs */
    font_load(bg, BGT_FONT);
    for (int i = 0; i < FONT_GLYPHS * 8; i++) {
        u32 w = bg[BGT_FONT * 8 + i], o = 0;
        for (int x = 0; x < 8; x++) {
            u32 v = (w >> (4 * x)) & 0xF;
            o |= (v ? v : 2u) << (4 * x);
        }
        bg[BGT_FONT_OPAQUE * 8 + i] = o;
    }
    /* sprites: 16x16 as 4 tiles (top-left, top-right, bottom-left, bottom-right) */
    for (int s = 0; s < ART_SPRITES16; s++) {
        volatile u32 *dst = OBJ_TILES + s * 4 * 8;
        art_tile(dst, art_sprites16[s], 0, 0);
        art_tile(dst + 8, art_sprites16[s], 8, 0);
        art_tile(dst + 16, art_sprites16[s] + 8, 0, 0);
        art_tile(dst + 24, art_sprites16[s] + 8, 8, 0);
    }
    for (int s = 0; s < ART_SPRITES8; s++) art_tile(OBJ_TILES + (OBT_PROJ + s) * 8, art_sprites8[s], 0, 0);
}

static void load_palettes(void) {
    for (int i = 0; i < 16; i++) {
        PAL_BG[i] = bg_palette[i];
        PAL_OBJ[i] = obj_palette[i];
        PAL_OBJ[16 + i] = i ? RGB15(31, 31, 31) : 0; /* bank 1: hit flash */
    }
    for (int b = 1; b <= 4; b++) {
        PAL_BG[b * 16 + 1] = text_ink[b];
        PAL_BG[b * 16 + 2] = bg_palette[0xB];
    }
}

/* The arena: HUD bar on row 0, walls around rows 1..18, the XP bar on row 19, a floor with a fixed scatter of
 * cracks, pebbles and grass (the same in every game). */
static void draw_arena(void) {
    volatile u16 *sb = SCREENBLOCK(SB_ARENA);
    for (int y = 0; y < 32; y++) {
        for (int x = 0; x < 32; x++) {
            int t;
            if (y == 0 || y == 19) t = BGT_HUD;
            else if (y == 1) t = (x % 7 == 3) ? BGT_TORCH : BGT_WALL_TOP;
            else if (y >= 19 || x == 0 || x >= 29) t = BGT_WALL;
            else if (y == 2) t = BGT_FLOOR_SHADOW;
            else if (!(x & 1) && !(y & 1)) t = BGT_FLOOR_BR;
            else if (!(x & 1)) t = BGT_FLOOR_TR;
            else if (!(y & 1)) t = BGT_FLOOR_BL;
            else { /* top-left of a slab: plain or a detail */
                u32 h = (u32)(x * 73 + y * 151) ^ (u32)(x * y * 37);
                h = (h ^ (h >> 3)) & 15;
                t = h < 2 ? BGT_FLOOR_CRACK : h < 4 ? BGT_FLOOR_PEBBLE : h < 6 ? BGT_FLOOR_GRASS : BGT_FLOOR;
            }
            sb[y * 32 + x] = SE(t, 0);
        }
    }
}

void gfx_init(void) {
    REG_DISPCNT = 0;
    load_palettes();
    load_tiles();
    draw_arena();
    map_fill(SCREENBLOCK(SB_BOX), 0, 0, 32, 32, SE(BGT_EMPTY, 0));
    oam_hide_all();
    REG_BGCNT(0) = BG_PRIO(0) | BG_CBB(0) | BG_SBB(SB_BOX) | BG_SIZE_32x32;
    REG_BGCNT(1) = BG_PRIO(2) | BG_CBB(0) | BG_SBB(SB_ARENA) | BG_SIZE_32x32;
    REG_DISPCNT = DCNT_MODE0 | DCNT_BG1 | DCNT_OBJ | DCNT_OBJ_1D;
}

/* ---- text ---------------------------------------------------------------------------- */

static u32 hud_sig0, hud_sig1, hud_sig2, xp_sig, overlay_sig; /* what the HUD and box show */

/* text in the box layer (BG0) */
static void put(int x, int y, const char *s, int pal) {
    text_put(SCREENBLOCK(SB_BOX), x, y, s, BGT_FONT_OPAQUE, pal);
}

/* text in the HUD rows of the arena layer (BG1) */
static void put_hud(int x, int y, const char *s, int pal) {
    text_put(SCREENBLOCK(SB_ARENA), x, y, s, BGT_FONT_OPAQUE, pal);
}

static char *put_str(char *b, const char *s) {
    while (*s) *b++ = *s++;
    return b;
}

static char *put_uint(char *b, u32 v) {
    char t[6];
    int k = 0;
    do {
        u32 q = (v * 0xCCCDu) >> 19; /* v / 10 for v < 65536 */
        t[k++] = (char)('0' + v - q * 10);
        v = q;
    } while (v);
    while (k) *b++ = t[--k];
    return b;
}

/* MM:SS */
static char *put_time(char *b, u32 s) {
    u32 m = (s * 1093u) >> 16; /* s / 60 for s <= 300 */
    u32 r = s - m * 60;
    if (m < 10) *b++ = '0';
    b = put_uint(b, m);
    *b++ = ':';
    *b++ = (char)('0' + ((r * 0xCCCDu) >> 19));
    *b++ = (char)('0' + r - ((r * 0xCCCDu) >> 19) * 10);
    return b;
}

/* Row 0: "HP60/60 LV1 K0" and, right-aligned, "W1 00:00"; written only when it changes. */
static void draw_hud(void) {
    u32 sig0 = (u32)g.hp | (u32)g.max_hp << 16;
    u32 sig1 = (u32)g.level | (u32)g.kills << 16;
    u32 sig2 = (u32)g.time_s | (u32)g.wave << 16;
    if (sig0 == hud_sig0 && sig1 == hud_sig1 && sig2 == hud_sig2) return;
    hud_sig0 = sig0;
    hud_sig1 = sig1;
    hud_sig2 = sig2;
    char line[31], *b = line;
    b = put_str(b, "HP");
    b = put_uint(b, g.hp);
    *b++ = '/';
    b = put_uint(b, g.max_hp);
    *b = 0;
    int hp_pal = g.hp * 4 <= g.max_hp ? PAL_RED : PAL_WHITE;
    put_hud(0, 0, line, hp_pal);
    int x = (int)(b - line);
    b = line;
    b = put_str(b, " LV");
    b = put_uint(b, g.level);
    b = put_str(b, " K");
    b = put_uint(b, g.kills);
    while (b < line + 22 - x) *b++ = ' ';
    b = put_str(b, "W");
    *b++ = (char)('0' + g.wave);
    *b++ = ' ';
    b = put_time(b, g.time_s);
    *b = 0;
    put_hud(x, 0, line, PAL_WHITE);
}

/* Row 19: "XP" and a 28-tile bar. */
static void draw_xp(void) {
    u32 sig = (u32)g.xp | (u32)g.xp_next << 16;
    if (sig == xp_sig) return;
    xp_sig = sig;
    volatile u16 *sb = SCREENBLOCK(SB_ARENA);
    put_hud(0, 19, "XP", PAL_GREEN);
    u32 fill = g.xp >= g.xp_next ? 224 : (u32)g.xp * 224 / g.xp_next;
    for (int i = 0; i < 28; i++) {
        int n = (int)fill - i * 8;
        if (n < 0) n = 0;
        if (n > 8) n = 8;
        sb[19 * 32 + 2 + i] = SE(BGT_XPBAR + n, 0);
    }
}

static const char *const upgrade_names[NUM_UPGRADES] = {
    "DAMAGE +1", "FIRE RATE +", "SPEED +", "MAX HP +15", "HEAL 50%", "MAGNET +12", "MULTISHOT +1", "ARMOR +1",
};

#define BOX_X 3
#define BOX_W 24

static void box(int y0, int h) {
    for (int y = y0; y < y0 + h; y++) put(BOX_X, y, "                        ", PAL_WHITE);
}

static void draw_menu(void) {
    box(5, 11);
    put(BOX_X + 7, 6, "LEVEL UP!", PAL_YELLOW);
    for (int k = 0; k < 3; k++) {
        int sel = k == g.menu_cursor, id = g.menu_options[k];
        char line[25], *b = line;
        b = put_str(b, sel ? "> " : "  ");
        b = put_str(b, upgrade_names[id]);
        while (b < line + 17) *b++ = ' ';
        if (id != UPG_HEAL) {
            b = put_str(b, "LV");
            b = put_uint(b, g.upgrades[id] + 1u);
        }
        *b = 0;
        put(BOX_X + 1, 8 + 2 * k, line, sel ? PAL_YELLOW : PAL_WHITE);
    }
    put(BOX_X + 2, 14, "UP/DOWN MOVE  A PICK", PAL_GREEN);
}

static void draw_end(int won) {
    box(6, 7);
    if (won)
        put(BOX_X + 3, 7, "YOU SURVIVED 5:00!", PAL_YELLOW);
    /* "TIME 05:00  KILLS 9999" */
    else
        put(BOX_X + 7, 7, "GAME OVER", PAL_RED);
    char line[25], *b = line;
    b = put_str(b, "TIME ");
    b = put_time(b, g.time_s);
    b = put_str(b, "  KILLS ");
    b = put_uint(b, g.kills);
    *b = 0;
    put(BOX_X + 2, 9, line, PAL_WHITE);
    b = put_str(line, "LEVEL ");
    b = put_uint(b, g.level);
    *b = 0;
    put(BOX_X + 2, 11, line, PAL_WHITE);
}

static void draw_overlay(void) {
    u32 sig = 0;
    if (g.won) sig = 1;
    else if (g.lost) sig = 2;
    else if (g.menu_open)
        sig = 3 | (u32)g.menu_cursor << 2 | (u32)g.menu_options[0] << 4 | (u32)g.menu_options[1] << 8 |
              (u32)g.menu_options[2] << 12 | (u32)g.level << 16;
    if (sig == overlay_sig) return;
    overlay_sig = sig;
    map_fill(SCREENBLOCK(SB_BOX), 0, 1, 32, 18, SE(BGT_EMPTY, 0));
    if (sig == 1 || sig == 2) draw_end(sig == 1);
    else if (sig) draw_menu();
    REG_DISPCNT = DCNT_MODE0 | DCNT_BG1 | DCNT_OBJ | DCNT_OBJ_1D | (sig ? DCNT_BG0 : 0);
}

/* Forget what BG0 shows (a new game): everything is drawn again. */
void gfx_reset(void) {
    hud_sig0 = hud_sig1 = hud_sig2 = xp_sig = 0xFFFFFFFFu;
    overlay_sig = 0xFFFFFFFFu;
}

/* ---- sprites --------------------------------------------------------------------------- */

static inline void spr(int i, int x, int y, int tile, int size16, int pal, int hflip) {
    volatile u16 *o = OAM + i * 4;
    o[0] = (u16)(y & 0xFF);
    o[1] = (u16)((x & 0x1FF) | (size16 ? ATTR1_SIZE_16 : ATTR1_SIZE_8) | (hflip ? ATTR1_HFLIP : 0));
    o[2] = (u16)(tile | (1 << 10) | (pal << 12)); /* priority 1: under BG0 */
}

static const u8 enemy_tiles[EK_COUNT] = {OBT_SLIME, OBT_BAT, OBT_BRUTE};

static void draw_sprites(void) {
    u32 t = g.time_frames;
    if (g.invuln & 4)
        obj_hide(OAM_PLAYER);
    else
        spr(OAM_PLAYER, g.player_x - 8, g.player_y - 8,
            OBT_PLAYER + (g.player_moving ? (int)((t >> 3) & 1) * 4 : 0), 1, 0, g.player_facing);
    for (int p = 0; p < MAX_PROJ; p++) {
        if (g.proj_life[p])
            spr(OAM_PROJ + p, g.proj_x[p] - 4, g.proj_y[p] - 4, OBT_PROJ, 0, 0, 0);
        else
            obj_hide(OAM_PROJ + p);
    }
    for (int i = 0; i < MAX_ENEMIES; i++) {
        if (g.enemy_active[i]) {
            int frame = (int)(((t >> 4) + (u32)i) & 1);
            spr(OAM_ENEMY + i, g.enemy_x[i] - 8, g.enemy_y[i] - 8, enemy_tiles[g.enemy_kind[i]] + frame * 4, 1,
                g.enemy_flash[i] ? 1 : 0, g.player_x < g.enemy_x[i]);
        } else {
            obj_hide(OAM_ENEMY + i);
        }
    }
    for (int i = 0; i < MAX_GEMS; i++) {
        if (g.gem_value[i])
            spr(OAM_GEM + i, g.gem_x[i] - 4, g.gem_y[i] - 4, g.gem_value[i] >= 3 ? OBT_GEM_BIG : OBT_GEM, 0, 0, 0);
        else
            obj_hide(OAM_GEM + i);
    }
}

void gfx_draw(void) {
    draw_sprites();
    draw_overlay();
    draw_hud();
    draw_xp();
}
