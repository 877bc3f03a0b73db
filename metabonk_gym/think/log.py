"""The decision log: one JSONL line per think call (plus its PNG frame) and one per outcome.

What: `DecisionLog(folder)` appends to `folder/decisions.jsonl`: a `meta` line (game, system
prompt, strategist), a `call` line per call (trigger, per-call prompt text, RAM state, raw output,
parsed directive, fallback reason, latency in seconds and frames, tokens, the frame's PNG path)
and an `outcome` line when that directive ends (status, frames, reward gained, HP lost).
`read_decisions(folder)` joins calls with their outcomes.
Why: it is the record to debug a strategist with, the data `metabonk distill` learns from, and
the source of the directive success rate. Lines are appended whole with one write each, so a
crash loses at most the line being written; PNGs are written atomically.

>>> import tempfile, numpy as np
>>> from metabonk_gym.think.directive import Directive
>>> from metabonk_gym.think.view import GameView
>>> from metabonk_gym.think.strategist import ThinkResult
>>> log = DecisionLog(tempfile.mkdtemp(), game="Demo")
>>> view = GameView("Demo", 5, np.zeros((160, 240, 3), np.uint8), {"hp": 3}, {"hp": 3})
>>> d = Directive("door", "", "wait", None, 60, 0.5)
>>> log.record_call(1, view, "start", "pause", ThinkResult(d, 0.1, raw="{}"))
>>> log.record_outcome(1, {"status": "expired", "frames": 60})
>>> [r["outcome"]["status"] for r in read_decisions(log.folder)]
['expired']
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from metabonk_gym.errors import MetabonkError
from metabonk_gym.think.engines import png_bytes
from metabonk_gym.think.strategist import ThinkResult
from metabonk_gym.think.view import GameView
from metabonk_gym.utils import atomic_write_bytes

LOG_NAME = "decisions.jsonl"
#: The longest line a decision log is read with (a call's prompt, RAM state and answer fit many
#: times over); longer lines are skipped, so memory stays bounded on any file.
MAX_LINE_BYTES = 4 << 20


class DecisionLogNotFoundError(MetabonkError, FileNotFoundError):
    """A folder without a decision log (`decisions.jsonl`)."""


class DecisionLog:
    """Append-only decision log in `folder` (created if needed).

    Args:
        folder: where `decisions.jsonl` and `frames/` go; several runs may append to one folder.
        game: the game's name, written in the run's `meta` line.
        frames: save each call's frame as a PNG in `frames/` (what `metabonk distill` learns from).
        meta: more fields for the `meta` line (system prompt, the strategist's `describe()`).
    """

    def __init__(
        self,
        folder: str | Path,
        game: str = "",
        frames: bool = True,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.folder = Path(folder)
        (self.folder / "frames").mkdir(parents=True, exist_ok=True)
        self.path = self.folder / LOG_NAME
        self.frames = frames
        self._lock = threading.Lock()
        # A random tag, not id(self): two logs made in one second can share an address, and
        # records of runs mixed into one file are told apart by this id.
        self._run = f"{int(time.time())}-{secrets.token_hex(4)}"
        self._write(
            {"type": "meta", "run": self._run, "game": game, "time": time.time(), **(meta or {})}
        )

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=_jsonable, separators=(",", ":")) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()

    def record_call(
        self,
        call_id: int,
        view: GameView,
        trigger: str,
        mode: str,
        result: ThinkResult,
        episode: int = 0,
        state: dict[str, Any] | None = None,
        latency_frames: int | None = None,
    ) -> None:
        """One call: what went in, what came out, how long it took."""
        frame_path = None
        if self.frames:
            frame_path = f"frames/{self._run}-{call_id:06d}.png"
            atomic_write_bytes(self.folder / frame_path, png_bytes(view.frame))
        request = result.request
        self._write(
            {
                "type": "call",
                "run": self._run,
                "id": call_id,
                "time": time.time(),
                "episode": episode,
                "step": view.step,
                "trigger": trigger,
                "mode": mode,
                "user": request.user if request is not None else None,
                "image_sent": bool(request is not None and request.image_png is not None),
                "state": state,
                "info": {k: v for k, v in view.info.items() if isinstance(v, (int, float, bool))},
                "raw": result.raw,
                "directive": result.directive.to_dict(),
                "fallback": result.category,
                "error": result.error,
                "latency_s": result.latency_s,
                "latency_frames": latency_frames,
                "prompt_tokens": result.prompt_tokens,
                "cached_tokens": result.cached_tokens,
                "completion_tokens": result.completion_tokens,
                "frame": frame_path,
            }
        )

    def record_outcome(self, call_id: int, outcome: dict[str, Any]) -> None:
        """How the directive of call `call_id` ended."""
        self._write(
            {"type": "outcome", "run": self._run, "id": call_id, "time": time.time(), **outcome}
        )


def log_records(
    source: str | Path | BinaryIO, max_line: int = MAX_LINE_BYTES
) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file (a path, or a file already open in binary mode, read
    from where it stands and left open), read line by line (memory bounded by `max_line`,
    however large the file). Lines that are broken (a crash mid-write), not JSON objects, or
    longer than `max_line` bytes are skipped.

    >>> import io, tempfile
    >>> path = Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> _ = path.write_bytes(b'{"a": 1}\\n[1, 2]\\n5\\nnot json\\n' + b"x" * 50 + b'\\n{"b": 2}')
    >>> list(log_records(path, max_line=40))
    [{'a': 1}, {'b': 2}]
    >>> list(log_records(io.BytesIO(b'{"c": 3}\\n')))
    [{'c': 3}]
    """
    for _, record in log_lines(source, max_line):
        yield record


def log_lines(
    source: str | Path | BinaryIO, max_line: int = MAX_LINE_BYTES
) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """`log_records` with the line each record was read from, as it is in the file (its
    newline kept): what a tool that copies records without rewriting them needs.

    >>> import io
    >>> list(log_lines(io.BytesIO(b'{"c": 3}\\nbroken\\n{"d":4}')))
    [(b'{"c": 3}\\n', {'c': 3}), (b'{"d":4}', {'d': 4})]
    """
    if isinstance(source, str | Path):
        with open(source, "rb") as handle:
            yield from _lines(handle, max_line)
    else:
        yield from _lines(source, max_line)


def _lines(handle: BinaryIO, max_line: int) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """`log_lines` of an open file."""
    while True:
        line = handle.readline(max_line + 1)
        if not line:
            return
        if len(line) > max_line and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # skip the rest of an overlong line
                line = handle.readline(1 << 20)
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(record, dict):
            yield line, record


def _call_id(value: Any) -> int:
    """A record's call id (-1 when it is not a whole number: a tampered line)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def read_decisions(source: str | Path | BinaryIO) -> list[dict[str, Any]]:
    """Every `call` record of `source/decisions.jsonl` with its `outcome` (None if it never
    ended); several runs may share a folder. Broken lines (a crash mid-write) are skipped.
    `source` may also be the log already open in binary mode: a caller that checked the file
    it opened reads that file, not whatever its name points at by then."""
    log = Path(source) / LOG_NAME if isinstance(source, str | Path) else source
    if isinstance(log, Path) and not log.is_file():
        raise DecisionLogNotFoundError(
            f"no decision log at {log}; pass the log_dir= folder of a PauseToThink run, or record "
            "one with PauseToThink(env, ..., log_dir=FOLDER)"
        )
    calls: dict[tuple[str, int], dict[str, Any]] = {}
    outcomes: dict[tuple[str, int], dict[str, Any]] = {}
    for record in log_records(log):
        key = (str(record.get("run", "")), _call_id(record.get("id")))
        if record.get("type") == "call":
            calls[key] = record
        elif record.get("type") == "outcome":
            outcomes[key] = record
    return [{**call, "outcome": outcomes.get(key)} for key, call in calls.items()]


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
