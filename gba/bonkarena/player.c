/* The player: d-pad movement, damage, experience, the level-up menu and the upgrades. */
#include "game.h"

#define BASE_HP 100
#define BASE_DAMAGE 3
#define BASE_COOLDOWN 36
#define BASE_SPEED 320 /* 1.25 px/frame */
#define BASE_PICKUP 24

/* Highest level of each upgrade; 0 = unlimited (HEAL). */
static const u8 upgrade_max[NUM_UPGRADES] = {8, 6, 5, 8, 0, 5, 4, 5};

void player_reset_stats(void) {
    g.max_hp = BASE_HP;
    g.damage = BASE_DAMAGE;
    g.fire_cooldown = BASE_COOLDOWN;
    g.player_speed = BASE_SPEED;
    g.pickup_radius = BASE_PICKUP;
    g.proj_count = 1;
    g.armor = 0;
}

u16 xp_for_level(int level) { return (u16)(3 + 2 * level); }

void upgrade_apply(int id) {
    g.upgrades[id]++;
    switch (id) {
    case UPG_DAMAGE: g.damage += 1; break;
    case UPG_FIRERATE: if (g.fire_cooldown > 12) g.fire_cooldown -= 4; break;
    case UPG_SPEED: g.player_speed += 48; break;
    case UPG_MAXHP: g.max_hp += 15; g.hp += 15; break;
    case UPG_HEAL: g.hp += g.max_hp >> 1; break;
    case UPG_MAGNET: g.pickup_radius += 12; break;
    case UPG_MULTI: g.proj_count++; break;
    case UPG_ARMOR: g.armor++; break;
    }
    if (g.hp > g.max_hp) g.hp = g.max_hp;
}

static int upgrade_available(int id) {
    return upgrade_max[id] == 0 || g.upgrades[id] < upgrade_max[id];
}

/* Three different available upgrades, drawn by the RNG. */
static void menu_open(void) {
    u8 pool[NUM_UPGRADES];
    int n = 0;
    for (int i = 0; i < NUM_UPGRADES; i++)
        if (upgrade_available(i)) pool[n++] = (u8)i;
    for (int k = 0; k < 3; k++) {
        if (k >= n) { /* nearly everything maxed: HEAL fills the rest */
            g.menu_options[k] = UPG_HEAL;
            continue;
        }
        int j = k + (int)rnd((u32)(n - k)); /* partial Fisher-Yates */
        u8 t = pool[k];
        pool[k] = pool[j];
        pool[j] = t;
        g.menu_options[k] = pool[k];
    }
    g.menu_open = 1;
    g.menu_cursor = 0;
    g.menu_timer = 0;
}

/* Add experience; opens the menu when the next level is reached. */
void player_gain_xp(int amount) {
    u32 xp = g.xp + (u32)amount;
    g.xp = xp > 60000 ? 60000 : (u16)xp;
    if (!g.menu_open && g.xp >= g.xp_next) {
        g.xp -= g.xp_next;
        g.level++;
        g.xp_next = xp_for_level(g.level);
        menu_open();
    }
}

/* Menu input: UP/DOWN move the cursor (repeat while held), A (held or pressed) picks, after
 * MENU_DELAY frames. After MENU_TIMEOUT frames the highlighted option is taken anyway, so a
 * player that never presses A cannot stall the game forever. */
void menu_update(void) {
    g.menu_timer++;
    if (g.menu_timer < MENU_DELAY) return;
    int rep = (g.menu_timer & 15) == 0;
    if (key_hit(KEY_UP) || (rep && key_down(KEY_UP)))
        g.menu_cursor = g.menu_cursor == 0 ? 2 : g.menu_cursor - 1;
    else if (key_hit(KEY_DOWN) || (rep && key_down(KEY_DOWN)))
        g.menu_cursor = g.menu_cursor == 2 ? 0 : g.menu_cursor + 1;
    else if (key_down(KEY_A) || g.menu_timer >= MENU_TIMEOUT) {
        upgrade_apply(g.menu_options[g.menu_cursor]);
        g.menu_open = 0;
        g.menu_timer = 0;
        player_gain_xp(0); /* another level may be waiting */
    }
}

void player_hurt(int amount) {
    amount -= g.armor;
    if (amount < 1) amount = 1;
    g.damage_taken += (u16)amount;
    g.hp = amount >= g.hp ? 0 : (u16)(g.hp - amount);
    g.invuln = INVULN_FRAMES;
}

void player_update(void) {
    int dx = 0, dy = 0;
    if (key_down(KEY_LEFT)) dx = -1;
    else if (key_down(KEY_RIGHT)) dx = 1;
    if (key_down(KEY_UP)) dy = -1;
    else if (key_down(KEY_DOWN)) dy = 1;
    int v = g.player_speed;
    if (dx && dy) v = (v * 181) >> 8; /* diagonal: 1/sqrt(2) */
    g.player_moving = (dx | dy) != 0;
    if (dx) g.player_facing = dx < 0;

    s32 x = (g.player_x << 8) + g.player_fx + dx * v;
    s32 y = (g.player_y << 8) + g.player_fy + dy * v;
    if (x < PLAYER_XMIN << 8) x = PLAYER_XMIN << 8;
    if (x > PLAYER_XMAX << 8) x = PLAYER_XMAX << 8;
    if (y < PLAYER_YMIN << 8) y = PLAYER_YMIN << 8;
    if (y > PLAYER_YMAX << 8) y = PLAYER_YMAX << 8;
    g.player_x = (s16)(x >> 8);
    g.player_fx = (u8)x;
    g.player_y = (s16)(y >> 8);
    g.player_fy = (u8)y;
    if (g.invuln) g.invuln--;
}
