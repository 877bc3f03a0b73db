/* BonkQuest rules: new game, warps, movement, interactions, enemies, winning and losing. */
#include "game.h"

static const s8 DX[4] = {0, 0, -1, 1};
static const s8 DY[4] = {-1, 1, 0, 0};
/* quest milestones: key of room r collected, room r entered */
static const u8 Q_KEY_OF[NUM_ROOMS + 1] = {0, Q_KEY1, Q_KEY2, Q_KEY3, Q_KEY4, 0};
static const u8 Q_ENTER_OF[NUM_ROOMS + 1] = {0, Q_START, Q_ROOM2, Q_ROOM3, Q_ROOM4, Q_ROOM5};

static void quest(u8 q) {
    if (gs.quest_stage < q) gs.quest_stage = q;
}

void set_tile(int x, int y, u8 t) {
    gs.room_tiles[y][x] = t;
    gfx_cell(x, y);
}

/* ---- progress effects, shared by play and by warp ---- */

static void gain_key(int r) {
    gs.keys++;
    gs.keys_taken |= (u16)(1u << r);
    gs.score += SCORE_KEY;
    quest(Q_KEY_OF[r]);
}

static void unlock_exit(int r) {
    gs.keys--;
    gs.doors_open |= (u16)(1u << r);
    gs.score += SCORE_DOOR;
}

static void finish(int won);

/* Riddle quest: a wrong chest or mark costs `n` HP at once, invulnerable or not. */
static void trap(int n) {
    if (gs.lost || gs.won) return;
    gs.hp = gs.hp > n ? (u8)(gs.hp - n) : 0;
    if (gs.hits < 255) gs.hits++;
    gs.invuln = INVULN_FRAMES;
    if (gs.hp == 0) finish(0);
}

/* Opens chest i of room r; returns 1 when it held the key. */
static int open_chest(int r, int i) {
    gs.chests_open |= 1u << (4 * r + i);
    gs.chests++;
    if (ROOMS[r].key_in_chest && i == room_key_choice(r)) {
        gain_key(r);
        return 1;
    }
    if (gs.quest_mode && ROOMS[r].riddle && !(gs.keys_taken & (1u << r))) {
        /* the sage named another chest (once the key is found, the others hold gold) */
        trap(RIDDLE_COST);
        return 0;
    }
    gs.score += ROOMS[r].chest_gold;
    return 0;
}

static void talk(void) {
    if (gs.talked == 0) gs.score += SCORE_TALK;
    if (gs.talked < 255) gs.talked++;
    quest(Q_TALKED);
}

static void mark_visited(int r) {
    if (gs.visited_mask & (1u << r)) return;
    gs.visited_mask |= (u16)(1u << r);
    gs.rooms_visited++;
    gs.score += SCORE_ROOM;
    quest(Q_ENTER_OF[r]);
}

/* ---- rooms ---- */

static void enter_room(int r, int x, int y, int facing) {
    mark_visited(r);
    gs.room = (u8)r;
    room_load(r);
    gs.player_x = (u8)x;
    gs.player_y = (u8)y;
    gs.facing = (u8)facing;
    gs.move_cd = MOVE_FRAMES;
    gfx_draw_room();
}

/* Arrive in room r through its door to room `from`. */
static void arrive(int r, int from, int facing) {
    int dx = 0, dy = 0, x, y;
    room_find(r, from < r ? 'd' : 'D', &dx, &dy);
    room_door_inside(r, dx, dy, &x, &y);
    enter_room(r, x, y, facing);
}

void new_game(u32 seed, int mode) {
    BonkHeader keep = gs.hdr;
    mem_fill32((volatile u32 *)&gs, 0, sizeof(GameState) / 4);
    gs.hdr = keep;
    gs.quest_mode = (u8)mode;
    u32 rng = seed_mix(seed);
    for (int r = 0; r < 8; r++) gs.room_seed[r] = rng_next(&rng);
    gs.num_rooms = NUM_ROOMS;
    gs.hp = gs.max_hp = START_HP;
    gs.key_chest = (u8)room_key_choice(2);
    gs.facing = DIR_RIGHT;
    gfx_dialogue_close();
    gfx_hud_invalidate();
    int sx = 1, sy = 1;
    room_find(1, 'S', &sx, &sy);
    gs.visited_mask = 1u << 1; /* the first room counts as visited, without the room bonus */
    gs.rooms_visited = 1;
    enter_room(1, sx, sy, DIR_RIGHT);
    gs.move_cd = 0;
}

