/* BonkQuest graphics: palettes, pixel art, the room tilemap, the HUD, dialogue boxes, sprites.
 *
 * VRAM layout (metabonk_gym/games/BonkQuest/tiles.json names every tile):
 *   BG char block 0: tiles G_* below (0 = blank), the font (opaque) from FONT_BASE.
 *   BG0 = overlay (priority 0, screen block 30): HUD bar on row 0, dialogue box on rows 14-19.
 *   BG1 = room (priority 1, screen block 31): cell (x, y) shows room_tiles[y][x].
 *   OBJ (1D mapping, priority 1, below the overlay): 0 = player, 1..8 = enemies, 8x8 each.
 * Only what changed is redrawn: the room on entry, single cells on pickups/doors/chests,
 * HUD fields when their value changes, OAM for the 9 sprites every frame. */
#include "game.h"
#include "font.h" /* only for the glyph count; font_load copies the glyphs */

#define SB_HUD 30
#define SB_ROOM 31
#define FONT_BASE 64
#define PAL_ROOM 0
#define PAL_HUD 1
#define PAL_DLG 2
#define SE_HFLIP 0x0400
#define SE_VFLIP 0x0800
#define OBJ_PRIO1 0x0400
#define DLG_TOP 14 /* the dialogue box covers rows 14..19 */

enum {
    G_BLANK = 0,
    G_FLOOR_A, G_FLOOR_B, G_WALL_FACE, G_WALL_TOP, G_WALL_VOID, G_DOOR_LOCKED, G_DOOR_OPEN,
    G_KEY, G_CHEST, G_CHEST_OPEN, G_TREASURE, G_NPC, G_WATER_A, G_WATER_B, G_HEART,
    G_HUD_HEART, G_HUD_HEART_EMPTY, G_HUD_KEY, G_DLG_CORNER, G_DLG_TOP, G_DLG_LEFT,
    G_MARK /* riddle quest only */
};
/* OBJ tiles */
enum { S_PLAYER_DOWN = 0, S_PLAYER_UP = 1, S_PLAYER_SIDE = 2, S_PLAYER_STEP = 3, S_ENEMY = 8 };

/* ---- palettes (RGB 0..31) ---- */
static const u16 PAL_BG_ROOM[16] = {
    RGB15(0, 0, 0),    RGB15(2, 2, 4),    RGB15(11, 9, 7),  RGB15(14, 12, 9), /* 0-3 floor */
    RGB15(8, 6, 5),    RGB15(9, 9, 13),   RGB15(14, 14, 19), RGB15(4, 4, 7), /* 4-7 walls */
    RGB15(17, 10, 4),  RGB15(10, 5, 2),   RGB15(31, 25, 5), RGB15(29, 21, 15), /* wood, gold, skin */
    RGB15(27, 5, 6),   RGB15(6, 20, 8),   RGB15(5, 11, 25), RGB15(30, 30, 28), /* red, green, water, white */
};
static const u16 PAL_BG_HUD[8] = {
    0, RGB15(31, 31, 31), RGB15(3, 3, 9), RGB15(30, 5, 7),
    RGB15(14, 2, 4), RGB15(31, 25, 5), RGB15(20, 13, 2), RGB15(9, 9, 13),
};
static const u16 PAL_BG_DLG[6] = {
    0, RGB15(5, 3, 2), RGB15(29, 26, 19), RGB15(16, 9, 3), RGB15(31, 25, 5), RGB15(6, 3, 1),
};
static const u16 PAL_OBJ_ALL[4][9] = {
    /* player: outline, skin, hair, tunic, tunic light, boots, white, belt */
    {0, RGB15(2, 2, 4), RGB15(29, 21, 15), RGB15(12, 6, 2), RGB15(5, 10, 26), RGB15(12, 18, 31),
     RGB15(8, 4, 2), RGB15(31, 31, 31), RGB15(31, 25, 5)},
    /* slime */
    {0, RGB15(2, 8, 2), RGB15(8, 24, 8), RGB15(18, 31, 14), RGB15(31, 31, 31), RGB15(2, 2, 2)},
    /* bat */
    {0, RGB15(4, 1, 6), RGB15(16, 6, 20), RGB15(24, 14, 28), RGB15(31, 4, 4), RGB15(31, 31, 31)},
    /* ghost */
    {0, RGB15(6, 6, 14), RGB15(26, 27, 31), RGB15(18, 22, 31), RGB15(3, 3, 8), RGB15(14, 6, 16)},
};

/* ---- pixel art: one hex digit per pixel (palette index), '.' = transparent, or the floor
   underneath for tiles drawn on_floor ---- */
