"""Run directories and model files: atomic saves, checked loads, and the resume point.

A run directory holds `config.yaml` (the effective config), `run.json` (status and step count),
`tensorboard/` (event files), `checkpoints/step_<N>.zip`, `videos/` and `model.zip`. Every file is
written atomically, and a command given bad input fails before it writes anything, so an existing
run is never damaged. Model zips carry a `metabonk` entry (env id, algorithm, config) in SB3's
`data` file, so `metabonk eval` and `--init-from` know the preprocessing a model expects.

>>> import tempfile, pathlib
>>> run = RunDir(pathlib.Path(tempfile.mkdtemp()) / "run")
>>> run.checkpoint_path(1200).name
'step_000001200.zip'
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
from metabonk_gym.training.errors import CheckpointError, RunDirError
from metabonk_gym.utils import atomic_write_bytes, atomic_write_text

METADATA_KEY = "metabonk"
_STEP_RE = re.compile(r"^step_(\d+)\.zip$")


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
            data = json.loads(archive.read("data"))
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, json.JSONDecodeError, ValueError) as exc:
        raise CheckpointError(f"model file {path} is corrupt or truncated: {exc}") from exc
    if not isinstance(data, dict):
        raise CheckpointError(f"model file {path} has a malformed 'data' entry")
    return data


def read_model_metadata(path: Path) -> dict[str, Any]:
    """The `metabonk` entry of a model zip (env id, algo, config, steps); checks the zip first."""
    data = read_model_data(path)
    meta = data.get(METADATA_KEY)
    if not isinstance(meta, dict) or "config" not in meta:
        raise CheckpointError(
            f"{path} is a stable-baselines3 model but not one written by metabonk (no 'metabonk' entry "
            "with its env and preprocessing); train it with `metabonk train ppo` or `train bc`"
        )
    meta = dict(meta)
    meta["num_timesteps"] = int(data.get("num_timesteps", 0) or 0)
    return meta


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

    def checkpoint_path(self, step: int) -> Path:
        return self.checkpoints / f"step_{step:09d}.zip"

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
        if not self.state_file.is_file():
            return {}
        try:
            data = json.loads(self.state_file.read_text())
        except json.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}

    def write_state(self, **updates: Any) -> dict[str, Any]:
        state = self.read_state()
        state.update(updates)
        state["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        atomic_write_text(self.state_file, json.dumps(state, indent=2, default=str))
        return state

    def write_config(self, text: str) -> None:
        atomic_write_text(self.config_file, text)

    # ------------------------------------------------------------------ checkpoints
    def list_checkpoints(self) -> list[tuple[int, Path]]:
        """(step, path) of `checkpoints/step_<N>.zip`, oldest first."""
        if not self.checkpoints.is_dir():
            return []
        found = []
        for path in self.checkpoints.iterdir():
            match = _STEP_RE.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
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
