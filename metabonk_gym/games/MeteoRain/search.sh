#!/usr/bin/env bash
# MeteoRain's integration, kept as a script: rebuilds the start states from power-on and re-finds
# every variable of data.json with metabonk's own RAM search, in a copy of this folder whose
# data.json holds only keyinput.
#
#   bash search.sh FOLDER            # METABONK=... picks another metabonk command
#
# The game is Lua 5.4 (32-bit integers) on BPCore-Engine: each variable is a global of main.lua,
# a 4-byte signed integer in the Lua heap (EWRAM). The heap is laid out the same way on every run
# from power-on (the script and its inputs are deterministic), and the globals table is not
# resized once play has begun, so these addresses hold in every game from the start states on.
# Stale copies on the Lua stack follow the same values; `kept` (a value written stays written)
# drops them. Every search is 32-bit signed (`--type s32`), the type of a Lua integer here,
# and begins at the `play` start (`--state`, the folder's default start).
set -euo pipefail
F=${1:?usage: bash search.sh FOLDER (a copy of the MeteoRain folder)}
read -r -a M <<<"${METABONK:-metabonk}"
S=(--session "$F/ram-session")
quiet() { "${M[@]}" "$@" >/dev/null; }
last() { "${M[@]}" "$@" | tail -n 1; }

# Start states (from power-on). The title ("press button to start") leaves on A or B, not START;
# 60 frames of fade later the game is on. play: the first game. The meteors of a game do not
# depend on the player's moves or timing (the game draws a random x each time a meteor lands or
# hits), so every episode from one start meets the same meteors; game2..game4 are second games,
# after a first game lost in a different way, so the random numbers went on differently and each
# is a different sequence of meteors (game2: the first game lost standing still; game3: after
# LEFT 30; game4: after RIGHT 30).
PLAY="wait 300; A 6; wait 90"
quiet integrate state "$F" play --inputs "$PLAY" --default
quiet integrate state "$F" game2 --inputs "$PLAY; wait 560; A 6; wait 90"
quiet integrate state "$F" game3 --inputs "$PLAY; LEFT 30; wait 700; A 6; wait 90"
quiet integrate state "$F" game4 --inputs "$PLAY; RIGHT 30; wait 1200; A 6; wait 90"

# game_state (main.lua's STATE): 1 in play, 2 once a meteor hits the player (standing still at
# the start, one does within 150 frames), 3 in the fade before a game, 0 on the title.
quiet ram search start "$F" --state "$F/play.state" "${S[@]}" --type s32
quiet ram filter "$F" eq 1 "${S[@]}"
last ram filter "$F" eq 2 --inputs "wait 300" "${S[@]}"
"${M[@]}" ram add "$F" game_state "${S[@]}"

# score: meteors that reached the ground this game (the first lands ~100 frames in; walking
# right for 30 frames dodges the next and sees it land).
quiet ram search start "$F" --state "$F/play.state" "${S[@]}" --type s32
quiet ram filter "$F" eq 0 "${S[@]}"
quiet ram filter "$F" eq 1 --inputs "wait 120" "${S[@]}"
quiet ram filter "$F" increased --inputs "RIGHT 30; wait 40" "${S[@]}"
last ram filter "$F" kept "${S[@]}"
"${M[@]}" ram add "$F" score "${S[@]}"

# player_x: the player's left edge in pixels, -1..225 (3 pixels a frame; y is always 140).
quiet ram search start "$F" --state "$F/play.state" "${S[@]}" --type s32
quiet ram filter "$F" eq 112 "${S[@]}"
quiet ram filter "$F" increased --inputs "RIGHT 8" "${S[@]}"
quiet ram filter "$F" decreased --inputs "LEFT 4" "${S[@]}"
last ram filter "$F" kept "${S[@]}"
"${M[@]}" ram add "$F" player_x "${S[@]}"

# ticks: the game's frame counter (one per frame in play, 1..3601, then 1 again).
quiet ram search start "$F" --state "$F/play.state" "${S[@]}" --type s32
quiet ram filter "$F" delta 10 --inputs "wait 10" "${S[@]}"
quiet ram filter "$F" delta 5 --inputs "wait 5" "${S[@]}"
last ram filter "$F" kept "${S[@]}"
"${M[@]}" ram add "$F" ticks "${S[@]}"

# gameover_timer (main.lua's ticks_anim): 0 in play; 180 on the frame a meteor hits the player,
# then down by one per game-over frame. The env's `lost` (metabonk.json).
quiet ram search start "$F" --state "$F/play.state" "${S[@]}" --type s32
quiet ram filter "$F" eq 0 "${S[@]}"
quiet ram filter "$F" range 150 180 --inputs "wait 160" "${S[@]}"
last ram filter "$F" decreased --inputs "wait 10" "${S[@]}"
"${M[@]}" ram add "$F" gameover_timer "${S[@]}"

rm -rf "$F/ram-session"