typedef struct {
    u8 index, on_floor;
    const char *rows[8];
} Art;

static const Art BG_ART[] = {
    {G_FLOOR_A, 0, {"33333332", "32222224", "32222224", "32222224",
                    "32222224", "32222224", "32222224", "24444444"}},
    {G_FLOOR_B, 0, {"33333332", "32222224", "32242224", "32224224",
                    "32222424", "32222224", "32222224", "24444444"}},
    {G_WALL_FACE, 0, {"55565555", "55565555", "77777777", "65555565",
                      "65555565", "77777777", "55565555", "77777777"}},
    {G_WALL_TOP, 0, {"66666665", "65555557", "65555557", "65555557",
                     "65555557", "65555557", "65555557", "57777777"}},
    {G_WALL_VOID, 0, {"77777777", "77777777", "77717777", "77777777",
                      "77777777", "77777777", "77777717", "77777777"}},
    {G_DOOR_LOCKED, 0, {"19999991", "18898891", "188AA891", "18A99A91",
                        "1AAAAAA1", "1AA11AA1", "1AAAAAA1", "19999991"}},
    {G_DOOR_OPEN, 0, {"66666666", "61111116", "61111116", "61111116",
                      "61111116", "61111116", "61111116", "64444446"}},
    {G_KEY, 1, {"........", ".AAA....", "A...A...", "A...AAAA",
                "A...A.AA", ".AAA..A.", "........", "........"}},
    {G_CHEST, 1, {"........", ".999999.", "98888889", "98888889",
                  "9AAAAAA9", "988A1889", "98888889", ".999999."}},
    {G_CHEST_OPEN, 1, {".999999.", "91111119", "91A11119", "9AAAAAA9",
                       "98888889", "98888889", "98888889", ".999999."}},
    {G_TREASURE, 1, {"........", "A..A..A.", "AA.A.AA.", "AAAAAAA.",
                     "ACAFACA.", "AAAAAAA.", ".11111..", "........"}},
    {G_NPC, 1, {"..DDD..8", ".DDDDD.8", ".DBBBD.8", ".B1B1B.8",
                ".FFFFFB8", ".DFFFDD9", ".DDDDDD9", ".DD.DD.9"}},
    {G_WATER_A, 0, {"EEEEEEEE", "EEEEEEEE", "EE66EEEE", "E6EE6EEE",
                    "EEEEEEEE", "EEEEE66E", "EEEE6EE6", "EEEEEEEE"}},
    {G_WATER_B, 0, {"EEEEEEEE", "EEEE66EE", "EEE6EE6E", "EEEEEEEE",
                    "E66EEEEE", "6EE6EEEE", "EEEEEEEE", "EEEEEEEE"}},
    {G_HEART, 1, {"........", ".CC.CC..", "CFCCCCC.", "CCCCCCC.",
                  ".CCCCC..", "..CCC...", "...C....", "........"}},
    /* HUD (palette 1) */
    {G_HUD_HEART, 0, {"22222222", "22332332", "23133333", "23333333",
                      "22333332", "22233322", "22223222", "22222222"}},
    {G_HUD_HEART_EMPTY, 0, {"22222222", "22772772", "27777777", "27777777",
                            "22777772", "22277722", "22227222", "22222222"}},
    {G_HUD_KEY, 0, {"22222222", "22222222", "25552222", "52225555",
                    "52225656", "25552222", "22222222", "22222222"}},
    /* dialogue border (palette 2), flipped for the other sides */
    {G_DLG_CORNER, 0, {"55555555", "54444444", "54333333", "54322222",
                       "54322222", "54322222", "54322222", "54322222"}},
    {G_DLG_TOP, 0, {"55555555", "44444444", "33333333", "22222222",
                    "22222222", "22222222", "22222222", "22222222"}},
    {G_DLG_LEFT, 0, {"54322222", "54322222", "54322222", "54322222",
                     "54322222", "54322222", "54322222", "54322222"}},
    /* the riddle quest's marked floor: a red cross */
    {G_MARK, 1, {"........", ".C....C.", "..C..C..", "...CC...",
                 "...CC...", "..C..C..", ".C....C.", "........"}},
};

