/* The auto-firing weapon, its projectiles, and the XP gems dropped by enemies. */
#include "game.h"

#define PROJ_SPEED 768 /* 3 px/frame */
#define PROJ_LIFE 60
#define PROJ_REACH 8   /* hits an enemy when |dx| and |dy| are both below this */

/* direction offsets (in 22.5 degree steps) of the projectiles of one shot */
static const s8 spread[5] = {0, 1, -1, 2, -2};

void weapon_clear(void) {
    for (int i = 0; i < MAX_PROJ; i++) g.proj_life[i] = 0;
    for (int i = 0; i < MAX_GEMS; i++) g.gem_value[i] = 0;
    g.projectiles = 0;
    g.gems = 0;
}

static int nearest_enemy(void) {
    int best = -1, best_d = 1 << 30;
    for (int i = 0; i < MAX_ENEMIES; i++) {
        if (!g.enemy_active[i]) continue;
        int d = iabs(g.enemy_x[i] - g.player_x) + iabs(g.enemy_y[i] - g.player_y);
        if (d < best_d) {
            best_d = d;
            best = i;
        }
    }
    return best;
}

static void fire(void) {
    int target = nearest_enemy();
    if (target < 0) return;
    int d = dir16(g.enemy_x[target] - g.player_x, g.enemy_y[target] - g.player_y);
    int slot = 0;
    for (int k = 0; k < g.proj_count && k < 5; k++) {
        while (slot < MAX_PROJ && g.proj_life[slot]) slot++;
        if (slot == MAX_PROJ) break;
        int dk = (d + spread[k]) & 15;
        g.proj_x[slot] = g.player_x;
        g.proj_y[slot] = g.player_y;
        g.proj_fx[slot] = 0x80;
        g.proj_fy[slot] = 0x80;
        g.proj_vx[slot] = (s16)((PROJ_SPEED * dir_cos[dk]) >> 8);
        g.proj_vy[slot] = (s16)((PROJ_SPEED * dir_sin(dk)) >> 8);
        g.proj_life[slot] = PROJ_LIFE;
        g.projectiles++;
    }
    g.shots++;
    g.fire_timer = g.fire_cooldown;
}

static void proj_free(int p) {
    g.proj_life[p] = 0;
    g.projectiles--;
}

void weapon_update(void) {
    if (g.fire_timer)
        g.fire_timer--;
    else if (g.enemies)
        fire();

    for (int p = 0; p < MAX_PROJ; p++) {
        if (!g.proj_life[p]) continue;
        s32 x = (g.proj_x[p] << 8) + g.proj_fx[p] + g.proj_vx[p];
        s32 y = (g.proj_y[p] << 8) + g.proj_fy[p] + g.proj_vy[p];
        g.proj_x[p] = (s16)(x >> 8);
        g.proj_fx[p] = (u8)x;
        g.proj_y[p] = (s16)(y >> 8);
        g.proj_fy[p] = (u8)y;
        if (--g.proj_life[p] == 0) {
            g.projectiles--;
            continue;
        }
        int px = g.proj_x[p], py = g.proj_y[p];
        if (px < ARENA_X0 || px >= ARENA_X1 || py < ARENA_Y0 || py >= ARENA_Y1) {
            proj_free(p);
            continue;
        }
        for (int i = 0; i < MAX_ENEMIES; i++) {
            if (!g.enemy_active[i]) continue;
            if (iabs(g.enemy_x[i] - px) < PROJ_REACH && iabs(g.enemy_y[i] - py) < PROJ_REACH) {
                enemy_hit(i, g.damage, g.proj_vx[p], g.proj_vy[p]);
                proj_free(p);
                break;
            }
        }
    }
}

void gem_drop(int x, int y, int value) {
    int i = 0;
    while (i < MAX_GEMS && g.gem_value[i]) i++;
    if (i == MAX_GEMS) { /* floor full: the value joins an existing gem */
        i = g.kills & (MAX_GEMS - 1);
        int v = g.gem_value[i] + value;
        g.gem_value[i] = (u8)(v > 255 ? 255 : v);
        return;
    }
    g.gem_x[i] = (s16)x;
    g.gem_y[i] = (s16)y;
    g.gem_value[i] = (u8)value;
    g.gems++;
}

/* Gems within pickup_radius (on both axes) fly to the player, 3 px a frame; collected within
 * GEM_REACH px. */
#define GEM_REACH 6
#define GEM_SPEED 3
void gems_update(void) {
    int r = g.pickup_radius;
    for (int i = 0; i < MAX_GEMS; i++) {
        if (!g.gem_value[i]) continue;
        int dx = g.player_x - g.gem_x[i], dy = g.player_y - g.gem_y[i];
        if (iabs(dx) > r || iabs(dy) > r) continue;
        if (iabs(dx) > GEM_REACH || iabs(dy) > GEM_REACH) {
            int d = dir16(dx, dy);
            g.gem_x[i] = (s16)(g.gem_x[i] + ((GEM_SPEED * dir_cos[d] + 128) >> 8));
            g.gem_y[i] = (s16)(g.gem_y[i] + ((GEM_SPEED * dir_sin(d) + 128) >> 8));
            continue;
        }
        int v = g.gem_value[i];
        g.gem_value[i] = 0;
        g.gems--;
        player_gain_xp(v);
    }
}
