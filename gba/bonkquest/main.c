/* BonkQuest main loop: one game frame per VBlank (VBlankIntrWait), host commands first. */
#include "game.h"

/* The whole game state, first in EWRAM at 0x02000000 (zeroed by crt0). */
GameState gs __attribute__((section(".gamestate")));

/* The compiler may emit calls to these for struct copies; there is no libc. */
void *memcpy(void *dst, const void *src, unsigned int n) {
    u8 *d = dst;
    const u8 *s = src;
    while (n--) *d++ = *s++;
    return dst;
}

void *memset(void *dst, int c, unsigned int n) {
    u8 *d = dst;
    while (n--) *d++ = (u8)c;
    return dst;
}

static void run_command(u8 cmd, u8 arg) {
    int mode = (arg & ARG_RIDDLES) ? 1 : 0; /* the riddle quest (game.h ARG_RIDDLES) */
    switch (cmd) {
    case CMD_NEW_GAME: new_game(gs.hdr.seed, mode); break;
    case CMD_WARP:
        new_game(gs.hdr.seed, mode);
        warp(arg & ~ARG_RIDDLES);
        break;
    default: break; /* unknown commands are acknowledged and ignored */
    }
}

int main(void) {
    gfx_init();
    irq_init_vblank();
    new_game(0, 0);
    gs.hdr.magic = BONK_MAGIC;
    for (;;) {
        vblank_intr_wait();
        keys_poll();
        gs.hdr.frame++;
        u8 cmd = gs.hdr.cmd;
        if (cmd != CMD_NONE) {
            run_command(cmd, gs.hdr.cmd_arg);
            gs.hdr.cmd_ack = cmd;
            gs.hdr.cmd_count++;
            gs.hdr.cmd = CMD_NONE;
        } else if (!gs.won && !gs.lost) {
            game_update();
        }
        gfx_frame();
    }
}
