/* BonkQuest: a top-down tile adventure for the GBA (mode 0, BG tilemaps + OBJ sprites).
 *
 * Everything the game knows lives in one GameState struct at the start of EWRAM (0x02000000),
 * so the host can read it (data.json, metabonk.json) and restart it through the BonkHeader
 * commands (see gba/README.md). Offsets in the comments are checked by static asserts below;
 * keep data.json/metabonk.json in step (gba/bonkquest/gen_integration.py writes them). */
#ifndef BONKQUEST_GAME_H
#define BONKQUEST_GAME_H

#include "gba.h"

#define ROOM_W 30 /* a room is the whole screen: room tile (x, y) is screen cell (x, y) */
#define ROOM_H 20
#define NUM_ROOMS 5
#define MAX_ENEMIES 8
#define START_HP 5
#define MOVE_FRAMES 4   /* one tile every 4 frames while a direction is held */
#define INVULN_FRAMES 48 /* frames of invulnerability after a hit */
#define NONE 0xFF       /* "no such object in this room" in the position fields */
#define ARG_RIDDLES 0x80 /* cmd_arg bit of CMD_NEW_GAME / CMD_WARP: play the riddle quest */
#define RIDDLE_COST 3   /* HP a wrong chest of the sage's hall or a wrong mark costs (riddles) */

/* Semantic tile ids stored in room_tiles (metabonk.json "tile_classes"). */
enum {
    T_FLOOR = 0,
    T_WALL = 1,
    T_DOOR_LOCKED = 2, /* bump into it holding a key: the key is used up, the door stays open */
    T_DOOR_OPEN = 3,   /* step onto it to go to the next / previous room */
    T_KEY = 4,         /* walk onto it to pick it up */
    T_CHEST = 5,       /* closed: press A next to it */
    T_CHEST_OPEN = 6,
    T_TREASURE = 7, /* walk onto it: the game is won */
    T_NPC = 8,      /* the sage: press A next to him */
    T_WATER = 9,    /* blocks like a wall */
    T_HEART = 10,   /* walk onto it: +1 HP */
    T_MARK = 11,    /* riddle quest: a marked floor tile; the key lies under one (the sage says
                       which), stepping on another costs RIDDLE_COST HP */
    T_COUNT
};

enum { DIR_UP = 0, DIR_DOWN = 1, DIR_LEFT = 2, DIR_RIGHT = 3 };
enum { EN_SLIME = 0, EN_BAT = 1, EN_GHOST = 2 };
enum { DLG_NONE = 0, DLG_SAGE = 1, DLG_WON = 2, DLG_LOST = 3 };

/* quest_stage: the furthest milestone reached (never goes down). */
enum {
    Q_START = 0,
    Q_KEY1 = 1,   /* picked up the key of room 1 */
    Q_ROOM2 = 2,  /* entered the sage's hall */
    Q_TALKED = 3, /* talked to the sage */
    Q_KEY2 = 4,   /* found the key in a chest of room 2 */
    Q_ROOM3 = 5,
    Q_KEY3 = 6,
    Q_ROOM4 = 7,
    Q_KEY4 = 8,
    Q_ROOM5 = 9,
    Q_WON = 10
};

/* Score events. */
#define SCORE_KEY 10
#define SCORE_DOOR 20
#define SCORE_ROOM 50
#define SCORE_TALK 5
#define SCORE_HEART 5
#define SCORE_TREASURE 500

