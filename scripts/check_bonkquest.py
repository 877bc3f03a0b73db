"""Check the bundled BonkQuest ROM on the raw stable-retro core (no env, no wrappers).

Shows: boot sets the magic; new games differ by seed and repeat exactly for one seed; walking
and walls; a scripted (BFS) player takes the key of room 1 and leaves through the locked door;
the sage's dialogue; enemy contact; warps to every room; winning and losing (and the freeze
after); a scripted play-through of all five rooms for several seeds; the speed of the core.
Screenshots go to /tmp/bonkquest_*.png. Usage:

    python3 scripts/check_bonkquest.py [--rom PATH] [--seeds N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np
import stable_retro as retro
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
GAME = REPO / "metabonk_gym" / "games" / "BonkQuest"
EWRAM = 0x02000000
STATE_SIZE = 0x314  # sizeof(GameState), see gba/bonkquest/game.h
CMD_NEW_GAME, CMD_WARP = 1, 2
BUTTONS = ["B", None, "SELECT", "START", "UP", "DOWN", "LEFT", "RIGHT", "A", None, "L", "R"]
FRAMES_PER_STEP = 4  # one env step at frameskip 4 = one tile

# semantic tile ids (metabonk.json tile_classes)
FLOOR, WALL, DOOR_LOCKED, DOOR_OPEN, KEY, CHEST, CHEST_OPEN, TREASURE, NPC, WATER, HEART = range(11)
WALKABLE = {FLOOR, KEY, HEART, TREASURE}
DIRS = {"UP": (0, -1), "DOWN": (0, 1), "LEFT": (-1, 0), "RIGHT": (1, 0)}


class Check:
    def __init__(self, rom: Path) -> None:
        self.em = retro.RetroEmulator(str(rom))
        self.gd = retro._retro.GameDataGlue()
        self.em.configure_data(self.gd)
        self.m = self.gd.memory
        self.vars = json.loads((GAME / "data.json").read_text())["info"]
        meta = json.loads((GAME / "metabonk.json").read_text())
        self.arrays = meta["arrays"]
        self.frames = 0

    # ---- memory ----
    def __getitem__(self, name: str) -> int:
        v = self.vars[name]
        return int(self.m.extract(v["address"], v["type"]))

    def __setitem__(self, name: str, value: int) -> None:
        v = self.vars[name]
        self.m.assign(v["address"], v["type"], value)

    def state_bytes(self) -> bytes:
        return bytes(self.m.blocks[EWRAM][:STATE_SIZE])

    def array(self, name: str) -> np.ndarray:
        a = self.arrays[name]
        n = int(np.prod(a["shape"]))
        off = a["address"] - EWRAM
        return np.frombuffer(self.m.blocks[EWRAM][off : off + n], np.uint8).reshape(a["shape"])

    # ---- input ----
    def press(self, *buttons: str, frames: int = FRAMES_PER_STEP) -> None:
        mask = np.zeros(12, np.uint8)
        for b in buttons:
            mask[BUTTONS.index(b)] = 1
        self.em.set_button_mask(mask, 0)
        for _ in range(frames):
            self.em.step()
            self.frames += 1

    def command(self, cmd: int, arg: int = 0, seed: int = 0) -> None:
        self["seed"] = seed
        self["cmd_arg"] = arg
        self["cmd"] = cmd
        for _ in range(10):
            self.press(frames=1)
            if self["cmd"] == 0:
                return
        raise AssertionError("command not acknowledged")

    def pos(self) -> tuple[int, int]:
        return self["player_x"], self["player_y"]

    def screenshot(self, name: str) -> str:
        path = f"/tmp/bonkquest_{name}.png"
        img = Image.fromarray(self.em.get_screen())
        img.resize((480, 320), Image.Resampling.NEAREST).save(path)
        return path

    # ---- scripted player ----
    def enemies(self) -> list[tuple[int, int]]:
        act, xs, ys = self.array("enemy_active"), self.array("enemy_x"), self.array("enemy_y")
        return [(int(xs[i]), int(ys[i])) for i in range(8) if act[i]]

    def danger(self) -> set[tuple[int, int]]:
        """Enemy cells and their neighbours: where an enemy can be within one step."""
        out = set()
        for x, y in self.enemies():
            out.add((x, y))
            for dx, dy in DIRS.values():
                out.add((x + dx, y + dy))
        return out

    def path(self, goals: set[tuple[int, int]], avoid: set[tuple[int, int]]) -> list[str] | None:
        """BFS over room_tiles to any goal cell; goals may be non-walkable (entered last)."""
        tiles = self.array("room_tiles")
        start = self.pos()
        prev: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
        q = deque([start])
        while q:
            cur = q.popleft()
            if cur in goals:
                moves = []
                while prev[cur] is not None:
                    cur, d = prev[cur]  # type: ignore[misc]
                    moves.append(d)
                return moves[::-1]
            for d, (dx, dy) in DIRS.items():
                nx, ny = cur[0] + dx, cur[1] + dy
                if not (0 <= nx < 30 and 0 <= ny < 20) or (nx, ny) in prev:
                    continue
                if (nx, ny) not in goals and (tiles[ny, nx] not in WALKABLE or (nx, ny) in avoid):
                    continue
                prev[(nx, ny)] = (cur, d)
                q.append((nx, ny))
        return None

    def walk_to(self, goals: set[tuple[int, int]], max_steps: int = 400) -> int:
        """Step towards the goals, re-planning every step around the enemies."""
        room = self["room"]
        for steps in range(max_steps):
            if self.pos() in goals or self["room"] != room or self["won"] or self["lost"]:
                return steps
            moves = self.path(goals, self.danger() - goals)
            if moves is None:  # boxed in by enemies: wait where we stand unless threatened
                if self.pos() in self.danger():
                    moves = self.path(goals, set())
                else:
                    self.press()
                    continue
            assert moves, "no path"
            self.press(moves[0])
        raise AssertionError(f"did not reach {goals} from {self.pos()} in room {room}")

    def find(self, tile: int) -> list[tuple[int, int]]:
        ys, xs = np.nonzero(self.array("room_tiles") == tile)
        return [(int(x), int(y)) for x, y in zip(xs, ys)]

    def use(self, target: tuple[int, int]) -> None:
        """Walk next to target (chest, sage), face it and press A (then release)."""
        tx, ty = target
        around = {(tx + dx, ty + dy) for dx, dy in DIRS.values()}
        tiles = self.array("room_tiles")
        around = {(x, y) for x, y in around if tiles[y, x] in WALKABLE}
        self.walk_to(around)
        for d, (dx, dy) in DIRS.items():
            if (self.pos()[0] + dx, self.pos()[1] + dy) == target:
                self.press(d)  # bump: turns to face it
        self.press("A")
        self.press()

    def leave_room(self) -> None:
        """Bump the locked exit (a key opens it), then walk through it."""
        exit_ = (self["exit_x"], self["exit_y"])
        room = self["room"]
        self.walk_to({exit_})
        if self["room"] == room:  # stood still: it was locked and is now open
            tiles = self.array("room_tiles")
            assert tiles[exit_[1], exit_[0]] == DOOR_OPEN, "door did not open"
            self.walk_to({exit_})
        assert self["room"] == room + 1, (self["room"], room)

    def play_room(self) -> None:
        room = self["room"]
        if room == 2:
            self.use((self["npc_x"], self["npc_y"]))
            assert self["dialogue_open"] == 1
            self.press("A")  # close
            self.press()
            chests = self.find(CHEST)
            # the sage names the chest; chests are numbered in reading order
            order = sorted(chests, key=lambda p: (p[1], p[0]))
            self.use(order[self["key_chest"]])
        elif room in (1, 3, 4):
            self.walk_to({(self["key_x"], self["key_y"])})
        if room < 5:
            assert self["keys"] >= 1, f"no key in room {room}"
            self.leave_room()
        else:
            self.walk_to({(self["treasure_x"], self["treasure_y"])})


def section(title: str) -> None:
    print(f"\n== {title}")


def check_boot(c: Check, rom: Path, shots: list[str]) -> None:
    """The ROM's hash, the magic after boot, the frame counter."""
    section("boot")
    rom_sha = hashlib.sha1(rom.read_bytes()).hexdigest()
    if rom == GAME / "rom.gba":
        assert (GAME / "rom.sha").read_text().strip() == rom_sha, "rom.sha is stale"
    print(f"{rom}: sha1 {rom_sha}")
    for _ in range(30):
        c.press(frames=1)
        if c["magic"] == 0x4B4E4F42:
            break
    assert c["magic"] == 0x4B4E4F42, hex(c["magic"])
    f0 = c["frame"]
    c.press(frames=10)
    assert c["frame"] == f0 + 10, "frame counter must advance once per emulated frame"
    print(
        f"magic ok after {c.frames} frames; frame counter +1 per frame; room {c['room']} "
        f"player {c.pos()} hp {c['hp']}/{c['max_hp']}"
    )
    shots.append(c.screenshot("boot"))


