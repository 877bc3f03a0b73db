"""Run directories and model files: atomic saves, checked loads, and the resume point.

A run directory holds `config.yaml` (the effective config), `run.json` (status and step count),
`tensorboard/` (event files), `checkpoints/step_<N>.zip`, `videos/` and `model.zip`. Every file is
written atomically, and a command given bad input fails before it writes anything, so an existing
run is never damaged. Model zips carry a `metabonk` entry (env id, algorithm, config) in SB3's
`data` file, so `metabonk eval` and `--init-from` know the preprocessing a model expects.
It sits in the lowest layer so that every trainer uses this one class, the fine-tune in `think`
included; `metabonk_gym.training.rundir` re-exports it.

>>> import tempfile, pathlib
>>> run = RunDir(pathlib.Path(tempfile.mkdtemp()) / "run")
>>> run.checkpoint_path(1200).name
'step_000001200.zip'
>>> run.checkpoint_path(7, ".pt").name
'step_000000007.pt'
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.errors import CheckpointError, RunDirError
from metabonk_gym.utils import atomic_write_bytes, atomic_write_text

METADATA_KEY = "metabonk"
_STEP_RE = re.compile(r"^step_(\d+)(\.[a-z]+)$")
_RLLIB_STEP_RE = re.compile(r"^step_(\d+)$")
#: At most this many entries of `checkpoints/` are looked at (a run keeps a few).
MAX_CHECKPOINT_ENTRIES = 10_000
#: Caps on a model zip, checked from its directory before any entry is inflated: entries, the
#: JSON `data` entry, each tensor file (`.pth`), any other entry, and how much an entry of
#: more than a MiB may inflate (weights barely compress; a bomb inflates thousands of times).
MAX_ZIP_ENTRIES = 64
MAX_DATA_BYTES = 16 << 20
MAX_TENSOR_BYTES = 1 << 30
MAX_OTHER_BYTES = 1 << 20
MAX_INFLATION = 50


def model_metadata(env_id: str, algo: str, config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The `metabonk` entry stored in a model zip."""
    return {"format": 1, "env_id": env_id, "algo": algo, "config": config, **extra}


def save_model(model: Any, path: Path, metadata: dict[str, Any]) -> Path:
    """Save an SB3 model to `path` atomically, with `metadata` inside its zip."""
    setattr(model, METADATA_KEY, metadata)
    buffer = io.BytesIO()
    model.save(buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())
    return Path(path)


