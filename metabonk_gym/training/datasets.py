"""Minari datasets of played episodes: written without jax, atomically, with checks on read.

Minari's `DataCollector` needs jax only for a tree map; `EpisodeBuffer`s filled here and
`create_dataset_from_buffers` need none. Frames are stored losslessly (`jpeg_encoding=False`),
so behavioural cloning sees exactly what the env gave. Episodes are written as they finish into a
hidden staging folder under the datasets root and moved into place when recording ends, so a
crash or a closed window never leaves a half-written dataset under its real id. Reading checks
that the dataset was recorded on the same game, actions and frameskip as the training run.

>>> check_dataset_id("metabonk/quest-expert-v0")
'metabonk/quest-expert-v0'
>>> check_dataset_id("quest expert")
Traceback (most recent call last):
...
metabonk_gym.training.errors.DatasetError: malformed dataset id 'quest expert': use (NAMESPACE/)NAME-vVERSION, e.g. metabonk/bonkquest-expert-v0
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.training.errors import DatasetError
from metabonk_gym.training.rollout import Trajectory
from metabonk_gym.utils import env_var

#: Disk space kept free beyond the estimate of an episode's size.
FREE_MARGIN_BYTES = 64 * 1024 * 1024
#: A dataset folder's `metadata.json` larger than this is not read (Minari reads it whole).
MAX_DATASET_META_BYTES = 1_000_000


def check_dataset_id(dataset_id: str) -> str:
    from minari.dataset.minari_dataset import parse_dataset_id

    try:
        parse_dataset_id(dataset_id)
    except ValueError:
        raise DatasetError(
            f"malformed dataset id {dataset_id!r}: use (NAMESPACE/)NAME-vVERSION, e.g. metabonk/bonkquest-expert-v0"
        ) from None
    return dataset_id


def datasets_root() -> Path:
    """Minari's datasets folder (`MINARI_DATASETS_PATH` or ~/.minari/datasets)."""
    from minari.storage.datasets_root_dir import get_dataset_path

    return Path(get_dataset_path())


def _minari_root(path: Path) -> contextlib.AbstractContextManager[None]:
    return env_var("MINARI_DATASETS_PATH", str(path))


def _infos(infos: list[dict[str, Any]], labels: list[Any] | None = None) -> dict[str, Any]:
    """Per-step infos (reset first) as Minari wants them: a dict of equal-length arrays.

    Numeric game variables are kept; `reward_terms` becomes a sub-dict (0 at reset); values
    only some steps have (e.g. `game_seed` at reset) are carried to every step. `expert_action`
    (the agent's choice for the observation at the same index, -1 after the last) is what
    behavioural cloning learns when recording added noise.
    """
    n = len(infos)
    keys: list[str] = []
    for info in infos:
        for key, value in info.items():
            if key not in keys and isinstance(
                value, (int, float, bool, np.integer, np.floating, np.bool_)
            ):
                keys.append(key)
    out: dict[str, Any] = {}
    for key in keys:
        last: Any = 0
        column = []
        for info in infos:
            last = info.get(key, last)
            column.append(last)
        out[key] = np.asarray(column)
        if out[key].dtype == object:
            out[key] = out[key].astype(np.float64)
    terms: list[str] = []
    for info in infos:
        for key in info.get("reward_terms") or {}:
            if key not in terms:
                terms.append(key)
    if terms:
        out["reward_terms"] = {
            name: np.asarray(
                [float((info.get("reward_terms") or {}).get(name, 0.0)) for info in infos]
            )
            for name in terms
        }
    if labels is not None and len(labels) == n - 1 and all(np.ndim(a) == 0 for a in labels):
        out["expert_action"] = np.asarray([*labels, -1], dtype=np.int64)
    assert all(len(v) == n for v in out.values() if not isinstance(v, dict))
    return out


def _env_for_spec(env: gym.Env) -> gym.Env:
    """The env whose spec Minari stores: ours with its wrappers when that spec serialises, else
    the base env. (An env object, never an id or spec: Minari would `gym.make` a second emulator.)"""
    try:
        spec = env.spec
        if spec is not None:
            spec.to_json()
            return env
    except Exception:
        pass
    return env.unwrapped