def check_seeds(c: Check, rng: np.random.Generator) -> None:
    """New games differ by seed and repeat exactly for one seed, whatever ran before."""
    section("seeds")
    layouts = {}
    for seed in (1, 2, 3, 4, 5, 6, 7, 8):
        c.command(CMD_NEW_GAME, seed=seed)
        layouts[seed] = ((c["key_x"], c["key_y"]), tuple(c.enemies()), c["key_chest"])
        assert c["seed"] == seed and c["room"] == 1 and c["cmd_ack"] == CMD_NEW_GAME
    for seed in (1, 2):
        print(
            f"seed {seed}: room 1 key at {layouts[seed][0]}, enemies at {layouts[seed][1]}, "
            f"key chest of room 2 = {layouts[seed][2]}"
        )
    assert layouts[1] != layouts[2], "seeds 1 and 2 give the same layout"
    print(f"distinct layouts among seeds 1-8: {len(set(layouts.values()))}")

    script = [str(a) for a in rng.choice(["", "UP", "DOWN", "LEFT", "RIGHT", "A"], size=150)]
    dumps = []
    for before in (None, 3):
        if before is not None:
            c.command(CMD_WARP, arg=before, seed=99)  # unrelated history first
            c.press("RIGHT", frames=37)
        c.command(CMD_NEW_GAME, seed=7)
        for a in script:
            c.press(*([a] if a else []))
        b = bytearray(c.state_bytes())
        b[4:8] = b"\0\0\0\0"  # the frame counter and command count keep running across games
        b[15] = 0
        dumps.append(bytes(b))
    assert dumps[0] == dumps[1], "same seed and inputs must give identical state"
    print(
        f"seed 7 + the same {len(script)} random steps twice (after different histories): "
        f"identical {STATE_SIZE}-byte state"
    )


