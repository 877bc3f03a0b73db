"""What `metabonk watch DIR` finds in a directory and how the page reads it: TensorBoard curves,
run state (curriculum stages, PBT members), eval videos, Minari datasets step by step, think
decision logs, memory graphs and ladder pages; every path stays inside the directory.

Why: one read-only view of everything a run, an eval or a recording leaves behind, served to
the page as JSON. The directory is data someone may have shared: `inside(root, rel)` is the one
gate for every path a route reads (`../` and symlinks out of it get None; `inside_file` also
refuses what is not a regular file, a FIFO that would block a read), and every file is read up
to a cap (`read_head`, `read_tail`), never whole.

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> (root / "a.mp4").write_bytes(b"0") and None
>>> inside(root, "a.mp4").name, inside(root, "../etc/passwd"), inside(root, "/etc/passwd")
('a.mp4', None, None)
>>> scan(root)["videos"]
['a.mp4']
>>> read_head(inside_file(root, "a.mp4"), 10), inside_file(root, ".")
(b'0', None)
"""

from __future__ import annotations

import io
import json
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.think.log import LOG_NAME, read_decisions
from metabonk_gym.training.datasets import MAX_DATASET_META_BYTES as MAX_DATASET_META
from metabonk_gym.vector.view import env_frame

#: Files and folders `scan` looks at before it stops, and how deep it goes.
MAX_SCAN_FILES = 20000
MAX_DEPTH = 8
#: Points per curve sent to the page (evenly thinned).
MAX_POINTS = 400
#: Decision records sent at most.
MAX_DECISIONS = 1000
#: The most bytes read of a run's `run.json`, its `plan.yaml`, the end of a `pbt_global.txt`,
#: and a decision log (a larger log is refused: `read_decisions` reads it whole).
MAX_RUN_JSON = 1_000_000
MAX_PLAN = 20_000
MAX_PBT_TAIL = 256_000
MAX_LOG_BYTES = 32_000_000
#: A TensorBoard event file larger than this is not read (its folder's curves are left out).
MAX_EVENTS_BYTES = 256_000_000
#: Files a dataset or memory-graph folder may hold for `confined` to look at them all.
MAX_CONFINED_FILES = 4096


class TooLargeError(ValueError):
    """A file the page asked for is larger than the dashboard reads."""


VIDEO_SUFFIXES = (".mp4", ".webm", ".gif")


def inside(root: Path, rel: str) -> Path | None:
    """`root/rel` when it exists and lies inside `root` (symlinks resolved), else None."""
    if not rel or "\x00" in rel or rel.startswith(("/", "\\")):
        return None
    base = root.resolve()
    try:
        path = (base / rel).resolve()
    except (OSError, RuntimeError):
        return None
    if path != base and base not in path.parents:
        return None
    return path if path.exists() else None


def inside_file(root: Path, rel: str) -> Path | None:
    """`inside(root, rel)` when it is a regular file (not a folder, FIFO or device), else None."""
    path = inside(root, rel)
    try:
        return path if path is not None and stat.S_ISREG(path.stat().st_mode) else None
    except OSError:
        return None


def confined(root: Path, path: Path) -> bool:
    """Whether `path` (a folder: everything below it, up to `MAX_CONFINED_FILES` entries) lies
    inside `root` with symlinks resolved, and holds only regular files and folders: a dataset or
    graph folder linking out, or holding a FIFO, is refused."""
    base = root.resolve()
    entries: list[Path] = [path]
    if path.is_dir():
        for dirpath, dirnames, filenames in os.walk(path):
            entries += [Path(dirpath) / name for name in (*dirnames, *filenames)]
            if len(entries) > MAX_CONFINED_FILES:
                return False
    for entry in entries:
        try:
            real = entry.resolve()
            mode = real.stat().st_mode
        except (OSError, RuntimeError):
            return False
        if real != base and base not in real.parents:
            return False
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # (a FIFO would block a reader)
            return False
    return True