def read_model_data(path: Path) -> dict[str, Any]:
    """SB3's `data` JSON of a model zip, after checking the zip is whole (CRC of every entry)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise CheckpointError(f"model file not found: {path}")
    try:
        with zipfile.ZipFile(path) as archive:
            check_zip_sizes(archive, path)
            bad = archive.testzip()
            if bad is not None:
                raise CheckpointError(
                    f"model file {path} is corrupt (entry {bad} fails its CRC check)"
                )
            names = set(archive.namelist())
            if "data" not in names or "policy.pth" not in names:
                raise CheckpointError(
                    f"{path} is corrupt or not a stable-baselines3 model zip (it lacks 'data' or 'policy.pth')"
                )
            with archive.open("data") as member:
                data = json.loads(member.read(MAX_DATA_BYTES + 1)[:MAX_DATA_BYTES])
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, json.JSONDecodeError, ValueError) as exc:
        raise CheckpointError(f"model file {path} is corrupt or truncated: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"model file {path} has a malformed 'data' entry")
    return data


def _entry_cap(name: str) -> int:
    if name == "data":
        return MAX_DATA_BYTES
    return MAX_TENSOR_BYTES if name.endswith(".pth") else MAX_OTHER_BYTES


def check_zip_sizes(archive: zipfile.ZipFile, path: Path) -> None:
    """`CheckpointError` for a model zip with too many entries, an entry that declares more
    than its cap, or one that would inflate more than `MAX_INFLATION` times: checked from the
    zip's directory, before anything is read (zipfile never inflates past a declared size, so
    the declared sizes bound what is read).

    >>> import io
    >>> buffer = io.BytesIO()
    >>> with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
    ...     out.writestr("data", b" " * (MAX_DATA_BYTES + 1))
    >>> check_zip_sizes(zipfile.ZipFile(buffer), Path("model.zip"))
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.CheckpointError: model.zip: entry 'data' inflates to 16777217 bytes (at most 16777216); refused: not a model metabonk wrote
    """
    entries = archive.infolist()
    if len(entries) > MAX_ZIP_ENTRIES:
        raise CheckpointError(
            f"{path} holds {len(entries)} entries (a model zip has at most {MAX_ZIP_ENTRIES}); "
            "refused: not a model metabonk wrote"
        )
    for info in entries:
        cap = _entry_cap(info.filename)
        name = info.filename[:80]
        if info.file_size > cap:
            raise CheckpointError(
                f"{path}: entry {name!r} inflates to {info.file_size} bytes (at most {cap}); "
                "refused: not a model metabonk wrote"
            )
        if info.file_size > MAX_OTHER_BYTES and info.file_size > MAX_INFLATION * max(
            info.compress_size, 1
        ):
            raise CheckpointError(
                f"{path}: entry {name!r} inflates {info.file_size // max(info.compress_size, 1)} "
                f"times ({info.compress_size} to {info.file_size} bytes); refused as a zip bomb"
            )


def read_model_metadata(path: Path) -> dict[str, Any]:
    """The `metabonk` entry of a model zip (env id, algo, config, steps); checks the zip first."""
    data = read_model_data(path)
    meta = data.get(METADATA_KEY)
    if not isinstance(meta, dict) or "config" not in meta:
        raise CheckpointError(
            f"{path} is a stable-baselines3 model but not one written by metabonk (no 'metabonk' entry "
            "with its env and preprocessing); train it with `metabonk train ppo` or `train bc`"
        )
    if not isinstance(meta["config"], dict):
        raise CheckpointError(f"{path} has a malformed 'metabonk' entry (its config is no mapping)")
    steps = data.get("num_timesteps", 0) or 0
    if not isinstance(steps, int) or isinstance(steps, bool) or not 0 <= steps < 1 << 62:
        raise CheckpointError(f"{path} has a malformed 'num_timesteps' ({str(steps)[:40]})")
    meta = dict(meta)
    meta["num_timesteps"] = steps
    return meta


#: `run.json` is small: refuse a larger one before reading it.
MAX_STATE_BYTES = 1 << 20
_TEXT = (str,)
#: Fields of `run.json` the commands read, with their types (None allowed where listed) and,
#: for whole numbers, their range.
STATE_FIELDS: dict[str, tuple[tuple[type, ...], tuple[int, int] | None]] = {
    "env_id": (_TEXT, None),
    "algo": (_TEXT, None),
    "engine": (_TEXT, None),
    "status": (_TEXT, None),
    "host": (_TEXT, None),
    "error": ((str, type(None)), None),
    "init_from": ((str, type(None)), None),
    "dataset": ((str, type(None)), None),
    "updated": (_TEXT, None),
    "stale": ((bool,), None),
    "pid": ((int, type(None)), (1, (1 << 31) - 1)),
    "pid_start": ((int, type(None)), (0, 1 << 62)),
    "total_steps": ((int,), (0, 1 << 62)),
    "rounds_done": ((int,), (0, 1 << 31)),
    "env_steps": ((int,), (0, 1 << 62)),
    "wall_s": ((int, float), None),
    "stages": ((list,), None),
    "milestones": ((list,), None),
    "dagger": ((dict,), None),
}


def check_state_field(path: Path, key: str, value: Any) -> None:
    """`RunDirError` when `run.json`'s field `key` has the wrong type or range.

    >>> check_state_field(Path("run.json"), "pid", 1 << 70)
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.RunDirError: run.json: field 'pid' is out of range (1..2147483647), not 1180591620717411303424; restore run.json from a backup or delete it
    """
    spec = STATE_FIELDS.get(key)
    if spec is None:
        return
    types, bounds = spec
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    fix = f"restore {path.name} from a backup or delete it"
    if not ok:
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise RunDirError(f"{path}: field {key!r} must be {names}, not {str(value)[:60]}; {fix}")
    if bounds is not None and isinstance(value, int) and not bounds[0] <= value <= bounds[1]:
        raise RunDirError(
            f"{path}: field {key!r} is out of range ({bounds[0]}..{bounds[1]}), not "
            f"{str(value)[:60]}; {fix}"
        )


def _start_time(pid: int | None) -> int | None:
    """A process's start time in clock ticks since boot (Linux `/proc`; None elsewhere or when
    it does not exist), so a reused pid is not taken for the run's trainer."""
    try:
        stat = Path(f"/proc/{pid if pid is not None else os.getpid()}/stat").read_text()
    except OSError:
        if pid is None:
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return 0
        return 0
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])  # a zombie has ended


