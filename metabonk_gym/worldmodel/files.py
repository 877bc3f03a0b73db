"""World-model files: weights as a torch `state_dict` (read with `weights_only=True`) beside a
JSON file of metadata (game, env id, observation shape, action space, model config, figures).

Nothing is unpickled: the `.pt` file holds only tensors, the `.json` file plain data, and the
model is rebuilt from the JSON config. `check_fits` refuses a model for another game, another
observation shape or another action space with one line saying what differs and what to do.

>>> meta = {"game": "BonkQuest", "env_id": "MetaBonk/BonkQuest-v0", "obs_shape": [40, 60, 1],
...         "action_space": {"type": "Discrete", "n": 9}}
>>> check_fits(meta, game="BonkArena", source="x.pt")
Traceback (most recent call last):
...
metabonk_gym.training.errors.WorldModelError: x.pt is a world model of BonkQuest (MetaBonk/BonkQuest-v0), not of BonkArena; train one on BonkArena episodes with `metabonk train world-model DATASET --out DIR`
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.training.errors import WorldModelError as WorldModelError  # re-exported
from metabonk_gym.utils import atomic_write_bytes, atomic_write_text
from metabonk_gym.worldmodel.model import ModelConfig, WorldModel

#: The `kind` every metadata file carries, and its format version.
KIND = "metabonk-world-model"
FORMAT = 1
MODEL_NAME = "model.pt"


def metadata_path(weights: Path) -> Path:
    """The JSON file beside a weights file (`model.pt` -> `model.json`)."""
    return Path(weights).with_suffix(".json")


def resolve_model_path(path: str | Path) -> Path:
    """A weights file, given it or the run directory holding `model.pt`."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / MODEL_NAME
    if not path.is_file():
        raise WorldModelError(
            f"world model not found: {path}; train one with `metabonk train world-model DATASET --out DIR` "
            "and pass DIR or DIR/model.pt"
        )
    return path


def save_weights(state: dict[str, Any], path: Path, metadata: dict[str, Any]) -> Path:
    """Write `state` (tensors and plain values only) and its metadata atomically."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(Path(path), buffer.getvalue())
    meta = {"kind": KIND, "format": FORMAT, **metadata}
    atomic_write_text(metadata_path(path), json.dumps(meta, indent=2, default=str))
    return Path(path)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of a weights file (or run directory), checked to be a world model's."""
    weights = resolve_model_path(path)
    meta_file = metadata_path(weights)
    if not meta_file.is_file():
        raise WorldModelError(
            f"{weights} has no metadata file {meta_file.name} beside it; it was not written by "
            "`metabonk train world-model`"
        )
    try:
        meta = load_config_file(meta_file)
    except ConfigFileError as exc:
        raise WorldModelError(f"{meta_file} is corrupt: {exc}") from None
    if not isinstance(meta, dict) or meta.get("kind") != KIND or "config" not in meta:
        raise WorldModelError(f"{meta_file} is not the metadata of a metabonk world model")
    if type(meta.get("format", 0)) is not int:
        raise WorldModelError(f"{meta_file}: format must be a whole number, not {meta['format']!r}")
    check_config(meta["config"], meta_file)
    if int(meta.get("format", 0)) > FORMAT:
        raise WorldModelError(
            f"{weights} has format {meta['format']}, newer than this metabonk reads ({FORMAT}); upgrade"
        )
    return meta


#: Bounds on a model config's sizes (the model is built from them before its weights are read).
CONFIG_BOUNDS: dict[str, tuple[int, int]] = {
    "channels": (1, 3),
    "n_actions": (1, 4096),
    "width": (1, 256),
    "action_dim": (1, 1024),
    "horizon": (1, 64),
    "action_box": (0, 1),
}


def check_config(config: Any, where: Path | str) -> None:
    """Refuse a model config whose sizes are not whole numbers within `CONFIG_BOUNDS`.

    >>> check_config({"channels": 1, "n_actions": 9, "horizon": 1e9}, "model.json")
    Traceback (most recent call last):
    ...
    metabonk_gym.training.errors.WorldModelError: model.json: config.horizon must be a whole number in 1..64, not 1000000000.0
    """
    if not isinstance(config, dict):
        raise WorldModelError(f"{where}: config must be a mapping, not {config!r}")
    for key, value in config.items():
        if key not in CONFIG_BOUNDS:
            raise WorldModelError(
                f"{where}: unknown config key {key!r}; known: {', '.join(CONFIG_BOUNDS)}"
            )
        low, high = CONFIG_BOUNDS[key]
        if type(value) is not int or not low <= value <= high:
            raise WorldModelError(
                f"{where}: config.{key} must be a whole number in {low}..{high}, not {value!r}"
            )


def read_weights(path: Path, device: str | torch.device = "cpu") -> dict[str, Any]:
    """A weights file's contents (`torch.load(weights_only=True)`: no code is unpickled)."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:
        raise WorldModelError(f"{path} is corrupt or not a weights file: {exc}") from exc
    if not isinstance(state, dict):
        raise WorldModelError(f"{path} does not hold a state_dict")
    return state


def build_model(meta: dict[str, Any]) -> WorldModel:
    """An untrained model of the shape the metadata's `config` describes."""
    try:
        config = ModelConfig(**meta["config"])
    except TypeError as exc:
        raise WorldModelError(f"malformed world-model config {meta['config']}: {exc}") from exc
    return WorldModel(**config.to_dict())


def load_world_model(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[WorldModel, dict[str, Any]]:
    """The model (in eval mode) and metadata of a weights file or run directory."""
    weights = resolve_model_path(path)
    meta = read_metadata(weights)
    state = read_weights(weights, device)
    state = state.get("model", state) if isinstance(state.get("model"), dict) else state
    with torch.device("meta"):  # shapes only: nothing is allocated before they match
        shapes = {k: tuple(v.shape) for k, v in build_model(meta).state_dict().items()}
    found = {k: tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}
    if found != shapes:
        differ = sorted(set(shapes) ^ set(found)) or [k for k in shapes if shapes[k] != found[k]]
        raise WorldModelError(
            f"{weights} does not match its metadata's model ({len(differ)} tensor(s) differ, "
            f"e.g. {differ[0]}); the files are not one model's: train again"
        )
    model = build_model(meta)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise WorldModelError(f"{weights} does not match its metadata's model: {exc}") from exc
    return model.to(device).eval(), meta


def check_fits(
    meta: dict[str, Any],
    *,
    game: str | None = None,
    obs_shape: Sequence[int] | None = None,
    n_actions: int | None = None,
    source: str = "the world model",
) -> None:
    """`WorldModelError` when the model was made for another game, frame shape or action space."""
    theirs = meta.get("game")
    if game is not None and theirs is not None and str(theirs) != str(game):
        raise WorldModelError(
            f"{source} is a world model of {theirs} ({meta.get('env_id')}), not of {game}; train one "
            f"on {game} episodes with `metabonk train world-model DATASET --out DIR`"
        )
    shape = [int(v) for v in meta.get("obs_shape") or []]
    if obs_shape is not None and shape and [int(v) for v in obs_shape] != shape:
        raise WorldModelError(
            f"{source} was trained on {tuple(shape)} frames, these are {tuple(obs_shape)}; use the "
            "same obs_type and downscale as its episodes, or train one on frames of this shape"
        )
    n = (meta.get("action_space") or {}).get("n")
    if n_actions is not None and n is not None and int(n) != int(n_actions):
        raise WorldModelError(
            f"{source} knows {n} actions, this env has {n_actions}; train one on this env's episodes"
        )