def _action_dtype(space: gym.Space) -> Any:
    """int64 for Discrete actions (as always stored), else the space's own dtype."""
    return (
        np.int64 if isinstance(space, gym.spaces.Discrete) or space.dtype is None else space.dtype
    )


class DatasetWriter:
    """Writes episodes to a new Minari dataset; `close()` publishes it under its id.

    Args:
        dataset_id: the Minari id, `(NAMESPACE/)NAME-vVERSION`.
        env: the env recorded (its spec and spaces are stored).
        algorithm_name, description, author: the dataset's metadata.
    """

    def __init__(
        self,
        dataset_id: str,
        env: gym.Env,
        *,
        algorithm_name: str = "metabonk",
        description: str | None = None,
        author: str = "metabonk-gym",
    ) -> None:
        from minari.storage.local import list_local_datasets

        self.dataset_id = check_dataset_id(dataset_id)
        self.root = datasets_root()
        if dataset_id in list_local_datasets() or (self.root / dataset_id).exists():
            raise DatasetError(
                f"dataset {dataset_id} already exists in {self.root}; pick a new name or version "
                "(e.g. -v1), or delete it with `minari delete`"
            )
        self.env = env
        self.algorithm_name = algorithm_name
        self.description = (
            description or f"{env.spec.id if env.spec else 'env'} episodes recorded by metabonk"
        )
        self.author = author
        self.staging = self.root / f".staging-{uuid.uuid4().hex[:12]}"
        self.episodes = 0
        self.steps = 0
        self._dataset: Any = None

    def _check_space(self, traj: Trajectory) -> None:
        space = self.env.observation_space
        first = np.asarray(traj.observations[0])
        if space.shape is not None and first.shape != space.shape:
            raise DatasetError(
                f"observation shape {first.shape} does not match the env's {space.shape}"
            )
        if len(traj.observations) != len(traj.actions) + 1:
            raise DatasetError("an episode needs one more observation than actions")

    def _check_disk(self, traj: Trajectory) -> None:
        frames = _stacked(traj.observations)
        size = sum(a.nbytes for a in frames.values()) if isinstance(frames, dict) else frames.nbytes
        estimate = size + 64 * len(traj.actions) * 8
        self.staging.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(self.staging).free
        if free < estimate + FREE_MARGIN_BYTES:
            raise DatasetError(
                f"not enough disk space in {self.root} for another episode (~{estimate / 1e6:.0f} MB needed, "
                f"{free / 1e6:.0f} MB free); free space or record smaller frames (--downscale, "
                "--obs-type grayscale)"
            )

    def add(self, traj: Trajectory, seed: int | None = None) -> None:
        """Append one episode (its last step's terminated/truncated flags say how it ended)."""
        from minari import create_dataset_from_buffers
        from minari.data_collector.episode_buffer import EpisodeBuffer

        if not traj.actions:
            return
        self._check_space(traj)
        self._check_disk(traj)
        buffer = EpisodeBuffer(
            id=self.episodes,
            seed=seed,
            observations=_stacked(traj.observations),
            actions=np.asarray(traj.actions, dtype=_action_dtype(self.env.action_space)),
            rewards=np.asarray(traj.rewards, dtype=np.float64),
            terminations=np.asarray(traj.terminations, dtype=bool),
            truncations=np.asarray(traj.truncations, dtype=bool),
            infos=_infos(traj.infos, traj.labels),
        )
        with _minari_root(self.staging), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self._dataset is None:
                self._dataset = create_dataset_from_buffers(
                    self.dataset_id,
                    [buffer],
                    env=_env_for_spec(self.env),
                    observation_space=self.env.observation_space,
                    action_space=self.env.action_space,
                    algorithm_name=self.algorithm_name,
                    author=self.author,
                    description=self.description,
                    jpeg_encoding=False,
                )
            else:
                self._dataset.storage.update_episodes([buffer])
        self.episodes += 1
        self.steps += len(traj.actions)

    def close(self) -> Path | None:
        """Move the dataset into the datasets root (None when no episode was recorded)."""
        from minari.dataset.minari_dataset import parse_dataset_id
        from minari.namespace import create_namespace, list_local_namespaces

        try:
            if self._dataset is None:
                return None
            namespace = parse_dataset_id(self.dataset_id)[0]
            if namespace is not None and namespace not in list_local_namespaces():
                create_namespace(namespace)
            target = self.root / self.dataset_id
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.staging / self.dataset_id, target)
            return target
        finally:
            self._dataset = None
            shutil.rmtree(self.staging, ignore_errors=True)