static const Art OBJ_ART[] = {
    {S_PLAYER_DOWN, 0, {"..3333..", ".333333.", ".322223.", ".212212.",
                        "..2222..", ".445544.", ".248842.", "..6..6.."}},
    {S_PLAYER_UP, 0, {"..3333..", ".333333.", ".333333.", ".333333.",
                      "..3333..", ".445544.", ".244442.", "..6..6.."}},
    {S_PLAYER_SIDE, 0, {"..3333..", ".333333.", ".3322222", ".3322122",
                        "..22222.", "..44542.", "..4884..", "..6..6.."}},
    {S_PLAYER_STEP + 0, 0, {"..3333..", ".333333.", ".322223.", ".212212.",
                            "..2222..", ".445544.", ".248842.", ".6....6."}},
    {S_PLAYER_STEP + 1, 0, {"..3333..", ".333333.", ".333333.", ".333333.",
                            "..3333..", ".445544.", ".244442.", ".6....6."}},
    {S_PLAYER_STEP + 2, 0, {"..3333..", ".333333.", ".3322222", ".3322122",
                            "..22222.", "..44542.", "..4884..", ".6...6.."}},
    /* slime */
    {S_ENEMY + 0, 0, {"........", "...111..", "..13321.", ".1322221",
                      ".1452451", ".1222221", ".1222221", "..11111."}},
    {S_ENEMY + 1, 0, {"........", "........", "...111..", "..13321.",
                      ".1452451", "12222221", "12222221", ".111111."}},
    /* bat */
    {S_ENEMY + 2, 0, {"2......2", "22.33.22", "22333322", "22344322",
                      "2.3553.2", "...33...", "........", "........"}},
    {S_ENEMY + 3, 0, {"........", "...33...", "..3333..", ".234432.",
                      "22355322", "2..33..2", "2......2", "........"}},
    /* ghost */
    {S_ENEMY + 4, 0, {"..1111..", ".122221.", "12422421", "12422421",
                      "12225221", "12222221", "12222221", ".1.11.1."}},
    {S_ENEMY + 5, 0, {"........", "..1111..", ".122221.", "12422421",
                      "12422421", "12225221", "12222221", "1.1..1.1"}},
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static u32 hexpx(char c) {
    if (c >= '0' && c <= '9') return (u32)(c - '0');
    if (c >= 'A' && c <= 'F') return (u32)(c - 'A' + 10);
    return 0;
}

/* 4bpp: pixel x of a row is nibble x (the low nibble is the leftmost pixel). */
static void load_art(volatile u32 *base, const Art *a, const Art *under) {
    for (int y = 0; y < 8; y++) {
        u32 w = 0;
        for (int x = 0; x < 8; x++) {
            char c = a->rows[y][x];
            u32 v = (c == '.' && under) ? hexpx(under->rows[y][x]) : hexpx(c);
            w |= v << (4 * x);
        }
        base[a->index * 8 + y] = w;
    }
}

/* Font glyphs drawn opaque: background pixels take colour 2 of the palette bank. */
static void load_font_opaque(void) {
    volatile u32 *cb = CHARBLOCK(0);
    const int glyphs = (int)(sizeof(font_tiles) / 32); /* FONT_GLYPHS, counted from the array */
    font_load(cb, FONT_BASE);
    for (int i = FONT_BASE * 8; i < (FONT_BASE + glyphs) * 8; i++) {
        u32 w = cb[i], out = 0;
        for (int n = 0; n < 8; n++) {
            u32 v = (w >> (4 * n)) & 0xF;
            out |= (v ? v : 2u) << (4 * n);
        }
        cb[i] = out;
    }
}

void gfx_init(void) {
    REG_DISPCNT = 0; /* no layers shown while VRAM is set up */
    for (int i = 0; i < 16; i++) PAL_BG[PAL_ROOM * 16 + i] = PAL_BG_ROOM[i];
    for (int i = 0; i < COUNT(PAL_BG_HUD); i++) PAL_BG[PAL_HUD * 16 + i] = PAL_BG_HUD[i];
    for (int i = 0; i < COUNT(PAL_BG_DLG); i++) PAL_BG[PAL_DLG * 16 + i] = PAL_BG_DLG[i];
    for (int b = 0; b < 4; b++)
        for (int i = 0; i < 9; i++) PAL_OBJ[b * 16 + i] = PAL_OBJ_ALL[b][i];

    volatile u32 *cb = CHARBLOCK(0);
    mem_fill32(cb, 0, 8); /* tile 0: blank */
    for (int i = 0; i < COUNT(BG_ART); i++) load_art(cb, &BG_ART[i], BG_ART[i].on_floor ? &BG_ART[0] : 0);
    for (int i = 0; i < COUNT(OBJ_ART); i++) load_art(OBJ_TILES, &OBJ_ART[i], 0);
    load_font_opaque();

    mem_fill32((volatile u32 *)SCREENBLOCK(SB_HUD), 0, 512);
    mem_fill32((volatile u32 *)SCREENBLOCK(SB_ROOM), 0, 512);
    oam_hide_all();
    REG_BGCNT(0) = BG_PRIO(0) | BG_CBB(0) | BG_SBB(SB_HUD) | BG_SIZE_32x32;
    REG_BGCNT(1) = BG_PRIO(1) | BG_CBB(0) | BG_SBB(SB_ROOM) | BG_SIZE_32x32;
    REG_DISPCNT = DCNT_MODE0 | DCNT_BG0 | DCNT_BG1 | DCNT_OBJ | DCNT_OBJ_1D;
}

/* ---- the room ---- */

static int is_wall(int x, int y) {
    if (x < 0 || x >= ROOM_W || y < 0 || y >= ROOM_H) return 1;
    return gs.room_tiles[y][x] == T_WALL;
}

static u16 cell_entry(int x, int y) {
    switch (gs.room_tiles[y][x]) {
    case T_FLOOR: return SE((x * 3 + y * 5) % 7 == 0 ? G_FLOOR_B : G_FLOOR_A, PAL_ROOM);
    case T_WALL:
        if (!is_wall(x, y + 1) && y + 1 < ROOM_H) return SE(G_WALL_FACE, PAL_ROOM);
        for (int j = -1; j <= 1; j++)
            for (int i = -1; i <= 1; i++)
                if (!is_wall(x + i, y + j)) return SE(G_WALL_TOP, PAL_ROOM);
        return SE(G_WALL_VOID, PAL_ROOM);
    case T_DOOR_LOCKED: return SE(G_DOOR_LOCKED, PAL_ROOM);
    case T_DOOR_OPEN: return SE(G_DOOR_OPEN, PAL_ROOM);
    case T_KEY: return SE(G_KEY, PAL_ROOM);
    case T_CHEST: return SE(G_CHEST, PAL_ROOM);
    case T_CHEST_OPEN: return SE(G_CHEST_OPEN, PAL_ROOM);
    case T_TREASURE: return SE(G_TREASURE, PAL_ROOM);
    case T_NPC: return SE(G_NPC, PAL_ROOM);
    case T_WATER: return SE((x + 2 * y) % 3 == 0 ? G_WATER_B : G_WATER_A, PAL_ROOM);
    case T_HEART: return SE(G_HEART, PAL_ROOM);
    case T_MARK: return SE(G_MARK, PAL_ROOM);
    default: return SE(G_BLANK, PAL_ROOM);
    }
}

void gfx_draw_room(void) {
    volatile u16 *sb = SCREENBLOCK(SB_ROOM);
    for (int y = 0; y < ROOM_H; y++)
        for (int x = 0; x < ROOM_W; x++) sb[y * 32 + x] = cell_entry(x, y);
}

void gfx_cell(int x, int y) { SCREENBLOCK(SB_ROOM)[y * 32 + x] = cell_entry(x, y); }

/* ---- HUD: hearts, keys, score, room on the overlay's row 0 ---- */

enum { HUD_HP, HUD_KEYS, HUD_SCORE, HUD_ROOM, HUD_FIELDS };
static u32 hud_cache[HUD_FIELDS];
static u8 hud_bar_drawn;

void gfx_hud_invalidate(void) {
    hud_bar_drawn = 0;
    for (int i = 0; i < HUD_FIELDS; i++) hud_cache[i] = 0xFFFFFFFFu;
}

static void hud(void) {
    volatile u16 *sb = SCREENBLOCK(SB_HUD);
    if (!hud_bar_drawn) {
        map_fill(sb, 0, 0, ROOM_W, 1, SE(FONT_BASE, PAL_HUD)); /* opaque spaces */
        sb[7] = SE(G_HUD_KEY, PAL_HUD);
        text_put(sb, 11, 0, "SCORE", FONT_BASE, PAL_HUD);
        text_put(sb, 24, 0, "ROOM", FONT_BASE, PAL_HUD);
        hud_bar_drawn = 1;
    }
    u32 hp = (u32)gs.hp | ((u32)gs.max_hp << 8);
    if (hud_cache[HUD_HP] != hp) {
        hud_cache[HUD_HP] = hp;
        for (int i = 0; i < 5; i++)
            sb[1 + i] = i < gs.max_hp ? SE(i < gs.hp ? G_HUD_HEART : G_HUD_HEART_EMPTY, PAL_HUD)
                                      : SE(FONT_BASE, PAL_HUD);
    }
    if (hud_cache[HUD_KEYS] != gs.keys) {
        hud_cache[HUD_KEYS] = gs.keys;
        text_put_uint(sb, 8, 0, gs.keys, 1, FONT_BASE, PAL_HUD);
    }
    if (hud_cache[HUD_SCORE] != gs.score) {
        hud_cache[HUD_SCORE] = gs.score;
        text_put_uint(sb, 17, 0, gs.score, 5, FONT_BASE, PAL_HUD);
    }
    if (hud_cache[HUD_ROOM] != gs.room) {
        hud_cache[HUD_ROOM] = gs.room;
        text_put_uint(sb, 29, 0, gs.room, 1, FONT_BASE, PAL_HUD);
    }
}

/* ---- dialogue box on rows 14..19 ---- */

static void box(void) {
    volatile u16 *sb = SCREENBLOCK(SB_HUD);
    const int b = DLG_TOP, e = ROOM_H - 1;
    sb[b * 32 + 0] = SE(G_DLG_CORNER, PAL_DLG);
    sb[b * 32 + 29] = SE(G_DLG_CORNER, PAL_DLG) | SE_HFLIP;
    sb[e * 32 + 0] = SE(G_DLG_CORNER, PAL_DLG) | SE_VFLIP;
    sb[e * 32 + 29] = SE(G_DLG_CORNER, PAL_DLG) | SE_HFLIP | SE_VFLIP;
    for (int x = 1; x < 29; x++) {
        sb[b * 32 + x] = SE(G_DLG_TOP, PAL_DLG);
        sb[e * 32 + x] = SE(G_DLG_TOP, PAL_DLG) | SE_VFLIP;
    }
    for (int y = b + 1; y < e; y++) {
        sb[y * 32 + 0] = SE(G_DLG_LEFT, PAL_DLG);
        sb[y * 32 + 29] = SE(G_DLG_LEFT, PAL_DLG) | SE_HFLIP;
    }
    map_fill(sb, 1, b + 1, 28, e - b - 1, SE(FONT_BASE, PAL_DLG));
}

static void say(int line, const char *a, const char *b) {
    char buf[32];
    int n = 0;
    while (*a && n < 26) buf[n++] = *a++;
    while (b && *b && n < 26) buf[n++] = *b++;
    buf[n] = 0;
    text_put(SCREENBLOCK(SB_HUD), 2, DLG_TOP + 1 + line, buf, FONT_BASE, PAL_DLG);
}

void gfx_dialogue(int id) {
    box();
    switch (id) {
    case DLG_SAGE:
        say(0, "SAGE: THE KEYS LIE...", 0);
        say(1, "HALL - ", CHEST_LABELS[gs.key_chest]);
        say(2, "GARDEN - ", ROOMS[3].spots[room_key_choice(3)].label);
        say(3, "CRYPT - ", ROOMS[4].spots[room_key_choice(4)].label);
        break;
    case DLG_WON:
        say(0, "YOU FOUND THE GOLDEN BONK!", 0);
        say(1, "THE QUEST IS COMPLETE.", 0);
        say(3, "SCORE", 0);
        text_put_uint(SCREENBLOCK(SB_HUD), 8, DLG_TOP + 4, gs.score, 5, FONT_BASE, PAL_DLG);
        break;
    case DLG_LOST:
        say(0, "YOU HAVE FALLEN...", 0);
        say(1, "GAME OVER", 0);
        break;
    }
}

void gfx_dialogue_close(void) { map_fill(SCREENBLOCK(SB_HUD), 0, DLG_TOP, 32, ROOM_H - DLG_TOP, 0); }

/* ---- sprites ---- */

static void sprite(int i, int x, int y, int tile, int pal, int hflip) {
    obj_set(i, x * 8, y * 8, tile, 0, pal, hflip);
    OAM[i * 4 + 2] |= OBJ_PRIO1;
}

void gfx_frame(void) {
    hud();
    static const u8 facing_tile[4] = {S_PLAYER_UP, S_PLAYER_DOWN, S_PLAYER_SIDE, S_PLAYER_SIDE};
    if (gs.invuln && (gs.invuln & 4) && !gs.lost && !gs.won)
        obj_hide(0); /* blink while invulnerable */
    else
        sprite(0, gs.player_x, gs.player_y, facing_tile[gs.facing] + (gs.anim ? S_PLAYER_STEP : 0),
               0, gs.facing == DIR_LEFT);
    int phase = (gs.ticks >> 3) & 1;
    for (int i = 0; i < MAX_ENEMIES; i++) {
        if (gs.enemy_active[i])
            sprite(1 + i, gs.enemy_x[i], gs.enemy_y[i], S_ENEMY + 2 * gs.enemy_type[i] + phase,
                   1 + gs.enemy_type[i], 0);
        else
            obj_hide(1 + i);
    }
}
