"""What `metabonk watch DIR` finds in a directory and how the page reads it: TensorBoard curves,
run state (curriculum stages, PBT members), eval videos, Minari datasets step by step, think
decision logs, memory graphs and ladder pages; every path stays inside the directory.

Why: one read-only view of everything a run, an eval or a recording leaves behind, served to
the page as JSON. `inside(root, rel)` is the one gate for paths from the page (`../` gets None).

>>> import tempfile
>>> root = Path(tempfile.mkdtemp())
>>> (root / "a.mp4").write_bytes(b"0") and None
>>> inside(root, "a.mp4").name, inside(root, "../etc/passwd"), inside(root, "/etc/passwd")
('a.mp4', None, None)
>>> scan(root)["videos"]
['a.mp4']
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.think.log import LOG_NAME, read_decisions
from metabonk_gym.vector.view import env_frame

#: Files `scan` looks at before it stops, and how deep it goes.
MAX_SCAN_FILES = 20000
MAX_DEPTH = 8
#: Points per curve sent to the page (evenly thinned).
MAX_POINTS = 400
#: Decision records sent at most.
MAX_DECISIONS = 1000
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
    }
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        folder = Path(dirpath)
        depth = len(folder.relative_to(root).parts)
        dirnames[:] = (
            sorted(d for d in dirnames if not d.startswith(".")) if depth < MAX_DEPTH else []
        )
        rel_folder = _rel(root, folder) if folder != root else "."
        if folder.name == "data" and "metadata.json" in filenames and folder != root:
            parent = folder.parent  # a Minari dataset: DATASET/data/{metadata.json, ...}
            found["datasets"].append(_rel(root, parent) if parent != root else ".")
        if LOG_NAME in filenames:
            found["decisions"].append(rel_folder)
        if "run.json" in filenames:
            found["runs"].append(rel_folder)
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
        if seen > MAX_SCAN_FILES:
            found["truncated"] = True
            break
    return found


def _thin(points: list[list[float]]) -> list[list[float]]:
    if len(points) <= MAX_POINTS:
        return points
    keep = np.linspace(0, len(points) - 1, MAX_POINTS).round().astype(int)
    return [points[i] for i in keep]


def scalars(root: Path, folders: list[str]) -> dict[str, dict[str, list[list[float]]]]:
    """TensorBoard scalars per event folder: {folder: {tag: [[step, value], ...]}}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, dict[str, list[list[float]]]] = {}
    for rel in folders[:32]:
        path = inside(root, rel) if rel != "." else root.resolve()
        if path is None:
            continue
        acc = EventAccumulator(str(path), size_guidance={"scalars": 2000})
        acc.Reload()
        tags = acc.Tags().get("scalars", [])
        out[rel] = {
            tag: _thin([[float(e.step), float(e.value)] for e in acc.Scalars(tag)]) for tag in tags
        }
    return out


def run_state(root: Path, folders: list[str]) -> dict[str, Any]:
    """Each run's `run.json` (status, curriculum stage, milestones, PBT's best member) and its
    PBT exploits (`pbt_global.txt` lines)."""
    out: dict[str, Any] = {}
    for rel in folders[:64]:
        folder = inside(root, rel) if rel != "." else root.resolve()
        if folder is None:
            continue
        try:
            state = json.loads((folder / "run.json").read_text()[:1_000_000])
        except (OSError, ValueError):
            continue
        exploits = []
        for log in sorted(folder.rglob("pbt_global.txt"))[:4]:
            for line in log.read_text(errors="replace").splitlines()[-200:]:
                try:
                    exploits.append(json.loads(line))
                except ValueError:
                    continue
        plan = folder / "plan.yaml"
        out[rel] = {
            "state": state,
            "exploits": exploits,
            "plan": plan.read_text()[:20000] if plan.is_file() else None,
        }
    return out


def decisions(folder: Path) -> list[dict[str, Any]]:
    """The newest decision records of a think log folder (calls joined with outcomes)."""
    return read_decisions(folder)[-MAX_DECISIONS:]


class DatasetView:
    """Random access to a Minari dataset folder's episodes (the two newest are cached).

    Args:
        folder: the dataset's folder (holding `metadata.json` and `data/`).
    """

    def __init__(self, folder: Path) -> None:
        import minari

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