def load_dataset(dataset_id: str) -> Any:
    """A local Minari dataset, with a clear error naming the datasets that do exist."""
    import minari
    from minari.storage.local import list_local_datasets

    check_dataset_id(dataset_id)
    try:
        dataset = minari.load_dataset(dataset_id)
    except FileNotFoundError:
        known = ", ".join(sorted(list_local_datasets())) or "(none)"
        raise DatasetError(
            f"dataset {dataset_id} not found in {datasets_root()}; local datasets: {known}. "
            "Record one with `metabonk record ENV --agent scripted --dataset ID`"
        ) from None
    except Exception as exc:
        raise DatasetError(f"dataset {dataset_id} cannot be read (corrupt?): {exc}") from exc
    try:
        # Minari opens the data file lazily: read every episode's header now, so a truncated or
        # missing data file fails here with a clear error, not halfway through `train bc`
        list(dataset.storage.get_episode_metadata(range(dataset.total_episodes)))
    except Exception as exc:
        raise DatasetError(f"dataset {dataset_id} cannot be read (corrupt?): {exc}") from exc
    return dataset


def dataset_env_kwargs(dataset: Any) -> dict[str, Any]:
    """The env id and make-kwargs the dataset was recorded with."""
    spec = dataset.spec.env_spec
    if spec is None:
        return {}
    kwargs: dict[str, Any] = dict(spec.kwargs or {})
    kwargs["env_id"] = spec.id
    return kwargs


def check_dataset_env(dataset: Any, env_id: str) -> None:
    """The dataset must come from `env_id` (checked before any emulator starts)."""
    theirs = str(dataset_env_kwargs(dataset).get("env_id", "")).split(":")[-1]
    if theirs and theirs != env_id.split(":")[-1]:
        raise DatasetError(
            f"dataset {dataset.spec.dataset_id} was recorded on {theirs}, not {env_id}"
        )


def check_dataset_fits(
    dataset: Any, env_id: str, action_space: gym.Space, frameskip: int
) -> Mapping[str, Any]:
    """The dataset's recording kwargs, after checking its env, actions and frameskip fit."""
    check_dataset_env(dataset, env_id)
    kwargs = dataset_env_kwargs(dataset)
    if dataset.spec.action_space != action_space:
        raise DatasetError(
            f"dataset {dataset.spec.dataset_id} has actions {dataset.spec.action_space} but {env_id} "
            f"has {action_space}; record it again with this version of the game"
        )
    if int(kwargs.get("frameskip", frameskip)) != frameskip:
        raise DatasetError(
            f"dataset {dataset.spec.dataset_id} was recorded with frameskip {kwargs.get('frameskip')}, the "
            f"config uses {frameskip}; one action would mean a different number of frames"
        )
    space = dataset.spec.observation_space
    image = isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3
    vector = isinstance(space, gym.spaces.Box) and len(space.shape) == 1
    stacked = isinstance(space, gym.spaces.Dict) and all(  # recorded with a `wrappers:` stack
        isinstance(s, gym.spaces.Box) for s in space.spaces.values()
    )
    if not (image or vector or stacked):
        raise DatasetError(
            f"dataset {dataset.spec.dataset_id} has observations {space}; behavioural cloning needs "
            "uint8 images (H, W, C) or state vectors (N,)"
        )
    return kwargs


def _stacked(observations: list[Any]) -> Any:
    """An episode's observations as Minari stores them: one array, or a dict of arrays for
    `Dict` observations (a run with a `wrappers:` stack such as button history).

    >>> _stacked([{"a": np.zeros(2)}, {"a": np.ones(2)}])["a"].shape
    (2, 2)
    """
    if observations and isinstance(observations[0], dict):
        return {k: np.stack([np.asarray(o[k]) for o in observations]) for k in observations[0]}
    return np.stack([np.asarray(o) for o in observations])
