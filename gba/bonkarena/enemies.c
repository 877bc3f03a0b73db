/* Enemies: waves, spawning at the arena edges, chasing the player, contact damage. */
#include "game.h"

typedef struct {
    u8 interval;   /* frames between spawns */
    u8 cap;        /* spawns stop while this many are alive */
    u8 burst;      /* enemies spawned at once when the wave starts */
    u8 hp_bonus;   /* added to every enemy's HP (twice for brutes) */
    u16 speed_mul; /* 8.8 multiplier of the kinds' speeds */
    u8 weight[EK_COUNT];
} WaveDef;

/* Wave N runs from (N-1):00 for one minute (wave 5 until the win at 5:00): more, faster and
 * tougher enemies each wave, and brutes from wave 3. */
static const WaveDef waves[NUM_WAVES] = {
    {56, 12, 3, 0, 256, {8, 2, 0}},
    {38, 18, 6, 2, 272, {6, 4, 0}},
    {30, 20, 8, 5, 296, {5, 3, 2}},
    {24, 24, 10, 9, 320, {4, 4, 3}},
    {20, 24, 14, 12, 352, {3, 4, 4}},
};

typedef struct {
    u16 speed; /* 8.8 px/frame */
    u8 hp;
    u8 damage; /* contact damage */
    u8 xp;     /* value of the gem dropped */
    u8 reach;  /* contact when |dx| and |dy| are both below this */
} KindDef;

static const KindDef kinds[EK_COUNT] = {
    {100, 5, 8, 1, 10},  /* slime: slow, average */
    {160, 3, 6, 1, 8},   /* bat: fast, fragile, zig-zags */
    {80, 16, 16, 3, 11}, /* brute: slow, tough, hits hard */
};

void enemies_clear(void) {
    for (int i = 0; i < MAX_ENEMIES; i++) g.enemy_active[i] = 0;
    g.enemies = 0;
}

static const WaveDef *wave_def(void) { return &waves[(g.wave ? g.wave : 1) - 1]; }

static int pick_kind(const WaveDef *w) {
    int total = w->weight[0] + w->weight[1] + w->weight[2];
    int r = (int)rnd((u32)total);
    for (int k = 0; k < EK_COUNT; k++) {
        if (r < w->weight[k]) return k;
        r -= w->weight[k];
    }
    return EK_SLIME;
}

static void spawn_one(void) {
    int i = 0;
    while (i < MAX_ENEMIES && g.enemy_active[i]) i++;
    if (i == MAX_ENEMIES) return;
    const WaveDef *w = wave_def();
    int kind = pick_kind(w);
    int side = (int)rnd(4);
    int along = (int)rnd(1024); /* position along the side, scaled below */
    for (int tries = 0; tries < 2; tries++) {
        int x, y;
        if (side < 2) {
            x = ENEMY_XMIN + ((along * (ENEMY_XMAX - ENEMY_XMIN)) >> 10);
            y = side == 0 ? ENEMY_YMIN : ENEMY_YMAX;
        } else {
            x = side == 2 ? ENEMY_XMIN : ENEMY_XMAX;
            y = ENEMY_YMIN + ((along * (ENEMY_YMAX - ENEMY_YMIN)) >> 10);
        }
        /* never right next to the player: use the opposite side instead */
        if (tries == 0 && iabs(x - g.player_x) + iabs(y - g.player_y) < 70) {
            side ^= 1;
            continue;
        }
        g.enemy_x[i] = (s16)x;
        g.enemy_y[i] = (s16)y;
        break;
    }
    g.enemy_fx[i] = 0;
    g.enemy_fy[i] = 0;
    g.enemy_kind[i] = (u8)kind;
    g.enemy_hp[i] = (s16)(kinds[kind].hp + w->hp_bonus * (kind == EK_BRUTE ? 2 : 1));
    g.enemy_flash[i] = 0;
    g.enemy_active[i] = 1;
    g.enemies++;
}

void enemies_wave_start(void) {
    int n = wave_def()->burst;
    for (int k = 0; k < n; k++) spawn_one();
    g.spawn_timer = wave_def()->interval;
}