def check_walking(c: Check) -> None:
    """One step is one tile; walls stop the player."""
    section("walking and walls")
    c.command(CMD_NEW_GAME, seed=1)
    x0, y0 = c.pos()
    c.press("RIGHT")
    assert c.pos() == (x0 + 1, y0), c.pos()
    c.press("RIGHT", frames=8)
    assert c.pos() == (x0 + 3, y0), c.pos()
    c.press("LEFT", frames=12)
    assert c.pos() == (x0, y0), c.pos()
    moved = 0
    for _ in range(12):
        y = c["player_y"]
        c.press("UP")
        moved += c["player_y"] != y
    tiles = c.array("room_tiles")
    px, py = c.pos()
    assert tiles[py - 1, px] == WALL and c["facing"] == 0, (c.pos(), tiles[py - 1, px])
    print(
        f"RIGHT x1 step -> +1 tile, 2 steps -> +2, 3 LEFT -> back; UP stopped by the wall at "
        f"row {py - 1} after {moved} tiles (12 steps held)"
    )


def check_room1(c: Check, shots: list[str]) -> None:
    """A BFS player takes the key of room 1 and leaves through the locked door."""
    section("room 1 by BFS: key, locked door, out")
    c.command(CMD_NEW_GAME, seed=1)
    start = c.frames
    key = (c["key_x"], c["key_y"])
    steps = c.walk_to({key})
    assert c["keys"] == 1 and c["key_x"] == 0xFF and c["quest_stage"] == 1
    assert c.array("room_tiles")[key[1], key[0]] == FLOOR
    print(f"key at {key} taken in {steps} steps; keys=1, score={c['score']}")
    shots.append(c.screenshot("room1_key"))
    c.leave_room()
    assert c["keys"] == 0 and c["room"] == 2 and c["rooms_visited"] == 2
    assert c["doors_open"] & 2, "door of room 1 stays open"
    print(
        f"door unlocked (key used) and room 2 entered at {c.pos()} after "
        f"{(c.frames - start) // FRAMES_PER_STEP} steps; score={c['score']} "
        f"quest_stage={c['quest_stage']} hp={c['hp']}"
    )