/* Start of room n holding what a player who took the shortest way there would hold:
   every earlier key found and used, the sage heard, the key chest opened, rooms visited. */
void warp(int n) {
    if (n < 1) n = 1;
    if (n > NUM_ROOMS) n = NUM_ROOMS;
    for (int r = 1; r < n; r++) {
        if (r == 2) talk();
        if (ROOMS[r].key_in_chest)
            open_chest(r, room_key_choice(r));
        else
            gain_key(r);
        unlock_exit(r);
        if (r + 1 < n) mark_visited(r + 1);
    }
    if (n > 1) arrive(n, n - 1, DIR_RIGHT);
    gs.move_cd = 0;
}

/* ---- the player ---- */

static void finish(int won) {
    if (won) {
        gs.won = 1;
        gs.score += SCORE_TREASURE;
        quest(Q_WON);
        gs.dialogue_id = DLG_WON;
        gfx_dialogue(DLG_WON);
    } else {
        gs.lost = 1;
        gs.dialogue_id = DLG_LOST;
        gfx_dialogue(DLG_LOST);
    }
}

static void hurt(void) {
    if (gs.invuln || gs.lost || gs.won) return;
    gs.hp--;
    if (gs.hits < 255) gs.hits++;
    gs.invuln = INVULN_FRAMES;
    if (gs.hp == 0) finish(0);
}

static int interactive(int x, int y) {
    if (x < 0 || x >= ROOM_W || y < 0 || y >= ROOM_H) return 0;
    u8 t = gs.room_tiles[y][x];
    return t == T_NPC || t == T_CHEST;
}

/* A: talk to the sage or open a chest, the one faced first, else any adjacent one. */
static int interact(void) {
    int x = gs.player_x + DX[gs.facing], y = gs.player_y + DY[gs.facing];
    for (int d = 0; !interactive(x, y); d++) {
        if (d == 4) return 0;
        x = gs.player_x + DX[d];
        y = gs.player_y + DY[d];
    }
    if (gs.room_tiles[y][x] == T_NPC) {
        talk();
        gs.dialogue_open = 1;
        gs.dialogue_id = DLG_SAGE;
        gfx_dialogue(DLG_SAGE);
        return 1;
    }
    int r = gs.room;
    if (open_chest(r, room_chest_index(r, x, y))) gs.key_x = gs.key_y = NONE;
    set_tile(x, y, T_CHEST_OPEN);
    return 0;
}

/* Returns 1 when the player left the room. */
static int try_move(int dir) {
    int x = gs.player_x + DX[dir], y = gs.player_y + DY[dir];
    if (x < 0 || x >= ROOM_W || y < 0 || y >= ROOM_H) return 0;
    int r = gs.room;
    switch (gs.room_tiles[y][x]) {
    case T_DOOR_LOCKED:
        if (gs.keys) {
            unlock_exit(r);
            set_tile(x, y, T_DOOR_OPEN);
        }
        return 0;
    case T_DOOR_OPEN:
        if (x == gs.exit_x && y == gs.exit_y)
            arrive(r + 1, r, DIR_RIGHT);
        else
            arrive(r - 1, r, DIR_LEFT);
        return 1;
    case T_FLOOR:
    case T_KEY:
    case T_HEART:
    case T_MARK:
    case T_TREASURE: break;
    default: return 0; /* wall, water, chest, sage */
    }
    gs.player_x = (u8)x;
    gs.player_y = (u8)y;
    gs.anim ^= 1;
    switch (gs.room_tiles[y][x]) {
    case T_KEY:
        gain_key(r);
        gs.key_x = gs.key_y = NONE;
        set_tile(x, y, T_FLOOR);
        break;
    case T_MARK: /* the key under it (the riddle solved: the other marks go), or a trap */
        if (x == gs.key_x && y == gs.key_y) {
            gain_key(r);
            gs.key_x = gs.key_y = NONE;
            for (int i = 0; i < ROOMS[r].nspots; i++)
                if (gs.room_tiles[ROOMS[r].spots[i].y][ROOMS[r].spots[i].x] == T_MARK)
                    set_tile(ROOMS[r].spots[i].x, ROOMS[r].spots[i].y, T_FLOOR);
        } else {
            gs.marks_sprung |= (u8)(1u << room_mark_bit(r, x, y));
            trap(RIDDLE_COST);
        }
        set_tile(x, y, T_FLOOR);
        break;
    case T_HEART:
        gs.hearts_taken |= (u16)(1u << r);
        if (gs.hp < gs.max_hp) gs.hp++;
        gs.score += SCORE_HEART;
        set_tile(x, y, T_FLOOR);
        break;
    case T_TREASURE: finish(1); break;
    }
    return 0;
}