def _open_regular(path: Path) -> int:
    """A read-only descriptor of `path` if it is still a regular file (a link or FIFO swapped in
    since it was checked gets OSError: no open blocks, no link is followed)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def read_head(path: Path | None, limit: int) -> bytes | None:
    """The first `limit` bytes of `path` and whether there was more: None for a missing path;
    a file longer than `limit` gives its first `limit` bytes and one more (callers check)."""
    if path is None:
        return None
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit + 1)


def read_tail(path: Path, limit: int) -> bytes:
    """The last `limit` bytes of `path`, from its first whole line on."""
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - limit))
        data = handle.read(limit)
    return data if size <= limit else data.partition(b"\n")[2]


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def scan(root: Path) -> dict[str, Any]:
    """Everything viewable under `root`, as paths relative to it."""
    root = root.resolve()
    found: dict[str, Any] = {
        "videos": [],
        "datasets": [],
        "decisions": [],
        "memory": [],
        "ladders": [],
        "pages": [],
        "tensorboard": [],
        "runs": [],
        "pbt": [],
        "archives": [],
    }
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        folder = Path(dirpath)
        depth = len(folder.relative_to(root).parts)
        dirnames[:] = (
            sorted(d for d in dirnames if not d.startswith(".")) if depth < MAX_DEPTH else []
        )
        seen += 1  # (folders count: a tree of empty folders is no cheaper to walk)
        rel_folder = _rel(root, folder) if folder != root else "."
        if folder.name == "data" and "metadata.json" in filenames and folder != root:
            parent = folder.parent  # a Minari dataset: DATASET/data/{metadata.json, ...}
            found["datasets"].append(_rel(root, parent) if parent != root else ".")
        if LOG_NAME in filenames:
            found["decisions"].append(rel_folder)
        if "run.json" in filenames:
            found["runs"].append(rel_folder)
        if "pbt_global.txt" in filenames:
            found["pbt"].append(_rel(root, folder / "pbt_global.txt"))
        if any(f.startswith("events.out.tfevents") for f in filenames):
            found["tensorboard"].append(rel_folder)
        for d in list(dirnames):
            if d.endswith(".lbdb"):
                found["memory"].append(_rel(root, folder / d))
        for name in sorted(filenames):
            seen += 1
            rel = _rel(root, folder / name)
            if name.endswith(VIDEO_SUFFIXES) and not name.startswith("."):
                found["videos"].append(rel)
            elif name.endswith(".lbdb"):
                found["memory"].append(rel)
            elif name.startswith("ladder") and name.endswith(".json"):
                found["ladders"].append(rel)
            elif name.endswith(".html"):
                found["pages"].append(rel)
            elif name == "archive.npz":  # an explorer's archive (`metabonk explore`)
                found["archives"].append(rel)
        if seen > MAX_SCAN_FILES:
            found["truncated"] = True
            break
    return found


def _thin(points: list[list[float]]) -> list[list[float]]:
    if len(points) <= MAX_POINTS:
        return points
    keep = np.linspace(0, len(points) - 1, MAX_POINTS).round().astype(int)
    return [points[i] for i in keep]


def _events_readable(root: Path, folder: Path) -> bool:
    """Whether every event file of `folder` is a regular file inside `root` of at most
    `MAX_EVENTS_BYTES` (TensorBoard's reader would follow a link out, and walk a sparse file's
    gigabytes record by record)."""
    for path in folder.glob("events.out.tfevents*"):
        real = inside_file(root, path.relative_to(root.resolve()).as_posix())
        if real is None or real.stat().st_size > MAX_EVENTS_BYTES:
            return False
    return True


def scalars(root: Path, folders: list[str]) -> dict[str, dict[str, list[list[float]]]]:
    """TensorBoard scalars per event folder: {folder: {tag: [[step, value], ...]}}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, dict[str, list[list[float]]]] = {}
    for rel in folders[:32]:
        path = inside(root, rel) if rel != "." else root.resolve()
        if path is None or not _events_readable(root, path):
            continue
        acc = EventAccumulator(str(path), size_guidance={"scalars": 2000})
        acc.Reload()
        tags = acc.Tags().get("scalars", [])
        out[rel] = {
            tag: _thin([[float(e.step), float(e.value)] for e in acc.Scalars(tag)]) for tag in tags
        }
    return out


def run_state(root: Path, folders: list[str], pbt_logs: Sequence[str] = ()) -> dict[str, Any]:
    """Each run's `run.json` (status, curriculum stage, milestones, PBT's best member), the start
    of its `plan.yaml` and its PBT exploits (the last lines of the `pbt_global.txt` files below
    it, `pbt_logs` as `scan` lists them); every file through `inside_file`, read up to a cap."""
    out: dict[str, Any] = {}
    for rel in folders[:64]:
        prefix = "" if rel == "." else rel.rstrip("/") + "/"
        try:
            raw = read_head(inside_file(root, prefix + "run.json"), MAX_RUN_JSON)
            if raw is None or len(raw) > MAX_RUN_JSON:
                continue  # (a run.json past the cap is no run's state)
            state = json.loads(raw)
        except (OSError, ValueError):
            continue
        exploits = []
        for log in [p for p in pbt_logs if p.startswith(prefix)][:4]:
            path = inside_file(root, log)
            try:
                lines = read_tail(path, MAX_PBT_TAIL).splitlines()[-200:] if path else []
            except OSError:
                continue
            for line in lines:
                try:
                    exploits.append(json.loads(line))
                except ValueError:
                    continue
        try:
            plan = read_head(inside_file(root, prefix + "plan.yaml"), MAX_PLAN)
        except OSError:
            plan = None
        out[rel] = {
            "state": state,
            "exploits": exploits,
            "plan": plan[:MAX_PLAN].decode("utf-8", "replace") if plan is not None else None,
        }
    return out