void enemy_hit(int i, int damage, int kx, int ky) {
    if (g.enemy_kind[i] == EK_BRUTE) {
        kx >>= 1;
        ky >>= 1;
    }
    s32 x = (g.enemy_x[i] << 8) + g.enemy_fx[i] + kx;
    s32 y = (g.enemy_y[i] << 8) + g.enemy_fy[i] + ky;
    if (x < ENEMY_XMIN << 8) x = ENEMY_XMIN << 8;
    if (x > ENEMY_XMAX << 8) x = ENEMY_XMAX << 8;
    if (y < ENEMY_YMIN << 8) y = ENEMY_YMIN << 8;
    if (y > ENEMY_YMAX << 8) y = ENEMY_YMAX << 8;
    g.enemy_x[i] = (s16)(x >> 8);
    g.enemy_fx[i] = (u8)x;
    g.enemy_y[i] = (s16)(y >> 8);
    g.enemy_fy[i] = (u8)y;
    g.enemy_flash[i] = 6;
    g.enemy_hp[i] = (s16)(g.enemy_hp[i] - damage);
    if (g.enemy_hp[i] <= 0) {
        g.enemy_active[i] = 0;
        g.enemies--;
        if (g.kills < 65535) g.kills++;
        gem_drop(g.enemy_x[i], g.enemy_y[i], kinds[g.enemy_kind[i]].xp);
    }
}

#define SEP 10    /* enemies closer than this on both axes push each other apart */
#define PUSH 80   /* 8.8 px per pair every other frame */

/* Move every enemy towards the player, then push overlapping pairs apart: half of the pairs
 * each frame (b - a odd, then even), which halves the busiest loop of the game. ARM code in
 * IWRAM. */
IWRAM_CODE static void enemies_move(void) {
    s32 fx[MAX_ENEMIES], fy[MAX_ENEMIES];
    u8 idx[MAX_ENEMIES];
    int n = 0;
    const WaveDef *w = wave_def();
    int spd[EK_COUNT];
    for (int k = 0; k < EK_COUNT; k++) spd[k] = (kinds[k].speed * w->speed_mul) >> 8;
    int px = g.player_x, py = g.player_y;
    u32 t = g.time_frames;

    for (int i = 0; i < MAX_ENEMIES; i++) {
        if (!g.enemy_active[i]) continue;
        int kind = g.enemy_kind[i];
        int d = dir16(px - g.enemy_x[i], py - g.enemy_y[i]);
        if (kind == EK_BAT) d = (d + (((t + (u32)i * 11) & 32) ? 2 : -2)) & 15; /* zig-zag */
        int v = spd[kind];
        if (g.enemy_flash[i]) {
            g.enemy_flash[i]--;
            v >>= 1; /* staggered while hit */
        }
        fx[n] = (g.enemy_x[i] << 8) + g.enemy_fx[i] + ((v * dir_cos[d]) >> 8);
        fy[n] = (g.enemy_y[i] << 8) + g.enemy_fy[i] + ((v * dir_sin(d)) >> 8);
        idx[n++] = (u8)i;
    }

    int first = 1 + (int)(t & 1);
    for (int a = 0; a < n; a++) {
        s32 xa = fx[a] >> 8, ya = fy[a] >> 8;
        for (int b = a + first; b < n; b += 2) {
            s32 ddx = xa - (fx[b] >> 8);
            if (ddx >= SEP || ddx <= -SEP) continue;
            s32 ddy = ya - (fy[b] >> 8);
            if (ddy >= SEP || ddy <= -SEP) continue;
            if (iabs(ddx) >= iabs(ddy)) {
                s32 p = ddx > 0 || (ddx == 0 && (a & 1)) ? PUSH : -PUSH;
                fx[a] += p;
                fx[b] -= p;
            } else {
                s32 p = ddy > 0 ? PUSH : -PUSH;
                fy[a] += p;
                fy[b] -= p;
            }
        }
    }

    for (int a = 0; a < n; a++) {
        int i = idx[a];
        s32 x = fx[a], y = fy[a];
        if (x < ENEMY_XMIN << 8) x = ENEMY_XMIN << 8;
        if (x > ENEMY_XMAX << 8) x = ENEMY_XMAX << 8;
        if (y < ENEMY_YMIN << 8) y = ENEMY_YMIN << 8;
        if (y > ENEMY_YMAX << 8) y = ENEMY_YMAX << 8;
        g.enemy_x[i] = (s16)(x >> 8);
        g.enemy_fx[i] = (u8)x;
        g.enemy_y[i] = (s16)(y >> 8);
        g.enemy_fy[i] = (u8)y;
    }
}

static void enemies_contact(void) {
    if (g.invuln) return;
    for (int i = 0; i < MAX_ENEMIES; i++) {
        if (!g.enemy_active[i]) continue;
        const KindDef *k = &kinds[g.enemy_kind[i]];
        if (iabs(g.enemy_x[i] - g.player_x) < k->reach && iabs(g.enemy_y[i] - g.player_y) < k->reach) {
            player_hurt(k->damage);
            return;
        }
    }
}

void enemies_update(void) {
    const WaveDef *w = wave_def();
    if (g.spawn_timer) {
        g.spawn_timer--;
    } else {
        g.spawn_timer = w->interval;
        if (g.enemies < w->cap) spawn_one();
    }
    enemies_move();
    enemies_contact();
}
