#!/usr/bin/env bash
# uCity's start states, played from power-on with `metabonk integrate state` (reproducible: the
# same inputs give the same file, byte for byte).
#
#   bash starts.sh FOLDER
#
# random_map (the default): Random Map, city "A", map seed 00 (land), January 1950, 20000 funds;
# rock_river .. futura: the game's six scenarios. Every start then turns disasters off in the
# pause menu (a fire stops the calendar until it burns out) and is back in the city view, ready
# to build. Set METABONK to run another metabonk (default: metabonk on PATH).
set -euo pipefail
F=${1:?usage: bash starts.sh FOLDER}
MB=${METABONK:-metabonk}

TITLE="wait 120; START 5; wait 60"
# pause menu (START), Disasters (5 x DOWN), A, A toggles Enable off, B, B back to the city
NODIS="START 5; wait 30; DOWN 5; wait 5; DOWN 5; wait 5; DOWN 5; wait 5; DOWN 5; wait 5; DOWN 5; wait 5; A 5; wait 20; A 5; wait 20; B 5; wait 20; B 5; wait 30"
# Random Map, city name "A", End, map seed 00 (land), Generate, Done
RANDOM_MAP="$TITLE; DOWN 5; wait 20; A 5; wait 60; A 5; wait 10; UP 5; wait 10; LEFT 5; wait 10; A 5; wait 60; A 5; wait 180; UP 5; wait 10; A 5; wait 120; $NODIS"
# Load Scenario, then RIGHT k times: 0 Rock River, 1 Boringtown, 2 Portville, 3 Newdale, 4 Central,
# 5 Futura
scenario() {
  local k=$1 picks=""
  for ((i = 0; i < k; i++)); do picks+="RIGHT 5; wait 30; "; done
  echo "$TITLE; DOWN 5; wait 20; DOWN 5; wait 20; A 5; wait 60; ${picks}A 5; wait 120; $NODIS"
}
"$MB" integrate state "$F" random_map --inputs "$RANDOM_MAP" --default
k=0
for name in rock_river boringtown portville newdale central futura; do
  "$MB" integrate state "$F" "$name" --inputs "$(scenario $k)"
  k=$((k + 1))
done
