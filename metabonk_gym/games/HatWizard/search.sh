#!/usr/bin/env bash
# How every variable of this folder's data.json was found, with metabonk's own tools; run on a
# copy of the folder whose data.json holds only keyinput, it writes the same variables again and
# the start states (tests/test_public_games.py runs it). Usage: bash search.sh FOLDER
set -euo pipefail
F="${1:?usage: bash search.sh FOLDER}"
m() { metabonk "$@" >/dev/null; }

# Past the title (START) and the "LEVEL 1-1" card: level 1-1, the default start.
m integrate state "$F" level1 --inputs "wait 300; START 10; wait 150" --default
# Level 1-1 by hand: walk to the gap, jump (B), throw the hat (A), fly to it (A again), walk on.
L1="RIGHT 90; RIGHT+B 1; RIGHT 8; RIGHT+A 1; RIGHT 25; RIGHT+A 1; RIGHT 400; wait 100"
# Level 1-2: climb the steps with jumps, then the same throw-and-fly over the gap.
L2="RIGHT 60; RIGHT+B 1; RIGHT 60; RIGHT+B 1; RIGHT 60; RIGHT+B 1; RIGHT 60; RIGHT+B 1; RIGHT 40;
 RIGHT+B 1; RIGHT 20; RIGHT+B 1; RIGHT 8; RIGHT+A 1; RIGHT 25; RIGHT+A 1; RIGHT 400"
L2="${L2//$'\n'/}"

# player_x, player_y: the wizard's position (22.10 fixed point: 1024 per pixel), moving right
# raises x, left lowers it; a jump (B) lowers y, the fall raises it. `kept` drops the copies the
# game rewrites every frame.
m ram search start "$F" --type s32 --inputs "wait 10"
m ram filter "$F" increased --inputs "RIGHT 30"
m ram filter "$F" increased --inputs "RIGHT 20"
m ram filter "$F" decreased --inputs "LEFT 60"
m ram filter "$F" decreased --inputs "LEFT 20"
m ram filter "$F" increased --inputs "RIGHT 40"
m ram filter "$F" kept
m ram add "$F" player_x
m ram search start "$F" --type s32 --inputs "wait 10"
m ram filter "$F" decreased --inputs "B 1; wait 8"
m ram filter "$F" increased --inputs "wait 40"
m ram filter "$F" decreased --inputs "B 1; wait 6"
m ram filter "$F" increased --inputs "wait 40"
m ram filter "$F" kept
m ram filter "$F" gt 10000  # y is 80 px (81,920) here; a flag word beside it is ~1,040
m ram add "$F" player_y

# level: the level index (0 = 1-1); 0 in 1-1, 1 after finishing it, 2 after 1-2.
m ram search start "$F" --type u32 --inputs "wait 10"
m ram filter "$F" eq 0
m ram filter "$F" unchanged --inputs "RIGHT 60; LEFT 60"
m ram filter "$F" eq 1 --inputs "$L1"
m ram filter "$F" unchanged --inputs "wait 100"
m ram filter "$F" eq 2 --inputs "$L2"
# Three u32 copies are left (0x030071FC, 0x030074AC, 0x03007E70) and all pass `kept`: the
# game never rewrites them. Poked before 1-1 ends (integrate state --poke, as below), only
# 0x030071FC changes which level comes next: it is the one the game reads.
m ram list "$F"
m ram add "$F" level 0x030071FC u32

# One start per level: the level index set one below (the game loads the next level when
# 1-1 is finished), then 1-1 played through. level2 is 1-2, ..., level12 is 2-4.
for n in $(seq 2 12); do
  m integrate state "$F" "level$n" --from level1 --poke "level=$((n - 2))" --inputs "$L1"
done
# Tile classes: the background tiles a seeded random walk shows from level 1-1, grouped by
# picture (contact sheet tiles.png with group ids), then named.
m integrate tiles "$F"
m tiles label "$F" 0=decor 1=decor 2=decor 3=decor 4=decor 5=decor 6=decor 9=decor 11=decor \
  7=ground 8=ground 15=ground 16=ground 10=earth 18=earth 19=earth 12=spikes 13=spikes \
  14=spikes 17=sign 20=sign 21=sign 22=sign 23=sign
rm -rf "$F/ram-session" "$F/tile_groups.json" "$F/tiles.png"
