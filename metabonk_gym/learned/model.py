"""The inverse dynamics model's network and its files: a state_dict and JSON metadata, no pickle.

`IdmNet` reads a window of 2k+2 frames and the 2k+1 differences between neighbours (the motion
the action caused) through three small batch-normalised convolutions and a max-pooled head
(optionally also the whole screen's mean, `pool="max+mean"`, and its sub-pixel scroll,
`motion=True`), sized for a 2-core CPU.
`save_model_files` writes `NAME.pt` (`torch.save` of the state_dict only) and `NAME.json`
(game, env id, observation spec, action space, window, training figures); `load_model_files`
reads them back with `weights_only=True`, so a model file can hold tensors and nothing that runs.

>>> import torch
>>> net = IdmNet(frames=4, channels=1, n_actions=6)
>>> net(torch.zeros(2, 4, 1, 20, 30, dtype=torch.uint8)).shape
torch.Size([2, 6])
>>> IdmNet(4, 1, 6, pool="max+mean")(torch.zeros(2, 4, 1, 20, 30, dtype=torch.uint8)).shape
torch.Size([2, 6])
>>> IdmNet(4, 3, 6, motion=True, frame_size=(20, 30))(torch.zeros(2, 4, 3, 20, 30)).shape
torch.Size([2, 6])
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.errors import ModelFileError
from metabonk_gym.learned.motion import CameraShift
from metabonk_gym.utils import atomic_write_bytes, atomic_write_text

MODEL_FORMAT = "metabonk-video-model"


class IdmNet(nn.Module):
    """Frames and their differences -> logits over actions (or one score, `n_actions=1`).

    Args:
        frames: frames in a window (2k+2 for the IDM, 1 for a reward model).
        channels: channels per frame (1 grayscale, 3 RGB).
        n_actions: outputs.
        width: convolution channels.
        pool: ``"max"`` (a 3x4 grid of maxima: where things are) or ``"max+mean"`` (also the
            mean of each channel over the whole screen: motion that moves everything, such as
            a scrolling camera, shows in every region alike and survives the mean, not the max).
        motion: also give the head the screen's sub-pixel shift between neighbouring frames
            (`metabonk_gym.learned.motion.CameraShift`): what a following camera shows of the
            player's movement. Needs `frame_size`.
        frame_size: (height, width) of the frames (with `motion`).
    """

    POOLS = ("max", "max+mean")

    def __init__(
        self,
        frames: int,
        channels: int,
        n_actions: int,
        width: int = 32,
        pool: str = "max",
        motion: bool = False,
        frame_size: tuple[int, int] | None = None,
    ) -> None:
        super().__init__()
        if pool not in self.POOLS:
            raise ValueError(f"pool must be one of {', '.join(self.POOLS)}, not {pool!r}")
        self.shift: CameraShift | None = None
        if motion:
            if frame_size is None or frames < 2:
                raise ValueError("motion needs frame_size and a window of at least 2 frames")
            self.shift = CameraShift(frame_size)
        inputs = frames * channels + (frames - 1) * channels
        self.frames, self.channels, self.pool = frames, channels, pool
        self.conv = nn.Sequential(
            nn.Conv2d(inputs, width // 2, 4, stride=2, padding=1),
            nn.BatchNorm2d(width // 2),
            nn.ReLU(),
            nn.Conv2d(width // 2, width, 3, stride=2, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
        )
        self.max_pool = nn.Sequential(nn.AdaptiveMaxPool2d((3, 4)), nn.Flatten())
        features = width * 12 + (width if pool == "max+mean" else 0)
        features += 2 * (frames - 1) if self.shift is not None else 0
        self.head = nn.Sequential(nn.Linear(features, 128), nn.ReLU(), nn.Linear(128, n_actions))

    def forward(self, windows: torch.Tensor) -> torch.Tensor:
        """(B, F, C, H, W) uint8 or float in 0..255 -> (B, n_actions)."""
        x = windows.float() / 255.0
        b, f, c, h, w = x.shape
        parts = [x.reshape(b, f * c, h, w)]
        if f > 1:
            parts.append((x[:, 1:] - x[:, :-1]).reshape(b, (f - 1) * c, h, w) * 4.0)
        maps = self.conv(torch.cat(parts, dim=1))
        pooled = self.max_pool(maps)
        if self.pool == "max+mean":
            pooled = torch.cat([pooled, maps.mean(dim=(2, 3))], dim=1)
        if self.shift is not None:  # in pixels, about the size of the other features
            pooled = torch.cat([pooled, self.shift(x.mean(dim=2)).reshape(b, -1)], dim=1)
        return self.head(pooled)


def frames_tensor(frames: np.ndarray) -> torch.Tensor:
    """(T, H, W, C) uint8 frames as a (T, 1, C, H, W) tensor: one-frame windows."""
    return torch.as_tensor(np.ascontiguousarray(frames.transpose(0, 3, 1, 2)[:, None]))


def save_model_files(path: Path, net: nn.Module, metadata: dict[str, Any]) -> Path:
    """Write `path.pt` and `path.json` atomically; returns the .pt path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(net.state_dict(), buffer)
    weights = path.with_suffix(".pt")
    atomic_write_bytes(weights, buffer.getvalue())
    atomic_write_text(
        path.with_suffix(".json"), json.dumps({"format": MODEL_FORMAT, **metadata}, indent=2)
    )
    return weights