def check_sage(c: Check, shots: list[str]) -> None:
    """The sage's dialogue opens with A, pauses the world and closes with A."""
    section("the sage")
    c.command(CMD_WARP, arg=2, seed=5)
    npc = (c["npc_x"], c["npc_y"])
    c.use(npc)
    assert c["dialogue_open"] == 1 and c["talked"] == 1 and c["quest_stage"] == 3
    ticks = c["ticks"]
    frozen = c.enemies()
    c.press(frames=30)
    assert c.enemies() == frozen, "the world waits while the box is open"
    shots.append(c.screenshot("dialogue"))
    c.press("A")
    assert c["dialogue_open"] == 0
    print(
        f"A next to the sage at {npc}: dialogue_open=1 (world paused, ticks {ticks}->"
        f"{c['ticks']}), A again: closed; key chest for seed 5 = {c['key_chest']}"
    )


def check_enemy_contact(c: Check, shots: list[str]) -> None:
    """Touching an enemy costs one HP and makes the player invulnerable a while."""
    section("enemy contact")
    c.command(CMD_WARP, arg=1, seed=3)
    hp = c["hp"]
    for _ in range(200):
        if c["hp"] < hp:
            break
        ex = set(c.enemies())
        moves = c.path(ex, set())
        c.press(*(moves or [])[:1])
    assert c["hp"] == hp - 1 and c["invuln"] > 0 and c["hits"] == 1, (c["hp"], c["invuln"])
    inv = c["invuln"]
    print(f"walked into the slime: hp {hp} -> {c['hp']}, invulnerable for {inv} frames")
    shots.append(c.screenshot("hurt"))


def check_warps(c: Check, shots: list[str]) -> None:
    """A warp to every room sets what arriving there by play would."""
    section("warps")
    expected = {1: (0, 1, 0), 2: (0, 2, 80), 3: (0, 3, 165), 4: (0, 4, 245), 5: (0, 5, 325)}
    for n in range(1, 6):
        c.command(CMD_WARP, arg=n, seed=11)
        tiles = c.array("room_tiles")
        x, y = c.pos()
        got = (c["keys"], c["rooms_visited"], c["score"])
        assert c["room"] == n and tiles[y, x] == FLOOR and got == expected[n], (n, got)
        assert c["cmd_ack"] == CMD_WARP
        assert not (set(c.enemies()) & {(x, y)})
        c.press(frames=2)
        shots.append(c.screenshot(f"room{n}"))
        print(
            f"warp {n}: room {c['room']} at {(x, y)}, keys/rooms_visited/score={got}, "
            f"quest_stage={c['quest_stage']}, chests={c['chests']}, "
            f"enemies={len(c.enemies())}, exit={(c['exit_x'], c['exit_y'])}"
        )


def check_patrols(c: Check) -> None:
    """Every patrol segment lies on plain floor, off the arrival tile (rooms 1-5, seeds
    0-19)."""
    bad = []
    for n in range(1, 6):
        for seed in range(20):
            c.command(CMD_WARP, arg=n, seed=seed)
            tiles = c.array("room_tiles")
            ends = [c.array(k) for k in ("enemy_ax", "enemy_ay", "enemy_bx", "enemy_by")]
            for i in np.nonzero(c.array("enemy_active"))[0]:
                ax, ay, bx, by = (int(e[i]) for e in ends)
                cells = [(x, y) for x in range(ax, bx + 1) for y in range(ay, by + 1)]
                if any(tiles[y, x] != FLOOR for x, y in cells) or c.pos() in cells:
                    bad.append((n, seed, i))
    assert not bad, bad
    print("rooms 1-5 x seeds 0-19: every patrol segment lies on plain floor, off the arrival tile")


