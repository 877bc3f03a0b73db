/* The five rooms of BonkQuest and how a room is loaded into GameState.
 *
 * The layout of a room is fixed; the seed picks, per room, where the key lies (or which chest
 * holds it), which patrol segment each enemy walks, where on it the enemy starts, its direction
 * and a little of its speed. Each room draws from its own RNG state gs.room_seed[r] (itself drawn
 * from seed_mix(seed) in new_game), so entering a room again gives the same layout. */
#include "game.h"

const char *const CHEST_LABELS[3] = {"NORTH-WEST", "NORTH-EAST", "SOUTH"};

const RoomDef ROOMS[NUM_ROOMS + 1] = {
    [1] = {
        /* Entrance: a small clear chamber, the key a few tiles from the start, the locked door
           on the other side, one slow slime walking up and down between them. */
        .name = "ENTRANCE",
        .map = {
            "##############################",
            "##############################",
            "##############################",
            "##############################",
            "##############################",
            "##############################",
            "########..............########",
            "########..............########",
            "########..............########",
            "########..............########",
            "########.S............D#######",
            "########..............########",
            "########..............########",
            "########..............########",
            "##############################",
            "##############################",
            "##############################",
            "##############################",
            "##############################",
            "##############################",
        },
        .nspots = 8,
        .spots = {{11, 7, "NORTH"}, {11, 13, "SOUTH"}, {12, 8, "NORTH"}, {12, 12, "SOUTH"},
                  {10, 7, "NORTH"}, {10, 13, "SOUTH"}, {13, 9, "EAST"}, {13, 11, "EAST"}},
        .nslots = 1,
        .slots = {{EN_SLIME, 16, 4, {{15, 6, 15, 13}, {16, 6, 16, 13}, {17, 6, 17, 13}, {18, 6, 18, 13}}}},
    },
    [2] = {
        /* The sage's hall: three chests, one holds the key (the sage says which). */
        .name = "SAGE'S HALL",
        .map = {
            "##############################",
            "#C......#............#......C#",
            "#.......#............#.......#",
            "#.......#...######...#.......#",
            "#.......#............#.......#",
            "#....N.......................#",
            "#.......#............#.......#",
            "#.......#...######...#.......#",
            "####.####............####.####",
            "#............................#",
            "d............................D",
            "#............................#",
            "####.####............####.####",
            "#.......#............#.......#",
            "#.......#...######...#.......#",
            "#.......#............#.......#",
            "#.......#............#.......#",
            "#.......#............#.......#",
            "#.......#.....C......#.......#",
            "##############################",
        },
        .key_in_chest = 1,
        .riddle = 1,
        .chest_gold = 25,
        .nslots = 2,
        .slots = {{EN_SLIME, 14, 2, {{6, 9, 22, 9}, {6, 11, 22, 11}}},
                  {EN_BAT, 12, 2, {{11, 1, 11, 18}, {18, 1, 18, 18}}}},
    },
    [3] = {
        /* The water garden: ponds to walk around, the key in one of four corners. */
        .name = "WATER GARDEN",
        .map = {
            "##############################",
            "#.....~~~~.........~~~~....C.#",
            "#.....~~~~.........~~~~......#",
            "#..H..........~~~............#",
            "#.............~~~.......~~~..#",
            "#~~~~...................~~~..#",
            "#~~~~....~~~~.......~~.......#",
            "#........~~~~.......~~.......#",
            "#............................#",
            "#...~~~........~~~...........#",
            "d...~~~........~~~...........D",
            "#...............~~~......~~..#",
            "#.....~~~~...............~~..#",
            "#.....~~~~.....~~~~..........#",
            "#~~............~~~~.......~~~#",
            "#~~.....~~~...............~~~#",
            "#.......~~~......~~~.........#",
            "#..~~~...........~~~.....~~..#",
            "#..~~~.......................#",
            "##############################",
        },
        .nspots = 4,
        .spots = {{1, 1, "NORTH-WEST"}, {28, 2, "NORTH-EAST"}, {1, 18, "SOUTH-WEST"},
                  {28, 18, "SOUTH-EAST"}},
        .riddle = 1,
        .chest_gold = 40,
        .nslots = 3,
        .slots = {{EN_SLIME, 10, 2, {{2, 8, 27, 8}, {5, 11, 15, 11}}},
                  {EN_SLIME, 10, 2, {{13, 2, 13, 17}, {23, 2, 23, 17}}},
                  {EN_SLIME, 10, 2, {{7, 18, 26, 18}, {11, 16, 16, 16}}}},
    },
    [4] = {
        /* The crypt: narrow passages and fast bats. */
        .name = "CRYPT",
        .map = {
            "##############################",
            "#...#......#......#......#..H#",
            "#...#......#......#......#...#",
            "#...#..##..#..##..#..##..#...#",
            "#..........................#.#",
            "#...#..##..#..##..#..##..#...#",
            "##.##......#......#......##.##",
            "#............................#",
            "#.##.####.######.#####.####..#",
            "#.##.#..........C.........#..#",
            "d....#.####.#####.#####.#.#..D",
            "#.##.#.#..................#..#",
            "#.##.#.#.########.#######.####",
            "#....#.#..................#..#",
            "####.#.############.#######..#",
            "#......#....#.....#.....#....#",
            "#.####.#.##.#.###.#.###.#.##.#",
            "#.#....#.#..#...#...#.......##",
            "#.#......#..............#....#",
            "##############################",
        },
        .nspots = 4,
        .spots = {{1, 1, "NORTH-WEST"}, {24, 1, "NORTH-EAST"}, {3, 17, "SOUTH-WEST"},
                  {28, 18, "SOUTH-EAST"}},
        .riddle = 1,
        .chest_gold = 50,
        .nslots = 3,
        .slots = {{EN_BAT, 9, 2, {{2, 7, 27, 7}, {2, 4, 25, 4}}},
                  {EN_BAT, 9, 2, {{8, 11, 25, 11}, {8, 13, 25, 13}}},
                  {EN_BAT, 9, 2, {{10, 18, 23, 18}, {6, 9, 6, 18}}}},
    },
    [5] = {
        /* The vault: ghosts sweep four lanes in front of the treasure. */
        .name = "VAULT",
        .map = {
            "##############################",
            "#####.....................####",
            "####..C.................C..###",
            "###.........................##",
            "##...........................#",
            "#............................#",
            "#............................#",
            "#............................#",
            "#......................~~~~~.#",
            "#......................~...~.#",
            "d........................T.~.#",
            "#......................~...~.#",
            "#......................~~~~~.#",
            "#............................#",
            "#............................#",
            "##...........................#",
            "###.........................##",
            "####.......................###",
            "#####.....................####",
            "##############################",
        },
        .chest_gold = 75,
        .nslots = 4,
        .slots = {{EN_GHOST, 8, 2, {{8, 1, 8, 18}, {9, 1, 9, 18}}},
                  {EN_GHOST, 8, 2, {{12, 1, 12, 18}, {13, 1, 13, 18}}},
                  {EN_GHOST, 8, 2, {{16, 1, 16, 18}, {17, 1, 17, 18}}},
                  {EN_GHOST, 8, 2, {{20, 1, 20, 18}, {21, 1, 21, 18}}}},
    },
};