def model_paths(path: str | Path, default_name: str) -> tuple[Path, Path]:
    """(.pt, .json) of a model given as a folder, a .pt or a .json path."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / default_name
    return path.with_suffix(".pt"), path.with_suffix(".json")


def read_metadata(path: str | Path, default_name: str, kind: str) -> dict[str, Any]:
    """A model's JSON metadata, checked to be of `kind` ("idm" or "reward")."""
    weights, meta_path = model_paths(path, default_name)
    if not meta_path.is_file() or not weights.is_file():
        raise ModelFileError(
            f"{kind} model not found: need {weights} and {meta_path} (made by `metabonk train "
            f"{kind}`)"
            if kind == "idm"
            else f"{kind} model not found: need {weights} and {meta_path}"
        )
    try:
        meta = load_config_file(meta_path)
    except ConfigFileError as exc:
        raise ModelFileError(f"{meta_path} cannot be read (corrupt?): {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != MODEL_FORMAT:
        raise ModelFileError(f"{meta_path} is not a metabonk video model's metadata")
    if meta.get("kind") != kind:
        raise ModelFileError(f"{meta_path} is a {meta.get('kind')} model, not an {kind} model")
    check_sizes(meta, meta_path)
    return meta


#: Bounds on the sizes a model's metadata may give (they size the net built before its
#: weights are read): (keys down the JSON, low, high).
SIZE_BOUNDS: tuple[tuple[tuple[str | int, ...], int, int], ...] = (
    (("window",), 0, 16),
    (("width",), 2, 512),
    (("action_space", "n"), 1, 4096),
    (("obs", "downscale"), 1, 8),
    (("obs", "shape", 0), 1, 4096),
    (("obs", "shape", 1), 1, 4096),
    (("obs", "shape", 2), 1, 3),
)


def check_sizes(meta: dict[str, Any], where: Path) -> None:
    """Refuse metadata whose sizes are not whole numbers in `SIZE_BOUNDS` (those present).

    >>> check_sizes({"width": 8000}, Path("idm.json"))
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.ModelFileError: idm.json: width must be a whole number in 2..512, not 8000 (the net is built from it before its weights are read)
    """
    for keys, low, high in SIZE_BOUNDS:
        value: Any = meta
        for key in keys:
            found = (isinstance(value, dict) and isinstance(key, str) and key in value) or (
                isinstance(value, list) and isinstance(key, int) and key < len(value)
            )
            if not found:
                break
            value = value[key]
        else:
            if type(value) is not int or not low <= value <= high:
                name = ".".join(map(str, keys))
                raise ModelFileError(
                    f"{where}: {name} must be a whole number in {low}..{high}, not {value!r} "
                    "(the net is built from it before its weights are read)"
                )


def load_state(path: str | Path, default_name: str, net: nn.Module) -> None:
    """Load weights into `net` with `weights_only=True` (tensors only, never pickle)."""
    weights, _ = model_paths(path, default_name)
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
        net.load_state_dict(state)
    except Exception as exc:
        raise ModelFileError(f"{weights} cannot be loaded as this model's weights: {exc}") from None