def decisions(root: Path, rel: str) -> list[dict[str, Any]]:
    """The newest decision records of the think log folder `rel` under `root` (calls joined
    with outcomes); FileNotFoundError without a log inside `root`, `TooLargeError` past
    `MAX_LOG_BYTES`."""
    prefix = "" if rel in ("", ".") else rel.rstrip("/") + "/"
    path = inside_file(root, prefix + LOG_NAME)
    if path is None or path.name != LOG_NAME:  # (a link inside root to another name: refused)
        raise FileNotFoundError(f"no {LOG_NAME} in {rel}")
    try:  # the file checked, opened once: a link swapped in since is refused, never followed
        fd = _open_regular(path)
    except OSError:
        raise FileNotFoundError(f"no {LOG_NAME} in {rel}") from None
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        if size > MAX_LOG_BYTES:
            raise TooLargeError(
                f"{prefix}{LOG_NAME} is {size / 1e6:.0f} MB; the dashboard reads decision logs "
                f"of up to {MAX_LOG_BYTES // 1_000_000} MB"
            )
        data = handle.read(MAX_LOG_BYTES)  # (lines appended since the size was read: not read)
    return read_decisions(io.BytesIO(data))[-MAX_DECISIONS:]


class DatasetView:
    """Random access to a Minari dataset folder's episodes (the two newest are cached).

    Args:
        folder: the dataset's folder (holding `metadata.json` and `data/`).
    """

    def __init__(self, folder: Path) -> None:
        import minari

        meta = folder / "data" / "metadata.json"
        if meta.stat().st_size > MAX_DATASET_META:  # (minari reads it whole)
            raise TooLargeError(
                f"{folder.name}/data/metadata.json is {meta.stat().st_size} bytes; a dataset's "
                f"metadata is read up to {MAX_DATASET_META} bytes"
            )
        self.folder = folder
        self.dataset = minari.MinariDataset(folder / "data")
        self._cache: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.Lock()

    def episodes(self) -> list[dict[str, Any]]:
        meta = self.dataset.storage.get_episode_metadata(range(self.dataset.total_episodes))
        out = []
        for i, m in enumerate(meta):
            out.append({"index": i, "steps": int(m.get("total_steps", 0)), "seed": m.get("seed")})
        return out

    def episode(self, index: int) -> Any:
        with self._lock:
            if index in self._cache:
                self._cache.move_to_end(index)
                return self._cache[index]
            if not 0 <= index < self.dataset.total_episodes:
                raise IndexError(f"episode {index} out of range")
            data = next(iter(self.dataset.iterate_episodes([index])))
            self._cache[index] = data
            while len(self._cache) > 2:
                self._cache.popitem(last=False)
            return data

    def step(self, index: int, step: int) -> dict[str, Any]:
        """Step `step` of episode `index`: the action taken there, its reward, ends and infos
        (the observation before it is `frame`)."""
        ep = self.episode(index)
        n = len(ep.rewards)
        if not 0 <= step < n:
            raise IndexError(f"step {step} out of range 0..{n - 1}")
        infos = {}
        for key, values in (ep.infos or {}).items():
            if isinstance(values, np.ndarray) and len(values) > step and values.ndim == 1:
                value = values[step]
                infos[key] = value.item() if hasattr(value, "item") else value
        action = np.asarray(ep.actions[step])
        return {
            "episode": index,
            "step": step,
            "steps": n,
            "action": action.tolist(),
            "reward": float(ep.rewards[step]),
            "terminated": bool(ep.terminations[step]),
            "truncated": bool(ep.truncations[step]),
            "infos": {k: v for k, v in infos.items() if isinstance(v, (int, float, bool, str))},
        }

    def frame(self, index: int, step: int) -> np.ndarray | None:
        """The observation at `step` (before its action) as an image, None when not one."""
        ep = self.episode(index)
        obs = ep.observations
        if isinstance(obs, dict):
            obs = obs.get("image", obs.get("pixels"))
        if obs is None or not 0 <= step < len(obs):
            return None
        return env_frame(None, np.asarray(obs[step]))
