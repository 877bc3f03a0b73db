/* Shared hardware definitions and helpers for the bundled games (mode 0, tiles and sprites).
 * Register addresses follow GBATEK. Everything here is this project's own code. */
#ifndef BONK_GBA_H
#define BONK_GBA_H

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef signed char s8;
typedef signed short s16;
typedef signed int s32;

#define REG16(a) (*(volatile u16 *)(a))
#define REG32(a) (*(volatile u32 *)(a))

#define REG_DISPCNT REG16(0x04000000)
#define REG_DISPSTAT REG16(0x04000004)
#define REG_VCOUNT REG16(0x04000006)
#define REG_BGCNT(n) REG16(0x04000008 + 2 * (n))
#define REG_BGHOFS(n) REG16(0x04000010 + 4 * (n))
#define REG_BGVOFS(n) REG16(0x04000012 + 4 * (n))
#define REG_KEYINPUT REG16(0x04000130)
#define REG_IE REG16(0x04000200)
#define REG_IF REG16(0x04000202)
#define REG_IME REG16(0x04000208)

#define DCNT_MODE0 0x0000
#define DCNT_OBJ_1D 0x0040
#define DCNT_BG0 0x0100
#define DCNT_BG1 0x0200
#define DCNT_BG2 0x0400
#define DCNT_BG3 0x0800
#define DCNT_OBJ 0x1000

/* BGxCNT fields */
#define BG_PRIO(n) (n)
#define BG_CBB(n) ((n) << 2)
#define BG_SBB(n) ((n) << 8)
#define BG_SIZE_32x32 0x0000

#define PAL_BG ((volatile u16 *)0x05000000)
#define PAL_OBJ ((volatile u16 *)0x05000200)
#define VRAM ((volatile u16 *)0x06000000)
#define CHARBLOCK(n) ((volatile u32 *)(0x06000000 + (n) * 0x4000))
#define SCREENBLOCK(n) ((volatile u16 *)(0x06000000 + (n) * 0x800))
#define OBJ_TILES ((volatile u32 *)0x06010000)
#define OAM ((volatile u16 *)0x07000000)

#define RGB15(r, g, b) ((u16)((r) | ((g) << 5) | ((b) << 10)))
/* tilemap entry: tile index (10 bits), hflip, vflip, palette bank */
#define SE(tile, pal) ((u16)(((tile) & 0x3FF) | ((pal) << 12)))

#define KEY_A 0x0001
#define KEY_B 0x0002
#define KEY_SELECT 0x0004
#define KEY_START 0x0008
#define KEY_RIGHT 0x0010
#define KEY_LEFT 0x0020
#define KEY_UP 0x0040
#define KEY_DOWN 0x0080
#define KEY_R 0x0100
#define KEY_L 0x0200

/* OBJ attribute bits */
#define ATTR0_HIDE 0x0200
#define ATTR0_SQUARE 0x0000
#define ATTR1_SIZE_8 0x0000
#define ATTR1_SIZE_16 0x4000
#define ATTR1_HFLIP 0x1000

/* Host command interface, first 16 bytes of every game's state struct (see gba/README.md). */
#define BONK_MAGIC 0x4B4E4F42u /* "BONK" */
#define CMD_NONE 0
#define CMD_NEW_GAME 1 /* start a new game from `seed` */
#define CMD_WARP 2     /* new game from `seed`, then jump to stage `cmd_arg` */

typedef struct {
    u32 magic;   /* BONK_MAGIC once the game has booted */
    u32 frame;   /* game frames since boot, +1 per VBlank */
    u32 seed;    /* written by the host before CMD_NEW_GAME / CMD_WARP */
    u8 cmd;      /* written by the host, cleared by the game when done */
    u8 cmd_arg;  /* argument of the command */
    u8 cmd_ack;  /* the last command the game executed */
    u8 cmd_count; /* commands executed since boot (wraps) */
} BonkHeader;

/* Wait for VBlank with the BIOS halt (SWI 0x05): the CPU sleeps, the emulator skips idle time. */
static inline void vblank_intr_wait(void) {
    __asm__ volatile("swi 0x05" ::: "r0", "r1", "r2", "r3", "memory");
}

void irq_init_vblank(void);

/* Input: current, newly pressed this frame. */
extern u16 key_cur, key_prev;
void keys_poll(void);
static inline int key_down(u16 k) { return (key_cur & k) != 0; }
static inline int key_hit(u16 k) { return (key_cur & ~key_prev & k) != 0; }

/* xorshift32 random numbers; never seed with 0. */
u32 rng_next(u32 *state);
u32 rng_range(u32 *state, u32 n); /* 0 .. n-1 */
u32 seed_mix(u32 seed);           /* turn any seed (0 included) into a good non-zero state */

/* Text on a background, with the font loaded at `font_tile_base` of a char block. */
void font_load(volatile u32 *charblock, int font_tile_base);
void text_put(volatile u16 *screenblock, int x, int y, const char *s, int font_tile_base, int pal);
void text_put_uint(volatile u16 *screenblock, int x, int y, u32 v, int width, int font_tile_base, int pal);
void map_fill(volatile u16 *screenblock, int x, int y, int w, int h, u16 entry);

/* Sprites. */
void oam_hide_all(void);
void obj_set(int i, int x, int y, int tile, int size16, int pal, int hflip);
void obj_hide(int i);

void mem_copy32(volatile u32 *dst, const u32 *src, int words);
void mem_fill32(volatile u32 *dst, u32 value, int words);

#endif
