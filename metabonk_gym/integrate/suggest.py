"""`ram suggest`: scripted probes that rank addresses by what they follow, with no manual filter.

The probes hold each direction, press A and wait, with a RAM snapshot after each. Every aligned
slot of every value type is then scored at once (numpy over all snapshots):

- `x`: goes up while RIGHT is held, down while LEFT is, and stays put otherwise (`y` likewise
  with DOWN and UP); a move the wrong way, or a change while waiting, costs more than a right
  move earns, so only values that follow the player score high;
- `frames`: grows by the frames run in every probe, waits included (a frame counter);
- `button_a`: changes in the probes that press A, and in no wait.

One type per address is kept (the narrowest that scores best), the best `top` per role listed.

>>> d = np.array([[1, 0, 0], [-1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
>>> role_scores(d, ["RIGHT", "LEFT", "UP", "DOWN", "wait"], np.array([8, 8, 8, 8, 8]))["x"].tolist()
[2.0, -inf, -inf]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from metabonk_gym.integrate.machine import Machine, address_of
from metabonk_gym.integrate.scan import VIEWS, decode, valid, view_size
from metabonk_gym.integrate.script import parse_script

#: The probes: (what is held, script). Two rounds, so one blocked move does not hide a variable.
PROBES: tuple[tuple[str, str], ...] = (
    ("wait", "wait 20"),
    ("RIGHT", "RIGHT 8"),
    ("wait", "wait 8"),
    ("LEFT", "LEFT 8"),
    ("wait", "wait 8"),
    ("DOWN", "DOWN 8"),
    ("wait", "wait 8"),
    ("UP", "UP 8"),
    ("wait", "wait 8"),
    ("LEFT", "LEFT 8"),
    ("wait", "wait 8"),
    ("RIGHT", "RIGHT 8"),
    ("wait", "wait 8"),
    ("UP", "UP 8"),
    ("wait", "wait 8"),
    ("DOWN", "DOWN 8"),
    ("wait", "wait 8"),
)
ROLES = ("x", "y", "frames", "button_a")
_MOVES = {"x": ("RIGHT", "LEFT", ("UP", "DOWN")), "y": ("DOWN", "UP", ("LEFT", "RIGHT"))}
PENALTY = 5.0


@dataclass
class Suggestion:
    """An address ranked for a role, with its score and its value after each probe."""

    role: str
    address: int
    type: str
    score: float
    history: list[int]


def role_scores(
    diffs: np.ndarray, held: Sequence[str], frames: np.ndarray
) -> dict[str, np.ndarray]:
    """Scores of every slot (columns of `diffs`, one row per probe: new - old) for each role."""
    held_arr = np.array(held)
    out: dict[str, np.ndarray] = {}
    waits = held_arr == "wait"
    for role, (up, down, still) in _MOVES.items():
        good = (diffs[held_arr == up] > 0).sum(0) + (diffs[held_arr == down] < 0).sum(0)
        bad = (diffs[held_arr == up] < 0).sum(0) + (diffs[held_arr == down] > 0).sum(0)
        stay = np.isin(held_arr, [*still, "wait"])
        bad = bad + (diffs[stay] != 0).sum(0)
        moved_both = ((diffs[held_arr == up] > 0).any(0)) & ((diffs[held_arr == down] < 0).any(0))
        score = good - PENALTY * bad
        out[role] = np.where(moved_both, score.astype(float), -np.inf)
    exact = (diffs == frames[:, None]).sum(0)
    out["frames"] = np.where((diffs > 0).all(0), exact.astype(float) + (diffs > 0).sum(0), -np.inf)
    pressed = held_arr == "A"
    if pressed.any():
        a_score = (diffs[pressed] != 0).sum(0) - PENALTY * (diffs[waits] != 0).sum(0)
        out["button_a"] = np.where((diffs[pressed] != 0).any(0), a_score.astype(float), -np.inf)
    else:
        out["button_a"] = np.full(diffs.shape[1], -np.inf)
    return out


def run_probes(
    machine: Machine, spans: Sequence[tuple[int, int]], probes: Sequence[tuple[str, str]] = PROBES
) -> tuple[list[np.ndarray], list[str], list[int]]:
    """Play `probes` on `machine`: the snapshots (the first before any probe), what each held,
    and the frames each ran."""
    snaps = [machine.snapshot(spans)]
    held, frames = [], []
    for what, script in probes:
        steps = parse_script(script)
        machine.run(steps)
        snaps.append(machine.snapshot(spans))
        held.append(what)
        frames.append(sum(f for _, f in steps))
    return snaps, held, frames


def rank(
    snaps: Sequence[np.ndarray],
    held: Sequence[str],
    frames: Sequence[int],
    spans: Sequence[tuple[int, int]],
    top: int = 3,
    types: Sequence[str] = VIEWS,
) -> dict[str, list[Suggestion]]:
    """The best `top` addresses for each role (see the module docstring)."""
    best: dict[str, dict[int, tuple[float, int, str, int]]] = {r: {} for r in ROLES}
    frame_arr = np.asarray(frames)
    for t in types:
        size = view_size(t)
        values = np.stack([decode(s, t).astype(np.int64) for s in snaps])
        ok = np.ones(values.shape[1], bool)
        for s in snaps:
            v = valid(s, t)
            if v is not None:
                ok &= v
        scores = role_scores(np.diff(values, axis=0), list(held), frame_arr)
        for role, score in scores.items():
            score = np.where(ok, score, -np.inf)
            finite = np.flatnonzero(np.isfinite(score))
            if not len(finite):
                continue
            order = finite[np.argsort(-score[finite], kind="stable")][: top * 8]
            for slot in order.tolist():
                offset = slot * size
                current = best[role].get(offset)
                key = (float(score[slot]), -VIEWS.index(t))
                if current is None or key > (current[0], -VIEWS.index(current[2])):
                    best[role][offset] = (float(score[slot]), slot, t, offset)
    out: dict[str, list[Suggestion]] = {}
    for role, by_offset in best.items():
        ranked = []
        taken: list[tuple[int, int]] = []  # a wider slot holding a better one is the same variable
        for entry in sorted(by_offset.values(), key=lambda e: (-e[0], VIEWS.index(e[2]), e[3])):
            lo, hi = entry[3], entry[3] + view_size(entry[2])
            if any(lo < b and a < hi for a, b in taken):
                continue
            taken.append((lo, hi))
            ranked.append(entry)
            if len(ranked) == top:
                break
        out[role] = [
            Suggestion(
                role,
                address_of(offset, spans),
                t,
                score,
                [int(decode(s, t)[slot]) for s in snaps],
            )
            for score, slot, t, offset in ranked
        ]
    return out