@dataclass
class RunDir:
    """The files of one run; creating and resuming check before they write."""

    path: Path

    def __post_init__(self) -> None:
        self.path = Path(self.path).expanduser()

    @property
    def config_file(self) -> Path:
        return self.path / "config.yaml"

    @property
    def state_file(self) -> Path:
        return self.path / "run.json"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tensorboard"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def videos(self) -> Path:
        return self.path / "videos"

    @property
    def model(self) -> Path:
        return self.path / "model.zip"

    def checkpoint_path(self, step: int, suffix: str = ".zip") -> Path:
        """`checkpoints/step_<N><suffix>`: SB3's model zips, or another trainer's files
        (the world model's `.pt`)."""
        return self.checkpoints / f"step_{step:09d}{suffix}"

    # ------------------------------------------------------------------ checks
    def is_run(self) -> bool:
        return self.state_file.is_file() or self.config_file.is_file()

    def check_new(self) -> None:
        """A new run needs a missing or empty directory; anything else is kept untouched."""
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"--run-dir {self.path} is a file; choose a directory")
        if self.path.is_dir() and any(self.path.iterdir()):
            what = "a run" if self.is_run() else "files"
            raise RunDirError(
                f"--run-dir {self.path} already holds {what}; pass --resume to continue the run in it, "
                "or choose a new --run-dir (nothing in it was changed)"
            )

    def check_resumable(self) -> None:
        if not self.path.is_dir():
            raise RunDirError(
                f"cannot resume: {self.path} does not exist; start the run without --resume"
            )
        if not self.config_file.is_file():
            raise RunDirError(
                f"cannot resume: {self.path} has no config.yaml, so it is not a metabonk run directory"
            )

    def owner(self) -> dict[str, Any]:
        """Who trains this run now, for `run.json`: this process's pid, host and start time."""
        return {"pid": os.getpid(), "host": socket.gethostname(), "pid_start": _start_time(None)}

    def check_not_running(self) -> str | None:
        """Before a resume: `RunDirError` when `run.json` says the run is being trained by a live
        process on this machine; a note when it says "running" but that process is gone (it was
        killed: the status is stale and the run resumes from its newest checkpoint)."""
        state = self.read_state()
        if state.get("status") != "running":
            return None
        pid, host = state.get("pid"), state.get("host")
        if isinstance(pid, int) and pid != os.getpid() and host == socket.gethostname():
            started, stored = _start_time(pid), state.get("pid_start")
            if started is not None and (stored is None or started == stored):
                raise RunDirError(
                    f"{self.path} is being trained right now by process {pid} (run.json); stop it "
                    "first (Ctrl-C or `kill` saves a checkpoint), then --resume"
                )
        note = (
            f"{self.state_file} said 'running' but its process ({pid}) is gone: the run was "
            "killed; resuming from its newest checkpoint"
        )
        self.write_state(status="killed", stale=True)
        return note

    def discard_new(self, existed: bool) -> None:
        """Undo a new run that failed before saving any model: remove what it created (the
        directory was missing or empty before, so nothing of the user's is lost)."""
        import shutil

        if self.model.is_file() or self.list_checkpoints():
            return
        for path in (self.config_file, self.state_file):
            path.unlink(missing_ok=True)
        for folder in (self.tensorboard, self.videos, self.checkpoints):
            shutil.rmtree(folder, ignore_errors=True)
        if not existed and self.path.is_dir() and not any(self.path.iterdir()):
            self.path.rmdir()

    # ------------------------------------------------------------------ state
    def read_config(self) -> dict[str, Any]:
        try:
            data = load_config_file(self.config_file)
        except ConfigFileError as exc:
            raise RunDirError(f"{exc}; restore {self.config_file} from a backup") from exc
        if not isinstance(data, dict):
            raise RunDirError(f"{self.config_file} must hold a mapping")
        return data

    def read_state(self) -> dict[str, Any]:
        """`run.json` as a mapping (`{}` when missing or not JSON); `RunDirError` when it is
        larger than `MAX_STATE_BYTES` or a field the commands read has the wrong type or an
        out-of-range value (`STATE_FIELDS`), so a resume never acts on a tampered field."""
        if not self.state_file.is_file():
            return {}
        size = self.state_file.stat().st_size
        if size > MAX_STATE_BYTES:
            raise RunDirError(
                f"{self.state_file} is {size} bytes; a run's run.json is at most "
                f"{MAX_STATE_BYTES}: restore it from a backup or delete it"
            )
        try:
            data = json.loads(self.state_file.read_bytes()[:MAX_STATE_BYTES])
        except (ValueError, RecursionError):  # not JSON, too deep, a number too long
            return {}
        if not isinstance(data, dict):
            return {}
        for key, value in data.items():
            check_state_field(self.state_file, key, value)
        self._check_entries(data)
        return data

    def _check_entries(self, data: dict[str, Any]) -> None:
        """`stages` and `milestones` of `run.json` are lists of mappings; a milestone's start
        state (a resumed swarm starts from the last one) is a file in the run's `swarm/`."""
        fix = f"restore {self.state_file.name} from a backup or delete it"
        for key in ("stages", "milestones"):
            if not all(isinstance(entry, dict) for entry in data.get(key) or []):
                raise RunDirError(f"{self.state_file}: field {key!r} must list mappings; {fix}")
        swarm = (self.path / "swarm").resolve()
        for entry in data.get("milestones") or []:
            value, state = entry.get("value"), entry.get("state")
            if not isinstance(value, int) or not isinstance(state, str):
                raise RunDirError(
                    f"{self.state_file}: a milestone needs a whole-number value and a state "
                    f"file; {fix}"
                )
            if swarm not in Path(state).expanduser().resolve().parents:
                raise RunDirError(
                    f"{self.state_file}: milestone state {state[:120]} is not in the run's "
                    f"swarm/ folder; {fix}"
                )

    def write_state(self, **updates: Any) -> dict[str, Any]:
        state = self.read_state()
        state.update(updates)
        state["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        atomic_write_text(self.state_file, json.dumps(state, indent=2, default=str))
        return state

    def write_config(self, text: str) -> None:
        atomic_write_text(self.config_file, text)

    # ------------------------------------------------------------------ checkpoints
    def list_checkpoints(self, suffix: str = ".zip") -> list[tuple[int, Path]]:
        """(step, path) of `checkpoints/step_<N><suffix>`, oldest first."""
        if not self.checkpoints.is_dir():
            return []
        found = []
        for path in self.checkpoints.iterdir():
            match = _STEP_RE.match(path.name)
            if match and match.group(2) == suffix:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def all_checkpoints(self) -> list[tuple[int, Path]]:
        """(step, model zip) of every checkpoint, oldest first: SB3's `checkpoints/step_N.zip`
        and RLlib's `checkpoints/step_N/model.zip` (what an agent or a check of the run reads
        when it has no `model.zip` yet)."""
        found = list(self.list_checkpoints())
        if self.checkpoints.is_dir():
            for index, folder in enumerate(self.checkpoints.iterdir()):
                if index >= MAX_CHECKPOINT_ENTRIES:
                    break
                match = _RLLIB_STEP_RE.match(folder.name)
                if match and (folder / "model.zip").is_file():
                    found.append((int(match.group(1)), folder / "model.zip"))
        return sorted(found)

    def prune_checkpoints(self, keep: int) -> None:
        """Keep the newest `keep` step checkpoints (0 keeps all)."""
        if keep <= 0:
            return
        for _, path in self.list_checkpoints()[:-keep]:
            path.unlink(missing_ok=True)

    def resume_point(self) -> tuple[Path, dict[str, Any]]:
        """The model to resume from: the newest checkpoint or model.zip, by step count.

        A corrupt newest file is an error that names it and the next one to fall back to,
        rather than a silent step back in training.
        """
        candidates: list[tuple[int, Path]] = list(self.list_checkpoints())
        if self.model.is_file():
            candidates.append((-1, self.model))
        if not candidates:
            raise CheckpointError(
                f"cannot resume {self.path}: no checkpoints/step_*.zip and no model.zip; start a new run"
            )
        scored: list[tuple[int, Path, dict[str, Any] | None, str | None]] = []
        for step, path in candidates:
            try:
                meta = read_model_metadata(path)
                scored.append((meta["num_timesteps"], path, meta, None))
            except CheckpointError as exc:
                scored.append((step, path, None, str(exc)))
        scored.sort(key=lambda item: item[0])
        steps, path, best, error = scored[-1]
        if error is not None or best is None:
            good = [(s, p) for s, p, m, e in scored if m is not None]
            fallback = (
                f"; delete or move it to resume from {good[-1][1].name} ({good[-1][0]} steps)"
                if good
                else ""
            )
            raise CheckpointError(f"cannot resume from {path}: {error}{fallback}")
        return path, best
