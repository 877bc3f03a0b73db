"""The Go-Explore archive: cell -> the best state found there (savestate bytes, score,
trajectory length and the actions from the start that reach it), plus visit counts.

On disk it is one `.npz` of plain arrays (loaded with `allow_pickle=False`: never unpickled) and
a JSON header, with a SHA-256 over every array: a file that was cut short, edited or made by
something else is refused with one line. The header records the ROM's SHA-1, and `load` refuses
an archive made on another ROM (its states would not load, and its actions would mean nothing).
Writes are atomic: the old archive or the new one, never a mix.

>>> import tempfile
>>> archive = Archive(meta={"rom_sha1": "ab" * 20, "cells": {"kind": "screen"}})
>>> archive.update((1, 2), 3.0, 2, b"state", np.array([0, 1], np.uint8), False, 40)
True
>>> archive.update((1, 2), 2.0, 1, b"other", np.array([1], np.uint8), False, 80)  # lower score
False
>>> path = Path(tempfile.mkdtemp()) / "archive.npz"
>>> archive.save(path)
>>> again = Archive.load(path, rom_sha1="ab" * 20)
>>> len(again), again.scores, again.states[0]
(1, [3.0], b'state')
>>> Archive.load(path, rom_sha1="cd" * 20)
Traceback (most recent call last):
...
metabonk_gym.training.errors.ArchiveError: ... was made on the ROM with SHA-1 abab..., this env runs cdcd...; explore this ROM into a new --out folder
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.training.errors import ArchiveError as ArchiveError  # re-exported
from metabonk_gym.utils import atomic_write_bytes

#: Header entries the archive writes for itself (not part of `Archive.meta`).
_BOOKKEEPING = ("version", "cells_count", "cells_ordered")

#: The archive format (the header's `version`).
FORMAT_VERSION = 1
#: The largest archive file `load` reads.
MAX_ARCHIVE_BYTES = 4 * 1024**3
#: The largest JSON header `load` parses.
MAX_META_BYTES = 1024 * 1024
#: Columns of the file: name -> dtype (`states`/`actions` hold every cell's bytes end to end).
COLUMNS: dict[str, str] = {
    "keys": "<i8",
    "scores": "<f8",
    "lengths": "<i8",
    "chosen": "<i8",
    "seen": "<i8",
    "since": "<i8",
    "found_frame": "<i8",
    "won": "|u1",
    "state_offsets": "<i8",
    "states": "|u1",
    "action_offsets": "<i8",
    "actions": "|u1",
    "meta": "|u1",
}


def better(score: float, length: int, best_score: float, best_length: int) -> bool:
    """Go-Explore's order: a higher score, or the same score by a shorter trajectory.

    >>> better(2.0, 50, 1.0, 10), better(1.0, 9, 1.0, 10), better(1.0, 10, 1.0, 10)
    (True, True, False)
    """
    if score != best_score:
        return score > best_score
    return length < best_length


@dataclass
class Archive:
    """Go-Explore's archive (see the module docstring); one row per cell, in discovery order.

    Args:
        meta: the header: env id, ROM SHA-1, cells, start, game seed, frames explored, ...
    """

    meta: dict[str, Any] = field(default_factory=dict)
    keys: list[tuple[int, ...]] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    chosen: list[int] = field(default_factory=list)
    seen: list[int] = field(default_factory=list)
    since: list[int] = field(default_factory=list)  # times chosen since it last improved
    found_frame: list[int] = field(default_factory=list)
    won: list[bool] = field(default_factory=list)
    states: list[bytes] = field(default_factory=list)  # zlib-compressed savestates
    actions: list[np.ndarray] = field(default_factory=list)  # uint8 actions from the start
    index: dict[tuple[int, ...], int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.keys)

    def update(
        self,
        key: tuple[int, ...],
        score: float,
        length: int,
        state: bytes,
        actions: np.ndarray,
        won: bool,
        frame: int,
    ) -> bool:
        """Add the cell `key`, or replace its state when this one is better; returns whether
        the archive changed."""
        i = self.index.get(key)
        if i is None:
            self.index[key] = len(self.keys)
            self.keys.append(tuple(int(k) for k in key))
            self.scores.append(float(score))
            self.lengths.append(int(length))
            self.chosen.append(0)
            self.seen.append(1)
            self.since.append(0)
            self.found_frame.append(int(frame))
            self.won.append(bool(won))
            self.states.append(bytes(state))
            self.actions.append(np.asarray(actions, np.uint8))
            return True
        if not better(score, length, self.scores[i], self.lengths[i]):
            return False
        self.scores[i], self.lengths[i], self.since[i] = float(score), int(length), 0
        self.states[i], self.actions[i] = bytes(state), np.asarray(actions, np.uint8)
        self.won[i] = self.won[i] or bool(won)
        return True

    def best(self) -> int:
        """The best cell: a won one first, then the highest score, then the highest value of
        the cells' preferred variable (`prefer`, if they declare one), then the shortest path."""
        if not self.keys:
            raise ArchiveError("the archive is empty")
        column = self.prefer_column()
        return max(
            range(len(self.keys)),
            key=lambda i: (
                self.won[i],
                self.scores[i],
                0 if column is None else self.keys[i][column],
                -self.lengths[i],
            ),
        )

    def prefer_column(self) -> int | None:
        """The keys' column of the cells' preferred variable (None: they prefer none).

        >>> cells = {"kind": "ram", "variables": {"room": 1, "hp": 2}, "prefer": "hp"}
        >>> Archive(meta={"cells": cells}).prefer_column()
        1
        """
        cells = self.meta.get("cells") or {}
        prefer, names = cells.get("prefer"), list(cells.get("variables") or {})
        return names.index(prefer) if prefer in names else None

    def best_score(self) -> float:
        """The highest score of any cell (-inf when empty)."""
        return max(self.scores, default=-math.inf)

    # ------------------------------------------------------------------ files
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The archive as the file's arrays (without its checksum)."""
        n = len(self.keys)
        width = len(self.keys[0]) if n else 0
        state_sizes = [len(s) for s in self.states]
        action_sizes = [len(a) for a in self.actions]
        meta = dict(self.meta, version=FORMAT_VERSION, cells_count=n, cells_ordered=True)
        arrays: dict[str, np.ndarray] = {
            "keys": np.asarray(self.keys, np.int64).reshape(n, width),
            "scores": np.asarray(self.scores, np.float64),
            "lengths": np.asarray(self.lengths, np.int64),
            "chosen": np.asarray(self.chosen, np.int64),
            "seen": np.asarray(self.seen, np.int64),
            "since": np.asarray(self.since, np.int64),
            "found_frame": np.asarray(self.found_frame, np.int64),
            "won": np.asarray(self.won, np.uint8),
            "state_offsets": np.concatenate([[0], np.cumsum(state_sizes, dtype=np.int64)]),
            "states": np.frombuffer(b"".join(self.states), np.uint8),
            "action_offsets": np.concatenate([[0], np.cumsum(action_sizes, dtype=np.int64)]),
            "actions": (
                np.concatenate(self.actions).astype(np.uint8) if n else np.zeros(0, np.uint8)
            ),
            # Not sorted: a cell's key lists the variables in the cells file's order.
            "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8),
        }
        return {name: arrays[name].astype(COLUMNS[name], copy=False) for name in COLUMNS}

    def save(self, path: str | Path) -> None:
        """Write the archive to `path` atomically, with its checksum."""
        arrays = self.to_arrays()
        arrays["checksum"] = np.frombuffer(checksum(arrays).encode(), np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        atomic_write_bytes(Path(path), buffer.getvalue())

    @classmethod
    def load(
        cls,
        path: str | Path,
        rom_sha1: str | None = None,
        cells: dict[str, Any] | None = None,
    ) -> Archive:
        """Read an archive, refusing (`ArchiveError`, one line) a corrupt or foreign file, one
        made on a ROM other than `rom_sha1`, or with cells other than `cells` (when given)."""
        path = Path(path).expanduser()
        arrays = _read_arrays(path)
        meta = _read_meta(path, arrays["meta"])
        if rom_sha1 is not None and meta.get("rom_sha1") != rom_sha1:
            raise ArchiveError(
                f"{path} was made on the ROM with SHA-1 {str(meta.get('rom_sha1'))[:4]}..., this "
                f"env runs {rom_sha1[:4]}...; explore this ROM into a new --out folder"
            )
        ordered = bool(meta.get("cells_ordered"))
        if cells is not None and not same_cells(meta.get("cells"), cells, ordered):
            raise ArchiveError(
                f"{path} was made with other cells ({meta.get('cells')}) than these ({cells}); "
                "resume with the cells it was made with, or explore into a new --out folder"
            )
        return cls._from_arrays(path, meta, arrays)

    @classmethod
    def _from_arrays(
        cls, path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray]
    ) -> Archive:
        keys = arrays["keys"]
        n = len(keys)
        if keys.ndim != 2 or meta.get("cells_count") != n:
            raise ArchiveError(f"{path} is not a whole archive (its cell count does not match)")
        for name in ("scores", "lengths", "chosen", "seen", "since", "found_frame", "won"):
            if arrays[name].shape != (n,):
                raise ArchiveError(f"{path} is not a whole archive ({name} has the wrong shape)")
        states = _split(path, arrays["states"], arrays["state_offsets"], n, "states")
        actions = _split(path, arrays["actions"], arrays["action_offsets"], n, "actions")
        archive = cls(meta={k: v for k, v in meta.items() if k not in _BOOKKEEPING})
        archive.keys = [tuple(int(v) for v in row) for row in keys.tolist()]
        archive.scores = [float(v) for v in arrays["scores"].tolist()]
        for name in ("lengths", "chosen", "seen", "since", "found_frame"):
            setattr(archive, name, [int(v) for v in arrays[name].tolist()])
        archive.won = [bool(v) for v in arrays["won"].tolist()]
        archive.states = [s.tobytes() for s in states]
        archive.actions = [a.copy() for a in actions]
        archive.index = {key: i for i, key in enumerate(archive.keys)}
        if len(archive.index) != n:
            raise ArchiveError(f"{path} names a cell twice: not an archive this project wrote")
        if any(len(a) != length for a, length in zip(archive.actions, archive.lengths)):
            raise ArchiveError(f"{path}: a cell's actions do not match its trajectory length")
        return archive


