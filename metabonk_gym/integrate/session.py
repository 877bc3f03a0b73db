"""A RAM search saved between commands: snapshots, candidates per value type, an undo stack.

`RamSearch.start(folder)` snapshots RAM (EWRAM and IWRAM by default) of the folder's ROM; each
`next_snapshot(...)` plays on from where the last one stopped (an input script, a savestate, a
window, or whatever the user did in SkyEmu) and `filter(...)` keeps the candidates for which the
filter held (`metabonk_gym.integrate.scan`); `undo()` takes the last filter back. The session is
a folder of two files: `session.json` (what was done, the ROM's SHA-1) and `arrays-<hash>.npz`
(snapshots, candidate bit masks, the emulator state, the undo stack), read back with
`allow_pickle=False` and size caps; the JSON is written last, atomically, and names the npz it
goes with, so a crash leaves the previous session whole. A session of another ROM is refused.

>>> import tempfile
>>> from metabonk_gym.gamedata import bundled_game_folder
>>> tmp = tempfile.TemporaryDirectory(); folder = Path(tmp.name)
>>> _ = (folder / "rom.gba").write_bytes((bundled_game_folder("BonkQuest") / "rom.gba").read_bytes())
>>> search = RamSearch.start(folder, inputs="wait 30")
>>> left = search.filter(parse_filter("increased"), inputs="wait 30")  # the frame counters...
>>> RamSearch.load(folder).left == left > 0
True
>>> tmp.cleanup()
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import stat
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.errors import IntegrateError
from metabonk_gym.gba.backends import read_state_file
from metabonk_gym.gba.backends.base import decode_value
from metabonk_gym.integrate.folder import start_state
from metabonk_gym.integrate.machine import (
    DEFAULT_REGIONS,
    Machine,
    address_of,
    check_backend,
    locate,
    region_spans,
)
from metabonk_gym.integrate.rom import read_rom
from metabonk_gym.integrate.scan import (
    CHANGE_FILTERS,
    POKE_FILTERS,
    VIEWS,
    Filter,
    apply_filter,
    count,
    full_masks,
    parse_filter,
    view_size,
    view_type,
)
from metabonk_gym.integrate.script import parse_script
from metabonk_gym.utils import atomic_write_bytes, atomic_write_text

SESSION_DIR = "ram-session"
FORMAT = 1
#: The most snapshots (and so filter steps) one session keeps.
MAX_SNAPSHOTS = 64
#: Above this many addresses, candidates are listed without looking for aliases.
ALIAS_LIMIT = 4096
#: The most candidates the `kept` filter tries one by one.
MAX_POKES = 512
#: The largest emulator state a session file may inflate to.
MAX_STATE_BYTES = 8 * 1024 * 1024
#: The most filter steps a session records, and the largest session.json read.
MAX_STEPS = 100_000
MAX_META_BYTES = 16 * 1024 * 1024
#: The name of a session's arrays file (the only files a session removes).
ARRAYS_NAME = re.compile(r"^arrays-[0-9a-f]{16}\.npz$")

__all__ = ["Candidate", "RamSearch", "parse_filter"]


@dataclass
class Candidate:
    """An address still in the search, its type and its value at every snapshot."""

    address: int
    type: str
    history: list[int]


@dataclass
class _Undo:
    masks: dict[str, np.ndarray]
    snapshots: int
    state: bytes | None
    steps: int


@dataclass
class RamSearch:
    """A saved RAM search on one game folder (see the module docstring).

    Args:
        folder: the game folder (its `rom.gba` is the ROM searched).
        path: the session folder (default `FOLDER/ram-session`).
        rom_sha1: the SHA-1 of the ROM the session was made on.
        backend: "embedded" or "skyemu".
        skyemu_url: the SkyEmu control server of a skyemu session.
        regions: the memory regions searched (`machine.REGIONS` names).
        types: the value types searched (`scan.VIEWS`).
    """

    folder: Path
    path: Path
    rom_sha1: str
    backend: str = "embedded"
    skyemu_url: str | None = None
    regions: list[str] = field(default_factory=lambda: list(DEFAULT_REGIONS))
    types: list[str] = field(default_factory=lambda: list(VIEWS))
    snapshots: list[np.ndarray] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    masks: dict[str, np.ndarray] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    state: bytes | None = None
    undo_stack: list[_Undo] = field(default_factory=list)

    # ------------------------------------------------------------------ life cycle
    @classmethod
    def start(
        cls,
        folder: str | Path,
        *,
        backend: str = "embedded",
        skyemu_url: str | None = None,
        regions: Sequence[str] = DEFAULT_REGIONS,
        types: Sequence[str] | None = None,
        inputs: str | None = None,
        state_file: str | Path | None = None,
        path: str | Path | None = None,
        start: str | None = None,
        power_on: bool = False,
    ) -> RamSearch:
        """A new search: the first snapshot, after `inputs` from the folder's start `start`
        (default: its default start; power-on with `power_on` or when it has none) or from
        `state_file`; on SkyEmu, RAM as the game stands now. Replaces an older session at
        `path`."""
        folder = Path(folder)
        rom = read_rom(folder / "rom.gba")
        spans = region_spans(regions)  # checks the names
        check_backend(backend)
        check_session_folder(Path(path) if path is not None else folder / SESSION_DIR)
        chosen = [view_type(t) for t in types] if types else list(VIEWS)
        search = cls(
            folder,
            Path(path) if path is not None else folder / SESSION_DIR,
            rom.sha1,
            backend,
            skyemu_url,
            [r.lower() for r in regions],
            list(dict.fromkeys(chosen)),
        )
        if backend == "skyemu" and state_file is not None:
            raise IntegrateError("--state loads a savestate into the embedded core, not SkyEmu")
        label = "start"
        if backend == "embedded" and state_file is None:
            search.state, where = start_state(folder, start, power_on)
            label = f"start ({where}{', after ' + inputs if inputs else ''})"
        first = search.next_snapshot(inputs=inputs, state_file=state_file, label=label)
        search.masks = full_masks(sum(n for _, n in spans), search.types)
        del first
        search.save()
        return search

    @classmethod
    def load(cls, folder: str | Path, path: str | Path | None = None) -> RamSearch:
        """The session of `folder` (a one-line error if there is none or it is another ROM's)."""
        folder = Path(folder)
        where = Path(path) if path is not None else folder / SESSION_DIR
        meta_path = where / "session.json"
        if not meta_path.is_file():
            raise IntegrateError(
                f"no RAM search session at {where}: start one with metabonk ram search start {folder}"
            )
        if meta_path.stat().st_size > MAX_META_BYTES:
            raise IntegrateError(f"{meta_path} is larger than a session file holds")
        try:
            meta = json.loads(meta_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise IntegrateError(f"{meta_path} is not a session file ({exc})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise IntegrateError(f"{meta_path} is not a session file of this version")
        problem = _meta_problem(meta)
        if problem is not None:
            raise IntegrateError(
                f"the session at {where} is damaged ({problem}): start a new search with "
                "metabonk ram search start"
            )
        rom = read_rom(folder / "rom.gba")
        if meta.get("rom_sha1") != rom.sha1:
            raise IntegrateError(
                f"the session at {where} was made on another ROM (SHA-1 {meta.get('rom_sha1')}), not "
                f"{folder / 'rom.gba'} ({rom.sha1}): start a new search with metabonk ram search start"
            )
        try:
            search = cls(
                folder,
                where,
                rom.sha1,
                str(meta["backend"]),
                meta.get("skyemu_url"),
                [str(r) for r in meta["regions"]],
                [view_type(t) for t in meta["types"]],
                labels=[str(x) for x in meta["labels"]],
                steps=list(meta["steps"]),
            )
            search._load_arrays(_arrays_file(where, str(meta["arrays"])), int(meta["undo"]))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, IntegrateError):
                raise
            raise IntegrateError(
                f"the session at {where} is damaged ({type(exc).__name__}: {exc}): start a new "
                "search with metabonk ram search start"
            ) from None
        return search

    def _load_arrays(self, npz_path: Path, undo_depth: int) -> None:
        expected = self._expected_arrays(undo_depth)
        try:
            with zipfile.ZipFile(npz_path) as archive:
                for info in archive.infolist():
                    key = info.filename.removesuffix(".npy")
                    if key not in expected:
                        raise IntegrateError(f"{npz_path}: {info.filename} is not a session array")
                    with archive.open(info) as member:
                        _check_array_header(npz_path, key, member, *expected[key])
            with np.load(npz_path, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            if isinstance(exc, IntegrateError):
                raise
            raise IntegrateError(f"{npz_path} is not a session's arrays file ({exc})") from None
        missing = sorted(
            k for k, (_, shape) in expected.items() if shape is not None and k not in arrays
        )
        if missing:
            raise IntegrateError(f"{npz_path} lacks the session array {missing[0]}")
        n_snaps = len(self.labels)
        self.snapshots = [arrays[f"snap_{i}"] for i in range(n_snaps)]
        self.masks = self._unpack(arrays, "mask")
        self.state = bytes(arrays["state"]) if "state" in arrays else None
        self.undo_stack = []
        for i in range(undo_depth):
            extra = _undo_info(npz_path, str(arrays[f"undoinfo_{i}"]), n_snaps, len(self.steps))
            state_key = f"state_undo{i}"
            self.undo_stack.append(
                _Undo(
                    self._unpack(arrays, f"mask_undo{i}"),
                    extra["snapshots"],
                    bytes(arrays[state_key]) if state_key in arrays else None,
                    extra["steps"],
                )
            )

    def _expected_arrays(self, undo_depth: int) -> dict[str, tuple[str, tuple[int, ...] | None]]:
        """Every array a session of this meta may hold: name -> (dtype, shape); a shape of
        None is optional and one-dimensional, at most `MAX_STATE_BYTES` long (a saved state)."""
        nbytes = self.nbytes
        out: dict[str, tuple[str, tuple[int, ...] | None]] = {
            f"snap_{i}": ("|u1", (nbytes,)) for i in range(len(self.labels))
        }
        for prefix in ["mask", *(f"mask_undo{i}" for i in range(undo_depth))]:
            for t in self.types:
                out[f"{prefix}_{VIEWS.index(t)}"] = ("|u1", ((nbytes // view_size(t) + 7) // 8,))
        out["state"] = ("|u1", None)
        for i in range(undo_depth):
            out[f"state_undo{i}"] = ("|u1", None)
            out[f"undoinfo_{i}"] = ("<U", ())
        return out

    def _unpack(self, arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
        out = {}
        for t in self.types:
            n = self.nbytes // view_size(t)
            out[t] = np.unpackbits(arrays[f"{prefix}_{VIEWS.index(t)}"], count=n).astype(bool)
        return out

    def save(self) -> None:
        """Write the session: the arrays first (a new file named by its hash), then the JSON
        naming it (atomically), then remove the old arrays file."""
        arrays: dict[str, np.ndarray] = {}
        for i, snap in enumerate(self.snapshots):
            arrays[f"snap_{i}"] = snap
        self._pack(arrays, "mask", self.masks)
        if self.state is not None:
            arrays["state"] = np.frombuffer(self.state, np.uint8)
        for i, entry in enumerate(self.undo_stack):
            self._pack(arrays, f"mask_undo{i}", entry.masks)
            if entry.state is not None:
                arrays[f"state_undo{i}"] = np.frombuffer(entry.state, np.uint8)
            arrays[f"undoinfo_{i}"] = np.array(
                json.dumps({"snapshots": entry.snapshots, "steps": entry.steps})
            )
        buffer = (
            io.BytesIO()
        )  # an .npz written at deflate level 1: fast, and mostly-zero RAM packs well
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for key, array in arrays.items():
                with archive.open(f"{key}.npy", "w") as member:
                    np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
        data = buffer.getvalue()
        name = f"arrays-{hashlib.sha1(data).hexdigest()[:16]}.npz"
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.path / name, data)
        meta = {
            "format": FORMAT,
            "rom_sha1": self.rom_sha1,
            "backend": self.backend,
            "skyemu_url": self.skyemu_url,
            "regions": self.regions,
            "types": self.types,
            "labels": self.labels,
            "steps": self.steps,
            "undo": len(self.undo_stack),
            "candidates": self.left,
            "arrays": name,
        }
        atomic_write_text(self.path / "session.json", json.dumps(meta, indent=1) + "\n")
        for old in self.path.glob("arrays-*.npz"):  # a session's own: never a user's file
            if old.name != name and ARRAYS_NAME.match(old.name):
                old.unlink(missing_ok=True)

    def _pack(
        self, arrays: dict[str, np.ndarray], prefix: str, masks: dict[str, np.ndarray]
    ) -> None:
        for t, mask in masks.items():
            arrays[f"{prefix}_{VIEWS.index(t)}"] = np.packbits(mask)

    # ------------------------------------------------------------------ queries
    @property
    def spans(self) -> list[tuple[int, int]]:
        return region_spans(self.regions)

    @property
    def nbytes(self) -> int:
        return sum(n for _, n in self.spans)

    @property
    def left(self) -> int:
        """Candidates left over every type."""
        return count(self.masks)

    def _rows(self) -> list[tuple[int, str]]:
        """(offset, type) of every candidate, one per address (the first type of `scan.VIEWS`
        left there: narrowest, unsigned, little endian first), in address order, with wider
        candidates that only repeat a narrower one dropped (`_drop_aliases`)."""
        offsets, kinds = [], []
        for t in self.types:
            slots = np.flatnonzero(self.masks[t])
            offsets.append(slots * view_size(t))
            kinds.append(np.full(len(slots), VIEWS.index(t)))
        if not offsets:
            return []
        off, kind = np.concatenate(offsets), np.concatenate(kinds)
        order = np.lexsort((kind, off))
        off, kind = off[order], kind[order]
        first = np.ones(len(off), bool)
        first[1:] = off[1:] != off[:-1]
        rows = [(int(o), VIEWS[int(k)]) for o, k in zip(off[first], kind[first], strict=True)]
        if len(rows) > ALIAS_LIMIT:  # early in a search: too many to compare, nothing to tidy
            return rows
        all_rows = [(int(o), VIEWS[int(k)]) for o, k in zip(off, kind, strict=True)]
        return self._drop_aliases(rows, all_rows)

    def candidates(self, limit: int | None = 50) -> list[Candidate]:
        """The candidates left, one per address (see `_rows`), each with its value history."""
        out = []
        spans = self.spans
        for offset, t in self._rows()[:limit]:
            size = view_size(t)
            history = [decode_value(bytes(s[offset : offset + size]), t) for s in self.snapshots]
            out.append(Candidate(address_of(offset, spans), t, history))
        return out

    def _drop_aliases(
        self, rows: list[tuple[int, str]], all_rows: list[tuple[int, str]]
    ) -> list[tuple[int, str]]:
        """Drop a wider candidate that holds a narrower candidate and whose other bytes never
        changed in any snapshot (a big-endian u16 over a u8 is that u8, scaled)."""
        stack = np.stack(self.snapshots)
        still = (stack == stack[0]).all(axis=0)  # bytes that never changed
        narrow = sorted(all_rows, key=lambda r: view_size(r[1]))
        out = []
        for offset, t in rows:
            size = view_size(t)
            alias = False
            for o, u in narrow:
                n = view_size(u)
                if n >= size:
                    break
                if offset <= o and o + n <= offset + size:
                    outside = np.r_[offset:o, o + n : offset + size]
                    if still[outside].all():
                        alias = True
                        break
            if not alias:
                out.append((offset, t))
        return out

    def addresses_left(self) -> int:
        """Distinct addresses among the candidates (aliases dropped)."""
        return len(self._rows())

    def sole_candidate(self) -> Candidate:
        """The one address left (its narrowest type); a one-line error when there are more or none."""
        rows = self.candidates(limit=3)
        if len(rows) != 1:
            n = self.addresses_left()
            raise IntegrateError(
                f"{n} addresses are left in the search, not one: filter more, or give ADDR and TYPE"
            )
        return rows[0]

    def value_history(self, address: int, type_: str) -> list[int]:
        """The value of `type_` at `address` in every snapshot."""
        offset = locate(address, self.spans)
        size = view_size(type_)
        return [decode_value(bytes(s[offset : offset + size]), type_) for s in self.snapshots]

    # ------------------------------------------------------------------ steps
    def open_machine(self) -> Machine:
        """The emulator where the session stands (embedded: its saved state; SkyEmu: live)."""
        rom = self.folder / "rom.gba"
        if self.backend == "skyemu":
            return Machine.open(rom, "skyemu", self.skyemu_url)
        return Machine.open(rom, "embedded", state=self.state)

    def next_snapshot(
        self,
        inputs: str | None = None,
        state_file: str | Path | None = None,
        play: Callable[[Machine], None] | None = None,
        label: str | None = None,
    ) -> np.ndarray:
        """Play on (`inputs`, a window `play`, or load `state_file`) and add a snapshot."""
        if len(self.snapshots) >= MAX_SNAPSHOTS:
            raise IntegrateError(
                f"this session holds {MAX_SNAPSHOTS} snapshots: add what you found and start anew"
            )
        steps = parse_script(inputs) if inputs else []
        with self.open_machine() as machine:
            if state_file is not None:
                if self.backend == "skyemu":
                    raise IntegrateError(
                        "--state loads a savestate into the embedded core, not SkyEmu"
                    )
                try:
                    machine.core.load_state(read_state_file(Path(state_file)))
                except (OSError, ValueError) as exc:
                    raise IntegrateError(f"cannot load savestate {state_file}: {exc}") from None
            machine.run(steps)
            if play is not None:
                play(machine)
            snapshot = machine.snapshot(self.spans)
            if machine.kind == "embedded":
                self.state = machine.save_state()
        self.snapshots.append(snapshot)
        self.labels.append(
            label
            or (f"state {Path(state_file).name}" if state_file else None)
            or (f"after {inputs}" if inputs else None)
            or ("after play" if play else "now")
        )
        return snapshot

    def filter(
        self,
        flt: Filter,
        inputs: str | None = None,
        state_file: str | Path | None = None,
        play: Callable[[Machine], None] | None = None,
    ) -> int:
        """Apply `flt`; a change filter first takes a new snapshot (from `inputs`, `state_file`,
        `play`, or SkyEmu as it stands), a value filter looks at the last snapshot unless given
        one of those. Saves the session and returns the candidates left; on an error nothing
        is saved."""
        if self.left == 0:
            raise IntegrateError(
                "no candidates left to filter: undo the last filter (metabonk ram undo) or start anew"
            )
        new_source = inputs is not None or state_file is not None or play is not None
        if flt.op in POKE_FILTERS:
            return self._poke(flt)
        if flt.op in CHANGE_FILTERS and not new_source and self.backend != "skyemu":
            raise IntegrateError(
                f"filter {flt.op} compares a new snapshot with the last: give --inputs SCRIPT, "
                "--state FILE or --play"
            )
        undo = _Undo(
            {t: m.copy() for t, m in self.masks.items()},
            len(self.snapshots),
            self.state,
            len(self.steps),
        )
        took_new = new_source or (self.backend == "skyemu" and flt.op in CHANGE_FILTERS)
        if took_new:
            self.next_snapshot(inputs, state_file, play)
        old = self.snapshots[-2] if took_new else None
        self.masks = apply_filter(self.masks, old, self.snapshots[-1], flt)
        self.undo_stack.append(undo)
        self.steps.append({"filter": str(flt), "snapshot": self.labels[-1], "left": self.left})
        self.save()
        return self.left

    def _poke(self, flt: Filter, frames: int = 2) -> int:
        """The `kept` and `shown` filters: from where the session stands, write value+1 into
        each candidate and run `frames` frames. `kept` keeps those whose value then differs
        from a run without the write (the write lasted: the game's own variable) and drops
        those the game put back (a copy it refreshes, such as a HUD cache); `shown` keeps those
        whose write changed the picture (the game draws the value)."""
        if self.backend != "embedded" or self.state is None:
            raise IntegrateError(
                f"filter {flt.op} writes into the embedded core's saved state: not on SkyEmu"
            )
        rows = [(t, slot) for t in self.types for slot in np.flatnonzero(self.masks[t]).tolist()]
        if len(rows) > MAX_POKES:
            raise IntegrateError(
                f"filter kept tries each of the {len(rows)} candidates in the emulator: filter to "
                f"{MAX_POKES} or fewer first"
            )
        undo = _Undo(
            {t: m.copy() for t, m in self.masks.items()},
            len(self.snapshots),
            self.state,
            len(self.steps),
        )
        spans = self.spans
        keep = {t: np.zeros_like(m) for t, m in self.masks.items()}
        with self.open_machine() as machine:
            core = machine.core
            machine.run([(0, frames)])
            reference = machine.snapshot(spans)
            picture = machine.screen()
            for t, slot in rows:
                size = view_size(t)
                address = address_of(slot * size, spans)
                core.load_state(self.state)
                before = machine.read(address, t) % (100**size if t[1] == "n" else 256**size)
                poked = (before + 1) % (100**size if t[1] == "n" else 256**size)
                raw = (_to_bcd(poked, size) if t[1] == "n" else poked).to_bytes(
                    size, "big" if t[0] == ">" else "little"
                )
                for i, byte in enumerate(raw):
                    core.write(address + i, "|u1", byte)
                machine.run([(0, frames)])
                if flt.op == "shown":
                    keep[t][slot] = not np.array_equal(machine.screen(), picture)
                else:
                    now = bytes(machine.snapshot([(address, size)]))
                    keep[t][slot] = now != bytes(reference[slot * size : slot * size + size])
        self.masks = keep
        self.undo_stack.append(undo)
        self.steps.append({"filter": str(flt), "snapshot": self.labels[-1], "left": self.left})
        self.save()
        return self.left

    def undo(self) -> int:
        """Take the last filter back (and the snapshot it took); returns the candidates left."""
        if not self.undo_stack:
            raise IntegrateError("nothing to undo: no filter has been applied in this session")
        entry = self.undo_stack.pop()
        self.masks = entry.masks
        del self.snapshots[entry.snapshots :]
        del self.labels[entry.snapshots :]
        del self.steps[entry.steps :]
        self.state = entry.state
        self.save()
        return self.left


def _to_bcd(value: int, size: int) -> int:
    """`value` as `size` bytes of BCD digits, read as a plain integer (for `write`).

    >>> hex(_to_bcd(1234, 2))
    '0x1234'
    """
    out = 0
    for i in range(2 * size):
        out |= (value // 10**i % 10) << (4 * i)
    return out


def check_session_folder(path: Path) -> None:
    """Refuse a session folder that holds files but no session: starting a search there would
    write into it and remove arrays files of the session's naming (`--session DIR` is meant for
    a folder of its own)."""
    if path.exists() and not path.is_dir():
        raise IntegrateError(f"--session {path} is a file, not a folder: choose a new folder")
    if not path.is_dir() or (path / "session.json").is_file():
        return
    held = sorted(p.name for p in path.iterdir())
    if held:
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        raise IntegrateError(
            f"--session {path} already holds files ({shown}) and no RAM search session; "
            "choose a new or empty folder"
        )


def _meta_problem(meta: dict[str, Any]) -> str | None:
    """What is wrong with a session.json's fields (types, words and counts), or None.

    >>> _meta_problem({"backend": "bogus"})
    "backend 'bogus' (embedded or skyemu)"
    """
    checks: list[tuple[bool, str]] = [
        (
            meta.get("backend") in ("embedded", "skyemu"),
            f"backend {meta.get('backend')!r} (embedded or skyemu)",
        ),
        (meta.get("skyemu_url") is None or isinstance(meta.get("skyemu_url"), str), "skyemu_url"),
        (_strings(meta.get("regions"), 1, 16), "regions"),
        (_strings(meta.get("types"), 1, len(VIEWS)), "types"),
        (_strings(meta.get("labels"), 1, MAX_SNAPSHOTS), f"labels (1 to {MAX_SNAPSHOTS})"),
        (
            isinstance(meta.get("steps"), list)
            and len(meta["steps"]) <= MAX_STEPS
            and all(isinstance(x, dict) for x in meta["steps"]),
            "steps",
        ),
        (
            isinstance(meta.get("undo"), int)
            and not isinstance(meta.get("undo"), bool)
            and 0 <= meta["undo"] <= min(MAX_STEPS, len(meta.get("steps") or [])),
            f"undo {meta.get('undo')!r}",
        ),
        (
            isinstance(meta.get("arrays"), str) and bool(ARRAYS_NAME.match(meta["arrays"])),
            f"arrays {meta.get('arrays')!r}",
        ),
    ]
    return next((what for ok, what in checks if not ok), None)


def _strings(value: Any, least: int, most: int) -> bool:
    return (
        isinstance(value, list)
        and least <= len(value) <= most
        and all(isinstance(x, str) and len(x) <= 4096 for x in value)
    )


def _arrays_file(where: Path, name: str) -> Path:
    """The session's arrays file `where/name`, when it is a regular file (a FIFO would block the
    read forever; a link could point anywhere)."""
    path = where / name
    try:
        mode = path.lstat().st_mode
    except OSError:
        raise IntegrateError(
            f"the session at {where} is damaged (its arrays file {name} is missing): start a "
            "new search with metabonk ram search start"
        ) from None
    if not stat.S_ISREG(mode):
        raise IntegrateError(
            f"the session at {where} is damaged ({path} is not a regular file): start a new "
            "search with metabonk ram search start"
        )
    return path


def _check_array_header(
    npz_path: Path, key: str, member: Any, dtype: str, shape: tuple[int, ...] | None
) -> None:
    """Read an .npy member's header and refuse a dtype, order or shape the session does not
    hold, before any of its data is read (a header may state any size)."""
    try:
        version = np.lib.format.read_magic(member)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        found_shape, fortran, found_dtype = read_header(member)
    except (ValueError, OSError, EOFError) as exc:
        raise IntegrateError(f"{npz_path}: {key} is not an array ({exc})") from None
    wrong = found_dtype.hasobject or fortran
    if dtype == "<U":
        wrong = wrong or found_dtype.kind != "U" or found_dtype.itemsize > 4 * 1024
    else:
        wrong = wrong or found_dtype.str != dtype
    if shape is None:
        wrong = wrong or len(found_shape) != 1 or found_shape[0] > MAX_STATE_BYTES
    else:
        wrong = wrong or tuple(found_shape) != shape
    if wrong:
        want = f"{dtype} {shape}" if shape is not None else f"{dtype} (n,) n <= {MAX_STATE_BYTES}"
        raise IntegrateError(
            f"{npz_path}: {key} is {found_dtype.str} {tuple(found_shape)}, not {want}: the "
            "session was changed or damaged; start a new search with metabonk ram search start"
        )


def _undo_info(npz_path: Path, text: str, n_snaps: int, n_steps: int) -> dict[str, int]:
    """An undo entry's counts, checked: the snapshots and steps it takes the session back to."""
    try:
        info = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        info = None
    if (
        not isinstance(info, dict)
        or not all(
            isinstance(info.get(k), int) and not isinstance(info.get(k), bool)
            for k in ("snapshots", "steps")
        )
        or not 1 <= info["snapshots"] <= n_snaps
        or not 0 <= info["steps"] <= n_steps
    ):
        raise IntegrateError(
            f"{npz_path}: an undo entry is damaged ({text[:80]!r}); start a new search with "
            "metabonk ram search start"
        )
    return {"snapshots": info["snapshots"], "steps": info["steps"]}
