/* Fixed-point direction table (dir16() itself is inline in game.h). */
#include "game.h"

/* cos(k * 22.5 degrees) * 256; y grows downwards, so direction 4 is down, 12 is up. */
const s16 dir_cos[16] = {256, 237, 181, 98, 0, -98, -181, -237, -256, -237, -181, -98, 0, 98, 181, 237};
