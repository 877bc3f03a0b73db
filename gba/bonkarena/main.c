/* BonkArena main loop: host commands, new game / warp, one game frame per VBlank. */
#include "game.h"

GameState g __attribute__((section(".gamestate")));


/* Upgrades a player plausibly holds at the start of each wave (CMD_WARP): the first
 * warp_level[N] - 1 picks of warp_picks, at full HP, kills and XP at 0. Measured with scripted
 * players: a kiting player is near level 6 / 9 / 14 / 18 at 1:00 / 2:00 / 3:00 / 4:00, an expert
 * one a level or two above. Wave 5 starts with damage 5, fire rate 4, multishot 3, speed 2,
 * max HP 1, armor 1, magnet 1. */
static const u8 warp_level[NUM_WAVES + 1] = {1, 1, 6, 10, 14, 18};
static const u8 warp_picks[17] = {
    UPG_DAMAGE, UPG_FIRERATE, UPG_MULTI, UPG_DAMAGE, UPG_SPEED,    /* level 6 */
    UPG_FIRERATE, UPG_MULTI, UPG_DAMAGE, UPG_MAXHP,                /* level 10 */
    UPG_FIRERATE, UPG_DAMAGE, UPG_MULTI, UPG_ARMOR,                /* level 14 */
    UPG_DAMAGE, UPG_FIRERATE, UPG_SPEED, UPG_MAGNET,               /* level 18 */
};

static void new_game(void) {
    u32 seed = g.hdr.seed;
    /* clear everything after the header */
    u8 *p = (u8 *)&g + sizeof(BonkHeader);
    for (u32 i = 0; i < sizeof(GameState) - sizeof(BonkHeader); i++) p[i] = 0;
    g.rng = seed_mix(seed);
    g.player_x = (ARENA_X0 + ARENA_X1) / 2;
    g.player_y = (ARENA_Y0 + ARENA_Y1) / 2;
    g.wave = 1;
    g.level = 1;
    g.xp_next = xp_for_level(1);
    player_reset_stats();
    g.hp = g.max_hp;
    g.spawn_timer = 60;
    g.fire_timer = 30;
    enemies_clear();
    weapon_clear();
    gfx_reset();
}

static void warp(int wave) {
    new_game();
    if (wave < 1) wave = 1;
    if (wave > NUM_WAVES) wave = NUM_WAVES;
    int level = warp_level[wave];
    for (int i = 0; i < level - 1; i++) upgrade_apply(warp_picks[i]);
    g.level = (u16)level;
    g.xp_next = xp_for_level(level);
    g.hp = g.max_hp;
    g.wave = (u8)wave;
    g.time_frames = (u32)(wave - 1) * FRAMES_PER_WAVE;
    g.time_s = (u16)((wave - 1) * 60);
    if (wave > 1) enemies_wave_start();
}

static void handle_command(void) {
    u8 cmd = g.hdr.cmd;
    if (cmd == CMD_NEW_GAME)
        new_game();
    else if (cmd == CMD_WARP)
        warp(g.hdr.cmd_arg);
    g.hdr.cmd_ack = cmd;
    g.hdr.cmd_count++;
    g.hdr.cmd = CMD_NONE;
}

/* One frame of play. */
static void play_frame(void) {
    if (g.won || g.lost) return; /* frozen until the next host command */
    if (g.menu_open) {
        menu_update();
        return;
    }
    g.time_frames++;
    if (++g.sec_frames >= 60) {
        g.sec_frames = 0;
        g.time_s++;
        if (g.time_s % 60 == 0 && g.wave < NUM_WAVES) {
            g.wave++;
            enemies_wave_start();
        }
    }
    player_update();
    enemies_update();
    weapon_update();
    gems_update();
    if (g.hp == 0) {
        g.lost = 1;
        return;
    }
    if (g.time_frames >= WIN_FRAMES) {
        g.won = 1;
        return;
    }
    if (g.xp >= g.xp_next) player_gain_xp(0); /* opens the level-up menu */
}

int main(void) {
    gfx_init();
    irq_init_vblank();
    g.hdr.seed = 0;
    new_game();
    g.hdr.magic = BONK_MAGIC;
    for (;;) {
        vblank_intr_wait();
        gfx_draw(); /* in VBlank: show the state left by the previous frame */
        keys_poll();
        g.hdr.frame++;
        if (g.hdr.cmd != CMD_NONE)
            handle_command();
        else
            play_frame();
    }
}