def checksum(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 over every array's name, dtype, shape and bytes, in name order.

    >>> checksum({"a": np.zeros(2, np.uint8)}) == checksum({"a": np.zeros(2, np.uint8)})
    True
    """
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    """The file's arrays, each of its expected dtype, with the checksum verified."""
    if not path.is_file():
        raise ArchiveError(f"archive not found: {path}")
    if path.stat().st_size > MAX_ARCHIVE_BYTES:
        raise ArchiveError(f"{path} is larger than {MAX_ARCHIVE_BYTES} bytes: not an archive")
    try:
        with np.load(path, allow_pickle=False) as data:
            names = set(data.files)
            missing = (set(COLUMNS) | {"checksum"}) - names
            if missing:
                raise ArchiveError(
                    f"{path} is not an explorer archive (it lacks {', '.join(sorted(missing))})"
                )
            arrays = {name: data[name] for name in [*COLUMNS, "checksum"]}
    except ArchiveError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as exc:
        raise ArchiveError(
            f"{path} is not a readable archive (corrupt or cut short: {exc})"
        ) from None
    for name, dtype in COLUMNS.items():
        if arrays[name].dtype.str != np.dtype(dtype).str:
            raise ArchiveError(f"{path}: column {name} has dtype {arrays[name].dtype}, not {dtype}")
    stored = arrays.pop("checksum")
    if stored.dtype != np.uint8 or stored.tobytes().decode("ascii", "replace") != checksum(arrays):
        raise ArchiveError(
            f"{path} fails its checksum: it was changed or cut short after it was written; "
            "use another archive or explore again"
        )
    return arrays


def same_cells(recorded: Any, cells: dict[str, Any], ordered: bool = True) -> bool:
    """Whether an archive's `recorded` cells are `cells` with the variables in the same order
    (a key's numbers follow it); an archive not `ordered` (older ones) listed them sorted.

    >>> same_cells({"variables": {"y": 1, "x": 2}}, {"variables": {"y": 1, "x": 2}})
    True
    >>> same_cells({"variables": {"x": 2, "y": 1}}, {"variables": {"y": 1, "x": 2}})
    False
    >>> same_cells({"variables": {"x": 2}}, {"variables": {"x": 2}, "prefer": "x"})  # ranks only
    True
    """
    if not isinstance(recorded, dict) or _identity(recorded) != _identity(cells):
        return False
    order = list(recorded.get("variables") or {})
    return order == list(cells.get("variables") or {}) or not ordered


def _identity(cells: dict[str, Any]) -> dict[str, Any]:
    """What makes two cells the same: all they record but `prefer`, which ranks paths."""
    return {k: v for k, v in cells.items() if k != "prefer"}


def _read_meta(path: Path, raw: np.ndarray) -> dict[str, Any]:
    if raw.size > MAX_META_BYTES:
        raise ArchiveError(f"{path}: its header is larger than {MAX_META_BYTES} bytes")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArchiveError(f"{path}: its header is not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("version") != FORMAT_VERSION:
        raise ArchiveError(
            f"{path}: archive format {meta.get('version') if isinstance(meta, dict) else '?'}, "
            f"this version reads {FORMAT_VERSION}"
        )
    return meta


def _split(
    path: Path, flat: np.ndarray, offsets: np.ndarray, n: int, name: str
) -> Sequence[np.ndarray]:
    """`flat` cut at `offsets` (n + 1 increasing offsets from 0 to its length)."""
    ok = (
        offsets.shape == (n + 1,)
        and (n + 1 == 0 or (offsets[0] == 0 and offsets[-1] == len(flat)))
        and bool(np.all(np.diff(offsets) >= 0))
    )
    if not ok:
        raise ArchiveError(f"{path}: the offsets of {name} do not cut it into {n} cells")
    return [flat[offsets[i] : offsets[i + 1]] for i in range(n)]