def check_winning(c: Check, shots: list[str]) -> None:
    """The treasure wins; the game freezes after."""
    section("winning (warp 5, walk to the treasure)")
    c.command(CMD_WARP, arg=5, seed=11)
    steps = c.walk_to({(c["treasure_x"], c["treasure_y"])})
    assert c["won"] == 1 and c["lost"] == 0 and c["quest_stage"] == 10
    snap = c.state_bytes()[0x10:]
    c.press("LEFT", frames=60)
    assert c.state_bytes()[0x10:] == snap, "frozen after winning"
    shots.append(c.screenshot("won"))
    print(
        f"treasure reached in {steps} steps: won=1, score={c['score']}, hp={c['hp']}; "
        f"state frozen for 60 frames"
    )


def check_losing(c: Check, shots: list[str]) -> None:
    """HP 0 loses; the game freezes after; a new game clears it."""
    section("losing (chase the ghosts of room 5)")
    c.command(CMD_WARP, arg=5, seed=12)
    for _ in range(2000):
        if c["lost"]:
            break
        moves = c.path(set(c.enemies()), set())
        c.press(*(moves or [])[:1])
    assert c["lost"] == 1 and c["hp"] == 0 and c["won"] == 0
    hits = c["hits"]
    snap = c.state_bytes()[0x10:]
    c.press("RIGHT", frames=60)
    assert c.state_bytes()[0x10:] == snap, "frozen after losing"
    shots.append(c.screenshot("lost"))
    c.command(CMD_NEW_GAME, seed=12)
    assert c["lost"] == 0 and c["hp"] == 5 and c["room"] == 1
    print(f"hp 0 after {hits} hits -> lost=1, frozen; a new game clears it")


def check_playthrough(c: Check, seeds: int) -> None:
    """The scripted player wins the five rooms for seeds 0..seeds-1."""
    section(f"scripted play-through, seeds 0-{seeds - 1}")
    for seed in range(seeds):
        c.command(CMD_NEW_GAME, seed=seed)
        f = c.frames
        for _ in range(5):
            c.play_room()
            if c["won"] or c["lost"]:
                break
        assert c["won"] == 1, f"seed {seed}: room {c['room']} hp {c['hp']}"
        print(
            f"seed {seed}: won in {(c.frames - f) // FRAMES_PER_STEP} steps, score "
            f"{c['score']}, hp {c['hp']}/5, chests {c['chests']}, rooms {c['rooms_visited']}"
        )


def check_speed(c: Check, rng: np.random.Generator) -> None:
    """The raw core runs over 2000 frames/s."""
    section("speed of the raw core (3000 frames of gameplay, 3 runs)")
    rates = []
    for run in range(3):
        c.command(CMD_NEW_GAME, seed=4 + run)
        acts = rng.choice(["UP", "DOWN", "LEFT", "RIGHT", "A", ""], size=750)
        masks = []
        for a in acts:
            m = np.zeros(12, np.uint8)
            if a:
                m[BUTTONS.index(str(a))] = 1
            masks.append(m)
        t = time.perf_counter()
        for m in masks:
            c.em.set_button_mask(m, 0)
            for _ in range(4):
                c.em.step()
        dt = time.perf_counter() - t
        rates.append(3000 / dt)
        print(
            f"run {run}: 3000 frames in {dt:.3f} s = {rates[-1]:.0f} frames/s "
            f"(random play reached room {c['room']}, hp {c['hp']})"
        )
    fps = float(np.median(rates))
    print(f"median {fps:.0f} frames/s")
    assert fps > 2000, fps


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rom", default=str(GAME / "rom.gba"))
    ap.add_argument("--seeds", type=int, default=10, help="seeds for the full play-through")
    args = ap.parse_args()
    c = Check(Path(args.rom))
    shots: list[str] = []
    rng = np.random.default_rng(0)  # the random steps of the seeds check, then of the speed one
    check_boot(c, Path(args.rom), shots)
    check_seeds(c, rng)
    check_walking(c)
    check_room1(c, shots)
    check_sage(c, shots)
    check_enemy_contact(c, shots)
    check_warps(c, shots)
    check_patrols(c)
    check_winning(c, shots)
    check_losing(c, shots)
    check_playthrough(c, args.seeds)
    check_speed(c, rng)
    section("screenshots")
    for s in shots:
        print(s)
    print("\nall BonkQuest checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