static int room_chest_count(int r) {
    int n = 0;
    for (int y = 0; y < ROOM_H; y++)
        for (int x = 0; x < ROOM_W; x++) n += ROOMS[r].map[y][x] == 'C';
    return n;
}

/* The first draw of a room's RNG picks the key spot (or key chest); enemies follow. */
static int key_draw(int r, u32 *rng) {
    const RoomDef *d = &ROOMS[r];
    return (int)rng_range(rng, d->key_in_chest ? (u32)room_chest_count(r) : d->nspots);
}

int room_key_choice(int r) {
    u32 rng = gs.room_seed[r];
    return key_draw(r, &rng);
}

int room_find(int r, char c, int *x, int *y) {
    for (int j = 0; j < ROOM_H; j++)
        for (int i = 0; i < ROOM_W; i++)
            if (ROOMS[r].map[j][i] == c) {
                *x = i;
                *y = j;
                return 1;
            }
    return 0;
}

int room_chest_index(int r, int x, int y) {
    int n = 0;
    for (int j = 0; j < ROOM_H; j++)
        for (int i = 0; i < ROOM_W; i++)
            if (ROOMS[r].map[j][i] == 'C') {
                if (i == x && j == y) return n;
                n++;
            }
    return -1;
}

int room_mark_bit(int r, int x, int y) {
    for (int i = 0; i < ROOMS[r].nspots; i++)
        if (ROOMS[r].spots[i].x == x && ROOMS[r].spots[i].y == y) return (4 * (r - 3) + i) & 7;
    return 7;
}