static int held_dir(void) {
    if (key_down(KEY_UP)) return DIR_UP;
    if (key_down(KEY_DOWN)) return DIR_DOWN;
    if (key_down(KEY_LEFT)) return DIR_LEFT;
    if (key_down(KEY_RIGHT)) return DIR_RIGHT;
    return -1;
}

/* ---- enemies ---- */

static void enemy_step(int i) {
    int tx = gs.enemy_dir[i] ? gs.enemy_ax[i] : gs.enemy_bx[i];
    int ty = gs.enemy_dir[i] ? gs.enemy_ay[i] : gs.enemy_by[i];
    if (gs.enemy_x[i] == tx && gs.enemy_y[i] == ty) { /* at an end: turn around */
        gs.enemy_dir[i] ^= 1;
        tx = gs.enemy_dir[i] ? gs.enemy_ax[i] : gs.enemy_bx[i];
        ty = gs.enemy_dir[i] ? gs.enemy_ay[i] : gs.enemy_by[i];
    }
    if (gs.enemy_x[i] < tx) gs.enemy_x[i]++;
    else if (gs.enemy_x[i] > tx) gs.enemy_x[i]--;
    else if (gs.enemy_y[i] < ty) gs.enemy_y[i]++;
    else if (gs.enemy_y[i] > ty) gs.enemy_y[i]--;
}

static void enemies_update(int px0, int py0) {
    int px = gs.player_x, py = gs.player_y;
    for (int i = 0; i < MAX_ENEMIES; i++) {
        if (!gs.enemy_active[i]) continue;
        int ex0 = gs.enemy_x[i], ey0 = gs.enemy_y[i];
        if (--gs.enemy_timer[i] == 0) {
            gs.enemy_timer[i] = gs.enemy_period[i];
            enemy_step(i);
        }
        int ex = gs.enemy_x[i], ey = gs.enemy_y[i];
        /* same cell, or the two swapped cells this frame */
        if ((ex == px && ey == py) || (ex == px0 && ey == py0 && ex0 == px && ey0 == py)) hurt();
    }
}

void game_update(void) {
    gs.ticks++;
    if (gs.dialogue_open) { /* the world waits while the sage talks */
        if (key_hit(KEY_A | KEY_UP | KEY_DOWN | KEY_LEFT | KEY_RIGHT)) {
            gs.dialogue_open = 0;
            gs.dialogue_id = DLG_NONE;
            gfx_dialogue_close();
            gs.move_cd = MOVE_FRAMES;
        }
        return;
    }
    if (gs.invuln) gs.invuln--;
    if (gs.move_cd) gs.move_cd--;
    int px0 = gs.player_x, py0 = gs.player_y;
    if (key_hit(KEY_A)) {
        if (interact()) return;
    } else {
        int dir = held_dir();
        if (dir >= 0 && gs.move_cd == 0) {
            gs.facing = (u8)dir;
            gs.move_cd = MOVE_FRAMES;
            if (try_move(dir)) return;
            if (gs.won) return;
        }
    }
    enemies_update(px0, py0);
}
