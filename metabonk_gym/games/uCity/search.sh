#!/usr/bin/env bash
# uCity's RAM map, re-found from the ROM with metabonk's own commands.
#
#   bash search.sh FOLDER
#
# FOLDER is a copy of this game folder (rom.gba, metadata.json, metabonk.json; data.json may hold
# only keyinput). From the folder's start states (starts.sh makes them where they are missing),
# the script finds every variable of data.json with the same address and type. What to look for came from the game's source
# (AntonioND/ucity-advance at v1.0.1); where it is, only from these searches.
# Set METABONK to run another metabonk (default: metabonk on PATH).
set -euo pipefail
F=${1:?usage: bash search.sh FOLDER}
MB=${METABONK:-metabonk}
S=(--session "$F/ram-session")

# The start states it searches from: the folder's own (starts.sh rebuilds them from power-on).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for name in random_map boringtown rock_river central; do
  [ -f "$F/$name.state" ] || { bash "$HERE/starts.sh" "$F"; break; }
done
RM="$F/random_map.state"

# --- funds: the status bar shows 20000 (one signed 32-bit value in RAM holds it) ----------------
"$MB" ram search start "$F" --state "$RM" --type s32 "${S[@]}"
"$MB" ram filter "$F" eq 20000 "${S[@]}"
"$MB" ram add "$F" funds "${S[@]}"

# --- the cursor (screen pixels): the probes move it 8 pixels a press (from the session's start) --
"$MB" ram suggest "$F" "${S[@]}" --add x=cursor_x --add y=cursor_y

# --- the city view's mode: 0 the city, 3 the build menu (SELECT opens it, B closes it) ----------
"$MB" ram search start "$F" --state "$RM" --type s32 "${S[@]}"
"$MB" ram filter "$F" eq 3 "${S[@]}" --inputs "SELECT 5; wait 10"
"$MB" ram filter "$F" eq 0 "${S[@]}" --inputs "B 5; wait 10"
"$MB" ram add "$F" mode "${S[@]}"

# --- date: February 1950 at the start, a month every ~130 frames --------------------------------
"$MB" ram search start "$F" --state "$RM" --type s32 "${S[@]}"
"$MB" ram filter "$F" eq 1950 "${S[@]}"
"$MB" ram add "$F" year "${S[@]}"
"$MB" ram search start "$F" --state "$RM" --type s32 "${S[@]}"
"$MB" ram filter "$F" eq 1 "${S[@]}"
"$MB" ram filter "$F" eq 2 "${S[@]}" --inputs "wait 130"
"$MB" ram filter "$F" eq 3 "${S[@]}" --inputs "wait 130"
"$MB" ram add "$F" month "${S[@]}"

# --- the map's scroll (pixels): the cursor pushes the view at the screen's edge -----------------
"$MB" ram search start "$F" --state "$RM" --type s32 "${S[@]}"
"$MB" ram filter "$F" eq 136 "${S[@]}"
"$MB" ram filter "$F" eq 0 "${S[@]}" --inputs "LEFT 120; wait 10"
"$MB" ram filter "$F" shown "${S[@]}"
"$MB" ram add "$F" scroll_x "${S[@]}"
"$MB" ram search start "$F" --state "$RM" --type s32 "${S[@]}"
"$MB" ram filter "$F" eq 176 "${S[@]}"
"$MB" ram filter "$F" eq 0 "${S[@]}" --inputs "UP 120; wait 10"
"$MB" ram filter "$F" shown "${S[@]}"
"$MB" ram add "$F" scroll_y "${S[@]}"

# --- population: the pause menu shows Boringtown's 444 people -----------------------------------
"$MB" ram search start "$F" --state "$F/boringtown.state" --type u32 "${S[@]}"
"$MB" ram filter "$F" eq 444 "${S[@]}"
"$MB" ram add "$F" population "${S[@]}"

# --- the city's class (0 village .. 4 capital): Rock River is a city, Central a metropolis -------
"$MB" ram search start "$F" --state "$F/rock_river.state" --type s32 "${S[@]}"
"$MB" ram filter "$F" eq 2 "${S[@]}"
"$MB" ram filter "$F" eq 3 "${S[@]}" --state "$F/central.state"
"$MB" ram add "$F" city_class "${S[@]}"

# --- negative budgets (4 in a row: game over): spend every coin (6 coal plants at 3000, 4 police
# stations at 500) and the police's upkeep puts every quarter in the red (April, July, ...) -------
MENU="SELECT 5; wait 10"
COAL="$MENU$(printf '; DOWN 5; wait 5%.0s' {1..8}); A 5; wait 90; A 5; wait 10$(printf '; RIGHT 4; wait 4; RIGHT 4; wait 4; RIGHT 4; wait 4; RIGHT 4; wait 4; A 5; wait 10%.0s' {1..5})"
POLICE="B 5; wait 10; $MENU$(printf '; DOWN 5; wait 5%.0s' {1..3}); A 5; wait 90$(printf '; DOWN 4; wait 4%.0s' {1..4}); A 5; wait 10$(printf '; LEFT 4; wait 4; LEFT 4; wait 4; LEFT 4; wait 4; A 5; wait 10%.0s' {1..3}); B 5; wait 10"
"$MB" ram search start "$F" --state "$RM" --inputs "$COAL; $POLICE" --type s32 "${S[@]}"
"$MB" ram filter "$F" eq 0 "${S[@]}"
"$MB" ram filter "$F" eq 1 "${S[@]}" --inputs "wait 400"
"$MB" ram filter "$F" eq 2 "${S[@]}" --inputs "$(printf 'wait 200; A 2; wait 100; A 2; %.0s' {1..4})wait 1"
"$MB" ram add "$F" negative_budgets "${S[@]}"
