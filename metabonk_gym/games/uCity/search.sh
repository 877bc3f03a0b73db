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

# --- tile classes: the map's background tiles (256 colours) seen from Boringtown on a seeded
# random walk of the cursor, grouped, then named -----------------------------------------------
"$MB" integrate tiles "$F" --start boringtown
"$MB" tiles label "$F" 0=land 1=land 2=land 3=land 4=land 5=land 6=land 7=land 8=land 9=land 10=land 11=land 12=land 13=land 14=land 15=land 74=land 75=land 76=land 77=land 16=water 17=water 18=water 19=water 20=water 21=water 22=water 23=water 24=water 25=water 26=water 27=water 28=water 29=water 32=road 33=road 34=road 35=road 37=road 39=road 40=road 36=text 38=text 41=text 42=text 43=text 44=text 45=text 46=text 47=text 48=text 55=text 56=text 57=text 58=text 59=text 60=text 61=text 71=text 72=text 73=text 31=ui 78=ui 79=ui 30=building 49=building 50=building 51=building 52=building 53=building 54=building 66=building 62=forest 64=forest 68=forest 70=forest 63=power_line 65=power_line 67=power_line 69=power_line 80=zone 81=zone 82=zone 83=zone 84=zone 85=zone 86=zone 87=zone 88=zone 89=zone 90=zone 91=zone 92=zone 93=zone 94=zone 95=zone
rm -f "$F/tile_groups.json" "$F/tiles.png"