typedef struct {
    BonkHeader hdr;            /* 0x000 magic, frame, seed, cmd, cmd_arg, cmd_ack, cmd_count */
    u8 room;                   /* 0x010 current room, 1..NUM_ROOMS */
    u8 player_x;               /* 0x011 tile column 0..29 */
    u8 player_y;               /* 0x012 tile row 0..19 */
    u8 facing;                 /* 0x013 DIR_* */
    u8 hp;                     /* 0x014 */
    u8 max_hp;                 /* 0x015 */
    u8 keys;                   /* 0x016 keys held */
    u8 chests;                 /* 0x017 chests opened */
    u8 quest_stage;            /* 0x018 Q_* */
    u8 rooms_visited;          /* 0x019 distinct rooms entered, the first one included */
    u8 won;                    /* 0x01A */
    u8 lost;                   /* 0x01B */
    u8 dialogue_open;          /* 0x01C the sage's box is open (the world waits) */
    u8 dialogue_id;            /* 0x01D DLG_* box on screen, won/lost banners included */
    u8 invuln;                 /* 0x01E frames of invulnerability left */
    u8 move_cd;                /* 0x01F frames until the player may step again */
    u32 score;                 /* 0x020 */
    u32 ticks;                 /* 0x024 game frames since the last new game (world time) */
    u16 visited_mask;          /* 0x028 bit r: room r entered */
    u16 doors_open;            /* 0x02A bit r: the locked exit of room r was opened */
    u16 keys_taken;            /* 0x02C bit r: the key of room r was collected */
    u16 hearts_taken;          /* 0x02E bit r: the heart of room r was collected */
    u32 chests_open;           /* 0x030 bit 4*r+i: chest i of room r opened */
    u8 npc_x, npc_y;           /* 0x034 the NPC of this room, NONE if none */
    u8 key_x, key_y;           /* 0x036 the key lying in this room, NONE if none */
    u8 exit_x, exit_y;         /* 0x038 the door to the next room, NONE in the last room */
    u8 treasure_x, treasure_y; /* 0x03A NONE outside the last room */
    u8 num_rooms;              /* 0x03C NUM_ROOMS */
    u8 num_enemies;            /* 0x03D active enemies in this room */
    u8 talked;                 /* 0x03E times the player talked to the sage */
    u8 hits;                   /* 0x03F times the player was hurt */
    u8 key_chest;              /* 0x040 chest (0..2) of room 2 that holds the key */
    u8 anim;                   /* 0x041 player walk frame (flips on every step) */
    u8 quest_mode;             /* 0x042 0: the classic quest, 1: the riddle quest */
    u8 marks_sprung;           /* 0x043 bit 4*(r-3)+i: wrong mark i of room r (3, 4) stepped on */
    u32 room_seed[8];          /* 0x044 per-room layout seeds drawn from seed_mix(seed) */
    u8 enemy_x[MAX_ENEMIES];   /* 0x064 tile coordinates */
    u8 enemy_y[MAX_ENEMIES];   /* 0x06C */
    u8 enemy_active[MAX_ENEMIES]; /* 0x074 */
    u8 enemy_type[MAX_ENEMIES];   /* 0x07C EN_* */
    u8 enemy_dir[MAX_ENEMIES];    /* 0x084 0: walking towards (bx, by), 1: towards (ax, ay) */
    u8 enemy_timer[MAX_ENEMIES];  /* 0x08C frames until the next step */
    u8 enemy_period[MAX_ENEMIES]; /* 0x094 frames per step */
    u8 enemy_ax[MAX_ENEMIES];     /* 0x09C patrol segment end points */
    u8 enemy_ay[MAX_ENEMIES];     /* 0x0A4 */
    u8 enemy_bx[MAX_ENEMIES];     /* 0x0AC */
    u8 enemy_by[MAX_ENEMIES];     /* 0x0B4 */
    u8 room_tiles[ROOM_H][ROOM_W]; /* 0x0BC T_* of the current room, [y][x] */
} GameState;                   /* 0x314 bytes */

#define OFFSET_OF(f) __builtin_offsetof(GameState, f)
_Static_assert(OFFSET_OF(room) == 0x10, "layout");
_Static_assert(OFFSET_OF(score) == 0x20, "layout");
_Static_assert(OFFSET_OF(chests_open) == 0x30, "layout");
_Static_assert(OFFSET_OF(key_chest) == 0x40, "layout");
_Static_assert(OFFSET_OF(quest_mode) == 0x42, "layout");
_Static_assert(OFFSET_OF(room_seed) == 0x44, "layout");
_Static_assert(OFFSET_OF(enemy_x) == 0x64, "layout");
_Static_assert(OFFSET_OF(enemy_by) == 0xB4, "layout");
_Static_assert(OFFSET_OF(room_tiles) == 0xBC, "layout");
_Static_assert(sizeof(GameState) == 0x314, "layout");

extern GameState gs;

/* rooms.c: room definitions and loading */
typedef struct {
    u8 x, y;
    const char *label; /* where it is, in the sage's words */
} Spot;
typedef struct {
    u8 ax, ay, bx, by; /* an axis-aligned patrol segment on floor tiles */
} Path;
typedef struct {
    u8 type, period, npaths;
    Path paths[4]; /* the seed picks one, a start point on it and a direction */
} EnemySlot;
typedef struct {
    const char *name;
    const char *map[ROOM_H]; /* # wall . floor S start ~ water D locked exit d way back
                                N sage C chest H heart T treasure */
    u8 nspots;               /* candidate key spots on the floor (0: none, or in a chest) */
    Spot spots[8];
    u8 key_in_chest; /* 1: one of the chests (picked by the seed) holds the key */
    u8 riddle;       /* riddle quest: a mark on every key spot (key_in_chest: wrong chests cost) */
    u8 chest_gold;   /* score for a chest without the key */
    u8 nslots;
    EnemySlot slots[4];
} RoomDef;

extern const RoomDef ROOMS[NUM_ROOMS + 1];
extern const char *const CHEST_LABELS[3];
void room_load(int r);                 /* fills room_tiles, objects and enemies of room r */
int room_key_choice(int r);            /* index of the key spot / key chest the seed picked */
int room_find(int r, char c, int *x, int *y); /* first cell of map char c */
int room_chest_index(int r, int x, int y);    /* reading-order index of the chest at (x, y) */
int room_mark_bit(int r, int x, int y);       /* marks_sprung bit of the mark at (x, y) */
void room_door_inside(int r, int dx, int dy, int *x, int *y); /* floor cell next to a door */

/* game.c: rules */
void new_game(u32 seed, int mode);
void warp(int room);
void game_update(void);
void set_tile(int x, int y, u8 t);

/* gfx.c: graphics */
void gfx_init(void);
void gfx_draw_room(void);
void gfx_cell(int x, int y);
void gfx_frame(void); /* HUD (when changed) and sprites */
void gfx_hud_invalidate(void);
void gfx_dialogue(int id);
void gfx_dialogue_close(void);

#endif
