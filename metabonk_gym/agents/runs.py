"""Run directories as agents: find the trained policy of any trainer's run from its files.

What: `find_run(spec)` recognises a run directory of `train ppo`, `train bc`, `curriculum`,
`train appo` / `--engine rllib`, `tune pbt` (the run or its `best/`) and `train dreamer` from
the files each writes (`run.json`, `config.yaml`, `model.zip`, `checkpoints/`, `best/`,
`sheeprl/`), and `agent_path(spec)` turns such a directory into what the agent loaders read: the
run's SB3 model zip (every trainer but Dreamer writes one, with its training config inside, so
the env is rebuilt as the run saw it) or the Dreamer run itself. Why one loader: `eval`, `play`,
`record`, `ladder` and `dream` take a run directory of any trainer and would otherwise each
guess; nothing here unpickles (zips are read as JSON; weights later by `safeload`).

>>> agent_path("random")
'random'
>>> import tempfile
>>> find_run(tempfile.mkdtemp())
Traceback (most recent call last):
...
metabonk_gym.errors.AgentError: ... is a folder but not a metabonk run directory (no run.json, config.yaml or model.zip); give a run directory of train ppo/bc/appo/dreamer, curriculum or tune pbt, or a model PATH.zip
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.experts.base import AgentError
from metabonk_gym.rundir import RunDir, read_model_metadata
from metabonk_gym.training.errors import CheckpointError
from metabonk_gym.training.wrapstack import describe_wrappers, normalize_wrappers, run_wrappers
from metabonk_gym.worldmodel.dream import model_policy
from metabonk_gym.worldmodel.dreamer import SHEEPRL_DIR, DreamerPolicy

#: Every kind of run `find_run` recognises.
RUN_KINDS: tuple[str, ...] = (
    "ppo",
    "bc",
    "dagger",
    "curriculum",
    "rllib",
    "pbt",
    "dreamer",
    "model",
)


@dataclass(frozen=True)
class AgentRun:
    """A trained agent on disk.

    Args:
        kind: one of `RUN_KINDS` ("model": a bare model zip of any trainer).
        path: what was given (a run directory or a model zip).
        weights: what the agent loaders read: an SB3 model zip, or the Dreamer run directory.
        env_id: the env it was trained on ("" when the files do not say).
    """

    kind: str
    path: Path
    weights: Path
    env_id: str

    def wrappers(self) -> str:
        """The wrapper stack it was trained with, in words (`training.wrapstack.run_wrappers`
        of the run directory; a bare zip's own config): what its episodes rebuild."""
        folder = self.path if self.path.is_dir() else self.weights.parent
        if (folder / "config.yaml").is_file():
            return describe_wrappers(run_wrappers(folder))
        config = read_model_metadata(self.weights)["config"] if self.kind != "dreamer" else {}
        return describe_wrappers(normalize_wrappers(config.get("wrappers")))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for reports."""
        return {
            "kind": self.kind,
            "path": str(self.path),
            "weights": str(self.weights),
            "env_id": self.env_id,
            "wrappers": self.wrappers(),
        }


def _zip_kind(zip_path: Path, run_dir: Path | None) -> tuple[str, str]:
    """(kind, env id) of a metabonk model zip, from its `metabonk` entry and the run's
    `run.json` (a zip written by RLlib, a curriculum or BC says so in its metadata)."""
    meta = read_model_metadata(zip_path)
    state = RunDir(run_dir).read_state() if run_dir is not None else {}
    engine = str(meta.get("engine") or state.get("engine") or "sb3")
    if engine == "rllib-pbt":
        kind = "pbt"
    elif engine.startswith("rllib"):
        kind = "rllib"
    elif meta.get("curriculum"):
        kind = "curriculum"
    elif meta.get("algo") in ("bc", "dagger"):
        kind = str(meta["algo"])
    else:
        kind = "ppo"
    return kind, str(meta.get("env_id", ""))


def _newest_checkpoint(run: RunDir) -> Path | None:
    """The newest model zip among a run's checkpoints: SB3's `checkpoints/step_N.zip` or
    RLlib's `checkpoints/step_N/model.zip` (a run stopped before its final `model.zip`)."""
    found = run.all_checkpoints()
    return max(found)[1] if found else None


def _not_a_run(path: Path) -> AgentError:
    return AgentError(
        f"{path} is a folder but not a metabonk run directory (no run.json, config.yaml or "
        "model.zip); give a run directory of train ppo/bc/appo/dreamer, curriculum or tune pbt, "
        "or a model PATH.zip"
    )


def find_run(spec: str | Path) -> AgentRun:
    """The trained agent in a run directory or model zip; `AgentError` (one line, naming the
    fix) for a folder that is no run, a run without a model yet, or a corrupt model."""
    path = Path(spec).expanduser()
    try:
        return _find_run(path)
    except CheckpointError as exc:
        raise AgentError(str(exc)) from None


def _find_run(path: Path) -> AgentRun:
    if path.is_file():
        kind, env_id = _zip_kind(path, None)
        folder = path.parent
        if path.name == "model.zip" and RunDir(folder).is_run():
            kind, env_id = _zip_kind(path, folder)
        elif folder.name == "best" and (folder / "best.json").is_file():
            kind = "pbt"
        else:
            kind = "model" if kind == "ppo" else kind
        return AgentRun(kind, path, path, env_id)
    if not path.is_dir():
        raise AgentError(f"agent run directory or model file not found: {path}")
    run = RunDir(path)
    if (path / SHEEPRL_DIR).is_dir() and run.config_file.is_file():
        stored = run.read_config()
        return AgentRun("dreamer", path, path, str(stored.get("env_id", "")))
    best = path / "best" / "model.zip"
    if best.is_file():  # `tune pbt DIR`: the best member's policy
        _, env_id = _zip_kind(best, None)
        return AgentRun("pbt", path, best, env_id)
    if path.name == "best" and (path / "best.json").is_file() and run.model.is_file():
        _, env_id = _zip_kind(run.model, None)
        return AgentRun("pbt", path, run.model, env_id)
    if run.model.is_file():
        kind, env_id = _zip_kind(run.model, path)
        return AgentRun(kind, path, run.model, env_id)
    if not run.is_run():
        raise _not_a_run(path)
    newest = _newest_checkpoint(run)
    if newest is None:
        state = run.read_state()
        raise AgentError(
            f"{path} is a run directory without a model yet (no model.zip, no checkpoint; "
            f"status {state.get('status', 'unknown')}); train it further or give another run"
        )
    kind, env_id = _zip_kind(newest, path)
    return AgentRun(kind, path, newest, env_id)


def agent_path(spec: str) -> str:
    """What the agent loaders read for `spec`: a run directory's model zip (or its own path
    for a Dreamer run); any other spec (a name, a zip) unchanged."""
    path = Path(spec).expanduser()
    if not path.is_dir():
        return spec
    return str(find_run(path).weights)


def frame_policy(
    spec: str | Path, frame_shape: tuple[int, ...], n_actions: int, *, trust: bool = False
) -> Callable[[np.ndarray], int]:
    """A run directory or model zip of any trainer as a frame -> action policy for `metabonk
    dream` (greedy): an SB3 zip through `model_policy`, a Dreamer run through its actor (which
    resizes frames as in its training); `AgentError` when it has other actions."""
    run = find_run(spec)
    if run.kind != "dreamer":
        return model_policy(run.weights, frame_shape, n_actions, trust=trust)
    actor = DreamerPolicy(run.weights, greedy=True)
    if actor.n_actions != n_actions:
        raise AgentError(
            f"{spec} has {actor.n_actions} actions, the world model {n_actions}; give a run of "
            "the world model's game"
        )
    actor.reset()
    return actor