void room_door_inside(int r, int dx, int dy, int *x, int *y) {
    static const s8 ox[4] = {1, -1, 0, 0}, oy[4] = {0, 0, 1, -1};
    for (int k = 0; k < 4; k++) {
        int nx = dx + ox[k], ny = dy + oy[k];
        if (nx >= 0 && nx < ROOM_W && ny >= 0 && ny < ROOM_H && ROOMS[r].map[ny][nx] == '.') {
            *x = nx;
            *y = ny;
            return;
        }
    }
    *x = dx;
    *y = dy;
}

static u8 tile_of(int r, char c, int x, int y, int *chest) {
    switch (c) {
    case '#': return T_WALL;
    case '~': return T_WATER;
    case 'd': return T_DOOR_OPEN;
    case 'D':
        gs.exit_x = (u8)x;
        gs.exit_y = (u8)y;
        return (gs.doors_open & (1u << r)) ? T_DOOR_OPEN : T_DOOR_LOCKED;
    case 'N':
        gs.npc_x = (u8)x;
        gs.npc_y = (u8)y;
        return T_NPC;
    case 'C': {
        int i = (*chest)++;
        return (gs.chests_open & (1u << (4 * r + i))) ? T_CHEST_OPEN : T_CHEST;
    }
    case 'H': return (gs.hearts_taken & (1u << r)) ? T_FLOOR : T_HEART;
    case 'T':
        gs.treasure_x = (u8)x;
        gs.treasure_y = (u8)y;
        return T_TREASURE;
    default: return T_FLOOR; /* '.', 'S' */
    }
}

void room_load(int r) {
    const RoomDef *d = &ROOMS[r];
    gs.npc_x = gs.npc_y = gs.key_x = gs.key_y = NONE;
    gs.exit_x = gs.exit_y = gs.treasure_x = gs.treasure_y = NONE;
    int chest = 0;
    for (int y = 0; y < ROOM_H; y++)
        for (int x = 0; x < ROOM_W; x++) gs.room_tiles[y][x] = tile_of(r, d->map[y][x], x, y, &chest);

    u32 rng = gs.room_seed[r];
    int k = key_draw(r, &rng);
    if (!d->key_in_chest && d->nspots && !(gs.keys_taken & (1u << r))) {
        gs.key_x = d->spots[k].x;
        gs.key_y = d->spots[k].y;
        if (gs.quest_mode && d->riddle) { /* the riddle quest: a mark on every spot */
            for (int i = 0; i < d->nspots; i++)
                if (!(gs.marks_sprung & (1u << room_mark_bit(r, d->spots[i].x, d->spots[i].y))))
                    gs.room_tiles[d->spots[i].y][d->spots[i].x] = T_MARK;
            gs.room_tiles[gs.key_y][gs.key_x] = T_MARK;
        } else {
            gs.room_tiles[gs.key_y][gs.key_x] = T_KEY;
        }
    }

    gs.num_enemies = 0;
    for (int i = 0; i < MAX_ENEMIES; i++) gs.enemy_active[i] = 0;
    for (int i = 0; i < d->nslots && i < MAX_ENEMIES; i++) {
        const EnemySlot *s = &d->slots[i];
        const Path *p = &s->paths[rng_range(&rng, s->npaths)];
        int len = (p->bx - p->ax) + (p->by - p->ay); /* segments are axis-aligned, a <= b */
        int t = (int)rng_range(&rng, (u32)len + 1);
        gs.enemy_ax[i] = p->ax;
        gs.enemy_ay[i] = p->ay;
        gs.enemy_bx[i] = p->bx;
        gs.enemy_by[i] = p->by;
        gs.enemy_x[i] = (u8)(p->ax + (p->bx > p->ax ? t : 0));
        gs.enemy_y[i] = (u8)(p->ay + (p->by > p->ay ? t : 0));
        gs.enemy_dir[i] = (u8)rng_range(&rng, 2);
        gs.enemy_period[i] = (u8)(s->period + rng_range(&rng, 3));
        gs.enemy_timer[i] = gs.enemy_period[i];
        gs.enemy_type[i] = s->type;
        gs.enemy_active[i] = 1;
        gs.num_enemies++;
    }
}
