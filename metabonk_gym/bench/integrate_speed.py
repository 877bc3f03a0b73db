"""`metabonk bench integrate`: RAM-search speed, and the bring-your-own-ROM figures.

Speed: one filter step over EWRAM + IWRAM (288 KiB, every type and byte order at once, from a
full candidate set: the costliest step) with `scan.apply_filter`, against the same filter one
address at a time in Python (`scan.naive_filter`), both on the same two snapshots of a real
game, in the same process; the two must agree. Times are CPU time (`step_ms_*`, the figure) and
wall time (`step_wall_ms_*`, which on a shared machine also counts other processes' turns: the
load average is printed beside it).

Figures (`figures=True`, needs the GBA toolchain): the bundled games are rebuilt with GameState
shuffled and padded (`make -C gba relaid`, two seeds), so no address is known in advance. On each
build a fixed, scripted search (`PLANS`: the inputs a player would give and the filters they would
apply, `eq` only with numbers the game shows on screen) must leave exactly the variable's true
address (from the build's layout.json) within `MAX_STEPS` filters; `ram suggest` must rank the
true player x/y in its top 3; and on BonkQuest, `integrate tiles` over rooms 1-5 (reached
through the game's documented host command, CMD_WARP) with the groups named as a user would
(each by the class most of its tiles have in BonkQuest's own tiles.json) must agree with
tiles.json on >= 95% of the cells shown, and its walkability guesses (player x/y from `ram
suggest`) must be right on >= 90% of the room cells.

>>> sorted(PLANS)
['BonkArena', 'BonkQuest']
>>> speed_only = {"step_ms_changed": 6.0, "step_ms_max": 8.2, "step_wall_ms_changed": 6.0,
...               "step_wall_ms_eq": 8.6, "speedup_increased": 619.0}
>>> [(r["id"], r["met"]) for r in figure_records(speed_only)]
[('ram-filter-step', True), ('ram-filter-vs-python', None)]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.bench.figures import Target
from metabonk_gym.gamedata import bundled_game_folder
from metabonk_gym.integrate.folder import new_game_folder
from metabonk_gym.integrate.machine import Machine, region_spans
from metabonk_gym.integrate.scan import VIEWS, apply_filter, full_masks, naive_filter, parse_filter
from metabonk_gym.integrate.session import RamSearch
from metabonk_gym.integrate.suggest import rank, run_probes
from metabonk_gym.integrate.tiles import TileCollector, group_tiles, random_walk

MAX_STEPS = 8
#: Targets: CPU ms of the costliest filter step, the true x/y's rank in `ram suggest`, the tile
#: classes' agreement with tiles.json, walkability right on room cells.
STEP_TARGET_MS = Target("<=", 20.0, "ms")
SUGGEST_TOP = 3
CLASS_TARGET = Target(">=", 0.95, "%", scale=100)
WALK_TARGET = Target(">=", 0.9, "%", scale=100)
GBA_SOURCE = Path(__file__).resolve().parents[2] / "gba"
#: Per game: the relaid build's folder under gba/, and per variable a scripted search: the
#: inputs of the first snapshot, then (filter, inputs before its snapshot or None) steps.
PLANS: dict[str, dict[str, Any]] = {
    "BonkQuest": {
        "source": "bonkquest",
        "start": "wait 30",
        "vars": {
            # room 1: the key is 4 right and 1 up; an enemy patrols column 18; the door is at 22
            "hp": [("eq 5", None), ("unchanged", "RIGHT 16"), ("unchanged", "UP 4"),
                   ("unchanged", "RIGHT 20"), ("decreased", "wait 40"), ("kept", None)],
            "keys": [("eq 0", None), ("unchanged", "RIGHT 16"), ("increased", "UP 4"),
                     ("eq 1", None), ("unchanged", "RIGHT 4"), ("kept", None),
                     ("decreased", "RIGHT 16; wait 60; DOWN 4; RIGHT 12; RIGHT 8")],
            "room": [("eq 1", None), ("unchanged", "RIGHT 16; UP 4; RIGHT 20; wait 60; DOWN 4; RIGHT 12"),
                     ("increased", "RIGHT 8"), ("eq 2", None), ("shown", None)],
            "player_x": [("unchanged", "wait 20"), ("increased", "RIGHT 16"),
                         ("unchanged", "UP 4"), ("increased", "RIGHT 8"), ("decreased", "LEFT 4"), ("kept", None)],
            "player_y": [("unchanged", "wait 20"), ("unchanged", "RIGHT 16"),
                         ("decreased", "UP 4"), ("unchanged", "RIGHT 8"), ("increased", "DOWN 4"), ("kept", None)],
        },
    },
    "BonkArena": {
        "source": "bonkarena",
        "start": "wait 60",
        "vars": {
            # standing still: enemies come, the gun kills some, gems give xp, the level rises
            "hp": [("eq 100", None), ("unchanged", "wait 240"), ("decreased", "wait 120"),
                   ("kept", None)],
            "xp": [("eq 0", None), ("unchanged", "wait 240"), ("increased", "wait 120"),
                   ("increased", "wait 120"), ("decreased", "wait 120"), ("eq 0", None),
                   ("kept", None)],
            "level": [("eq 1", None), ("unchanged", "wait 480"), ("increased", "wait 120"),
                      ("kept", None)],
            "kills": [("eq 0", None), ("increased", "wait 120"), ("eq 1", None),
                      ("unchanged", "wait 120"), ("increased", "wait 120"), ("eq 3", None),
                      ("kept", None)],
        },
    },
}  # fmt: skip
WALKABLE = {"floor", "door", "key", "heart", "treasure"}
ROOM_CLASSES = WALKABLE | {"wall", "water", "chest", "chest_open", "npc", "door_locked"}


def _median_ms(fn: Any, rounds: int, clock: Any = time.process_time) -> float:
    """Median milliseconds of `fn` on `clock` (CPU time by default: on a shared machine wall
    time also counts other processes' turns)."""
    times = []
    for _ in range(rounds):
        t = clock()
        fn()
        times.append((clock() - t) * 1000)
    return statistics.median(times)


def speed(steps: int = 20) -> dict[str, Any]:
    """Median milliseconds of one filter step (vectorised) vs the per-address Python loop."""
    spans = region_spans(["ewram", "iwram"])
    with Machine.open(bundled_game_folder("BonkQuest") / "rom.gba") as machine:
        machine.run([(0, 60)])
        old = machine.snapshot(spans)
        machine.run([(1 << 4, 8)])
        new = machine.snapshot(spans)
    masks = full_masks(len(new), VIEWS)
    out: dict[str, Any] = {"snapshot_bytes": len(new), "types": len(VIEWS)}
    for op, args in (("changed", ()), ("increased", ()), ("eq", (9,)), ("delta", (1,))):
        flt = parse_filter(op, list(args))
        out[f"step_ms_{op}"] = _median_ms(lambda f=flt: apply_filter(masks, old, new, f), steps)
        out[f"step_wall_ms_{op}"] = _median_ms(
            lambda f=flt: apply_filter(masks, old, new, f), steps, time.perf_counter
        )
    flt = parse_filter("increased")
    t = time.process_time()
    slow = naive_filter(masks, old, new, flt)
    out["baseline_python_loop_ms_increased"] = (time.process_time() - t) * 1000
    fast = apply_filter(masks, old, new, flt)
    out["same_result"] = all(np.array_equal(fast[k], slow[k]) for k in VIEWS)
    out["speedup_increased"] = out["baseline_python_loop_ms_increased"] / out["step_ms_increased"]
    out["step_ms_max"] = max(v for k, v in out.items() if k.startswith("step_ms_"))
    out["load_average"] = os.getloadavg()[0]
    out["target_step_ms"] = STEP_TARGET_MS.value
    return out


def build_relaid(out: Path, seed: int) -> Path:
    """`make -C gba relaid` into `out` with `seed` (the toolchain must be installed)."""
    subprocess.run(
        ["make", "-s", "-C", str(GBA_SOURCE), "relaid", f"RELAY_OUT={out}", f"RELAY_SEED={seed}"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def game_folder(build: Path, source: str, where: Path) -> Path:
    """A fresh game folder holding a relaid ROM (what `integrate new` makes)."""

    if where.exists():
        shutil.rmtree(where)
    return new_game_folder(build / f"{source}.gba", where)


def scripted_search(
    folder: Path, start: str, plan: Sequence[tuple[str, str | None]]
) -> tuple[int, int, int]:
    """Run one plan: (filters applied when one address was left, or -1; that address; left)."""
    search = RamSearch.start(folder, inputs=start, path=folder / "search")
    for i, (words, inputs) in enumerate(plan, 1):
        op, *args = words.split()
        search.filter(parse_filter(op, args), inputs=inputs)
        if search.addresses_left() == 1:
            return i, search.sole_candidate().address, 1
    return -1, 0, search.addresses_left()


def tile_figures(
    folder: Path, x: tuple[int, str], y: tuple[int, str], moves: int = 150
) -> dict[str, Any]:
    """Tiles of BonkQuest rooms 1-5 through `TileCollector`, groups named as a user would."""
    truth = json.loads((bundled_game_folder("BonkQuest") / "tiles.json").read_text())["classes"]
    collector = TileCollector((x, y))
    cells: list[np.ndarray] = []
    with Machine.open(folder / "rom.gba") as machine:
        machine.run([(0, 30)])
        for room in range(1, 6):
            # the game's host command (gba/README.md): seed 0, CMD_WARP to `room`
            machine.core.write(0x02000008, "<u4", 0)
            machine.core.write(0x0200000D, "|u1", room)
            machine.core.write(0x0200000C, "|u1", 2)
            machine.run([(0, 4)])

            def look(m: Machine, buttons: int) -> None:
                collector.observe(m, buttons)
                cells.append(collector.screen_tiles(m))

            machine.run(random_walk(moves, seed=room), on_frame=look, every=4)
    groups = group_tiles(collector.pixels)
    members: dict[int, list[int]] = {}
    for tile, gid in groups.items():
        members.setdefault(gid, []).append(tile)
    label: dict[int, str] = {}
    for gid, tiles in members.items():  # a user names each group by what most of it shows
        seen: dict[str, int] = {}
        for t in tiles:
            name = truth.get(str(t), "unknown")
            seen[name] = seen.get(name, 0) + collector.seen.get(t, 0)
        label[gid] = max(seen, key=seen.__getitem__)
    votes: dict[str, list[int]] = {}  # walkability by class, as `tiles label` decides it
    for gid, tiles in members.items():
        v = votes.setdefault(label[gid], [0, 0])
        v[0] += sum(collector.onto.get(t, 0) for t in tiles)
        v[1] += sum(collector.blocked.get(t, 0) for t in tiles)
    walk_guess = {
        gid: None
        if sum(votes[label[gid]]) == 0
        else votes[label[gid]][0] / sum(votes[label[gid]]) >= 0.5
        for gid in members
    }
    ids, counts = np.unique(np.concatenate([c[c >= 0] for c in cells]), return_counts=True)
    names = [truth.get(str(int(t))) for t in ids]
    agree = np.array([label[groups[int(t)]] == n for t, n in zip(ids, names, strict=True)])
    in_room = np.array([n in ROOM_CLASSES for n in names])
    walk_ok = np.array(
        [walk_guess[groups[int(t)]] == (n in WALKABLE) for t, n in zip(ids, names, strict=True)]
    )
    return {
        "tiles_distinct": len(groups),
        "tile_groups": len(members),
        "cells_shown": int(counts.sum()),
        "class_agreement": float((agree * counts).sum() / counts.sum()),
        "walkable_right": float((walk_ok * counts)[in_room].sum() / counts[in_room].sum()),
    }


def relaid_figures(seeds: Sequence[int] = (1, 2)) -> dict[str, Any]:
    """The bring-your-own-ROM figures on relaid builds of both games (see the module docstring)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="metabonk-relaid-") as tmp:
        root = Path(tmp)
        for seed in seeds:
            build = build_relaid(root / f"build{seed}", seed)
            for game, plan in PLANS.items():
                layout = json.loads((build / plan["source"] / "layout.json").read_text())
                folder = game_folder(build, plan["source"], root / f"{game}{seed}")
                worst = 0
                for var, steps in plan["vars"].items():
                    used, address, _ = scripted_search(folder, plan["start"], steps)
                    ok = used > 0 and address == layout[var]["address"]
                    out[f"seed{seed} {game} {var} steps"] = used if ok else f"NOT FOUND ({used})"
                    worst = max(worst, used if ok else 99)
                out[f"seed{seed} {game} worst steps (<= {MAX_STEPS})"] = worst
                spans = region_spans(["ewram", "iwram"])
                with Machine.open(folder / "rom.gba") as machine:
                    machine.run([(0, 60)])
                    snaps, held, frames = run_probes(machine, spans)
                ranked = rank(snaps, held, frames, spans, top=3)
                for role, var in (("x", "player_x"), ("y", "player_y")):
                    where = [s.address for s in ranked[role]]
                    true = layout[var]["address"]
                    out[f"seed{seed} {game} suggest {role} rank"] = (
                        where.index(true) + 1 if true in where else "not in top 3"
                    )
                if game == "BonkQuest":
                    x, y = ranked["x"][0], ranked["y"][0]
                    tiles = tile_figures(folder, (x.address, x.type), (y.address, y.type))
                    out.update({f"seed{seed} {game} {k}": v for k, v in tiles.items()})
    return out


def run(steps: int = 20, figures: bool = True) -> dict[str, Any]:
    """Speed, and with `figures` the relaid-ROM figures (needs the toolchain)."""
    out = speed(steps)
    if figures:
        out.update(relaid_figures())
    return out


def _speed_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    cpu = [v for k, v in result.items() if k.startswith("step_ms_") and k != "step_ms_max"]
    wall = [v for k, v in result.items() if k.startswith("step_wall_ms_")]
    worst = result["step_ms_max"]
    name = "one RAM-search filter step over EWRAM + IWRAM (288 KiB, 15 value types at once, full candidate set), CPU time"
    text = f"{min(cpu):.1f}-{worst:.1f} ms CPU, {min(wall):.1f}-{max(wall):.1f} ms wall"
    rows = [
        {
            "id": "ram-filter-step",
            "name": name,
            "value": round(worst, 2),
            "unit": "ms",
            "text": text,
        }
    ]
    rows[0] |= STEP_TARGET_MS.record(worst)
    rows[0] |= {
        "headline": "RAM search: one filter step over all of RAM",
        "short": f"{min(cpu):.1f}-{worst:.1f} ms",
    }
    speedup = result["speedup_increased"]
    name = "the same filter step as a per-address Python loop (same result)"
    rows.append({"id": "ram-filter-vs-python", "name": name, "value": round(speedup), "unit": "x"})
    rows[-1] |= {"text": f"{speedup:,.0f}x slower", "target": None, "met": None}
    return rows


def _grouped(result: dict[str, Any], suffix: str) -> tuple[list[Any], str]:
    """Values of keys `seed{n} {game} {name}{suffix}`, and them as text grouped by seed and game."""
    groups: dict[str, list[str]] = {}
    values = []
    for key, value in result.items():
        if key.endswith(suffix) and "worst" not in key:
            seed, game, name = key.removesuffix(suffix).split(" ", 2)
            groups.setdefault(f"{seed} {game}", []).append(f"{name} {value}")
            values.append(value)
    return values, "; ".join(f"{where}: {', '.join(items)}" for where, items in groups.items())


def _relaid_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    steps, text = _grouped(result, " steps")
    worst = max(steps) if all(isinstance(v, int) for v in steps) else None
    name = "scripted RAM search: filters until only the true address is left, worst variable"
    rows = [
        {"id": "scripted-search-filters", "name": name, "value": worst, "unit": "", "text": text}
    ]
    rows[0] |= {"target": f"<= {MAX_STEPS} each", "met": worst is not None and worst <= MAX_STEPS}
    ranks, text = _grouped(result, " rank")
    worst = max(ranks) if all(isinstance(r, int) for r in ranks) else None
    name = "`ram suggest`: rank of the true player x / y, worst"
    rows.append({"id": "suggest-rank", "name": name, "value": worst, "unit": "", "text": text})
    rows[-1] |= {"target": f"top {SUGGEST_TOP}", "met": worst is not None and worst <= SUGGEST_TOP}
    for key, slug, words, target in (
        (
            "class_agreement",
            "tile-classes",
            "`integrate tiles` over BonkQuest rooms 1-5: cells whose class agrees with tiles.json, worst seed",
            CLASS_TARGET,
        ),
        (
            "walkable_right",
            "walkability",
            "walkability guessed from where the player could and could not step, right on room cells, worst seed",
            WALK_TARGET,
        ),
    ):
        values = [v for k, v in result.items() if k.endswith(f" {key}")]
        if values:
            shown = " / ".join(f"{100 * v:.1f}%" for v in values)
            rows.append(
                {"id": slug, "name": words, "value": round(100 * min(values), 1), "unit": "%"}
            )
            rows[-1] |= {"text": shown} | target.record(min(values))
    return rows


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s figures as records for `docs/figures/integrate.json` (ids as there)."""
    rows = _speed_records(result)
    if any(k.endswith(" steps") for k in result):
        rows += _relaid_records(result)
    return rows
