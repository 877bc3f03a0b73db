"""Distil System 2 into System 1: a small net that predicts the directive from the observation.

What: `distill(logdir, out)` reads a decision log (`metabonk_gym.think.log`), and trains a small
CNN + MLP (torch) on its calls: inputs are the logged frame (downscaled) and the numeric `info`
values, targets the directive's action, target tile (x, y) or menu option. The checkpoint holds
the weights, the game, the action list and the input normalisation. `DistilledStrategist` loads it
and answers like any strategist (in about a millisecond), so `PauseToThink(engine="distilled",
model_path=...)`, `metabonk play --agent think --model policy.pt` and `metabonk eval` run it.
Why: a VLM that thinks for seconds is a teacher; the student answers every step for free. Fallback
directives are not learnt (they say nothing about the game).

>>> import tempfile
>>> load_dataset(tempfile.mkdtemp())  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
metabonk_gym.think.log.DecisionLogNotFoundError: no decision log at .../decisions.jsonl; pass ...
"""

from __future__ import annotations

import concurrent.futures as cf
import io
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.errors import MetabonkError
from metabonk_gym.gamedata import GameData, check_folder_code
from metabonk_gym.think.directive import Directive, DirectiveError, DirectiveSpec
from metabonk_gym.think.games import GameAdapter, adapter_for_game, adapter_for_name
from metabonk_gym.think.log import LOG_NAME, log_records, read_decisions
from metabonk_gym.think.prompts import HistoryItem
from metabonk_gym.think.strategist import Strategist, ThinkResult, done_future
from metabonk_gym.think.view import GameView
from metabonk_gym.utils import atomic_write_bytes

IMAGE_SHAPE = (20, 30)  # frames are averaged 8x8 (one screen cell per pixel) to 20x30 RGB
POOL = 8
#: info keys that say nothing about the game state
IGNORED_KEYS = {"game_seed", "reward_terms"}
DEFAULT_FRAMES = 240


@dataclass
class Dataset:
    """Arrays for training: images (N,3,40,60) float, vectors (N,V), labels (N,) each."""

    game: str
    images: np.ndarray
    vectors: np.ndarray
    actions: np.ndarray
    xs: np.ndarray  # grid_w means "no tile"
    ys: np.ndarray
    options: np.ndarray  # n_options means "no option"
    vector_keys: list[str]
    spec: DirectiveSpec  # the game's directive vocabulary (its adapter's)


def frame_input(frame: np.ndarray) -> np.ndarray:
    """A frame as the net's image input: (3, 20, 30) float32 in [0, 1] (8x8 mean pooling)."""
    f = np.asarray(frame, np.float32)
    if f.ndim == 2:
        f = np.repeat(f[..., None], 3, axis=2)
    if f.shape[2] == 1:
        f = np.repeat(f, 3, axis=2)
    h, w = IMAGE_SHAPE
    if f.shape[:2] != (h * POOL, w * POOL):
        from PIL import Image

        f = np.asarray(Image.fromarray(f.astype(np.uint8)).resize((w * POOL, h * POOL)), np.float32)
    pooled = f.reshape(h, POOL, w, POOL, 3).mean(axis=(1, 3)) / 255.0
    return np.ascontiguousarray(pooled.transpose(2, 0, 1), dtype=np.float32)


def load_dataset(
    logdir: str | Path,
    adapter: GameAdapter | None = None,
    *,
    integration: str | Path | None = None,
    trust_game_folder: bool = False,
) -> Dataset:
    """The learnable calls of a decision log (non-fallback directives that have a frame).

    A log names the game folder it was recorded on; a folder with a `game.py` that is not
    bundled loads only when it is `integration` (named by the user) or `trust_game_folder`."""
    from PIL import Image

    logdir = Path(logdir)
    records = read_decisions(logdir)
    adapter = adapter or _log_adapter(logdir, integration, trust_game_folder)
    spec = adapter.spec
    usable = [
        r
        for r in records
        if isinstance(r.get("frame"), str)
        and isinstance(r.get("directive"), dict)
        and r["directive"].get("source") != "fallback"
    ]
    if not usable:
        raise MetabonkError(
            f"{logdir} has no learnable calls (non-fallback directives with frames); record with "
            "PauseToThink(log_dir=..., log_frames=True) and a working strategist"
        )
    keys = sorted(
        {
            k
            for r in usable
            for k, v in (r["info"] if isinstance(r.get("info"), dict) else {}).items()
            if isinstance(v, (int, float)) and k not in IGNORED_KEYS
        }
    )
    images, vectors, actions, xs, ys, options = [], [], [], [], [], []
    for record in usable:
        d = record["directive"]
        if d.get("action") not in spec.actions:
            continue
        info = record.get("info") or {}
        target = d.get("target") or {}
        try:
            vector = [float(info.get(k, 0.0)) for k in keys]
            x, y, option = (
                int(target.get(k, default))
                for k, default in (
                    ("x", spec.grid_w),
                    ("y", spec.grid_h),
                    ("option", spec.n_options),
                )
            )
        except (AttributeError, TypeError, ValueError):  # a tampered line: not learnable
            continue
        with Image.open(logdir / record["frame"]) as img:
            images.append(frame_input(np.asarray(img.convert("RGB"))))
        vectors.append(vector)
        actions.append(spec.actions.index(d["action"]))
        xs.append(x)
        ys.append(y)
        options.append(option)
    return Dataset(
        spec.game,
        np.stack(images),
        np.asarray(vectors, np.float32).reshape(len(images), len(keys)),
        np.asarray(actions, np.int64),
        np.asarray(xs, np.int64),
        np.asarray(ys, np.int64),
        np.asarray(options, np.int64),
        keys,
        spec,
    )


def _log_adapter(
    logdir: Path, integration: str | Path | None = None, trust: bool = False
) -> GameAdapter:
    """The adapter of the game a decision log was recorded on: its game folder's (the log's
    meta `game_folder`, so a user's game folder works too; `check_folder_code` refuses a folder
    with code the user did not name or trust), else the bundled game's by name."""
    for record in log_records(logdir / LOG_NAME):
        if record.get("type") != "meta":
            continue
        folder = record.get("game_folder")
        if folder and Path(folder).is_dir():
            check_folder_code(folder, logdir / "decisions.jsonl", named=[integration], trust=trust)
            return adapter_for_game(GameData(folder))
        if record.get("game"):
            return adapter_for_name(str(record["game"]))
    return adapter_for_name("")


def _build_net(n_vec: int, n_actions: int, grid_w: int, grid_h: int, n_options: int) -> Any:
    import torch
    from torch import nn

    class DirectiveNet(nn.Module):
        """Frame CNN + info MLP -> action, x, y, option heads (each with a 'none' class)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv2d(3, 16, 3, padding=1),
                nn.ReLU(),
                nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d((3, 4)),
                nn.Flatten(),
            )
            self.body = nn.Sequential(nn.Linear(32 * 12 + n_vec, 128), nn.ReLU())
            self.action = nn.Linear(128, n_actions)
            self.x = nn.Linear(128, grid_w + 1)
            self.y = nn.Linear(128, grid_h + 1)
            self.option = nn.Linear(128, n_options + 1)

        def forward(self, image: torch.Tensor, vector: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.body(torch.cat([self.conv(image), vector], dim=1))
            return self.action(h), self.x(h), self.y(h), self.option(h)

    return DirectiveNet()


def distill(
    logdir: str | Path,
    out: str | Path,
    epochs: int = 40,
    seed: int = 0,
    lr: float = 3e-3,
    val_fraction: float = 0.2,
    threads: int = 1,
    integration: str | Path | None = None,
    trust_game_folder: bool = False,
) -> dict[str, Any]:
    """Train on `logdir`'s decision log, write the checkpoint to `out`; returns the figures
    (samples, action accuracy and tile accuracy on a held-out split). The net is small: one
    thread trains it fastest (more threads mostly contend, worse on a shared machine).
    `integration` / `trust_game_folder`: see `load_dataset` (a log naming a user's game folder)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(max(1, threads))
    try:
        data = load_dataset(logdir, integration=integration, trust_game_folder=trust_game_folder)
        return _distill(data, out, epochs, seed, lr, val_fraction)
    finally:
        torch.set_num_threads(previous)


def _distill(
    data: Dataset, out: str | Path, epochs: int, seed: int, lr: float, val_fraction: float
) -> dict[str, Any]:
    import torch
    from torch.nn import functional as F

    torch.manual_seed(seed)
    spec = data.spec
    n = len(data.actions)
    order = np.random.default_rng(seed).permutation(n)
    n_val = int(n * val_fraction) if n >= 10 else 0
    val, train = order[:n_val], order[n_val:]
    scale = np.maximum(np.abs(data.vectors).max(axis=0), 1.0).astype(np.float32)
    net = _build_net(
        len(data.vector_keys), len(spec.actions), spec.grid_w, spec.grid_h, spec.n_options
    )
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    tensors = [
        torch.from_numpy(a)
        for a in (data.images, data.vectors / scale, data.actions, data.xs, data.ys, data.options)
    ]

    def batch(idx: np.ndarray) -> list[Any]:
        index = torch.from_numpy(idx)
        return [t[index] for t in tensors]

    for _ in range(epochs):
        net.train()
        for chunk in np.array_split(
            np.random.default_rng(seed + _).permutation(train), max(1, len(train) // 32)
        ):
            img, vec, act, x, y, opt_t = batch(chunk)
            la, lx, ly, lo = net(img, vec)
            loss = (
                F.cross_entropy(la, act)
                + F.cross_entropy(lx, x)
                + F.cross_entropy(ly, y)
                + F.cross_entropy(lo, opt_t)
            )
            opt.zero_grad()
            loss.backward()
            opt.step()

    figures: dict[str, Any] = {"samples": n, "train": len(train), "val": len(val), "epochs": epochs}
    net.eval()
    check = val if len(val) else train
    with torch.no_grad():
        img, vec, act, x, y, _o = batch(check)
        la, lx, ly, _lo = net(img, vec)
        figures["action_accuracy"] = float((la.argmax(1) == act).float().mean())
        figures["tile_accuracy"] = float(((lx.argmax(1) == x) & (ly.argmax(1) == y)).float().mean())
        figures["split"] = "val" if len(val) else "train"
    buffer = io.BytesIO()
    torch.save(
        {
            "format": "metabonk-distilled-v1",
            "game": data.game,
            "actions": list(spec.actions),
            "vector_keys": data.vector_keys,
            "vector_scale": scale.tolist(),
            "state_dict": net.state_dict(),
            "figures": figures,
        },
        buffer,
    )
    atomic_write_bytes(Path(out), buffer.getvalue())
    return figures


class DistilledStrategist(Strategist):
    """Answers with a `distill`ed net; invalid predictions become fallbacks like any model's.

    Args:
        path: the `.pt` policy written by `metabonk distill` (`MetabonkError` for other files).
        adapter: the game's `GameAdapter`; the policy must be distilled for the same game.
        frames: `duration_frames` of every directive it gives (60 frames = 1 s).
    """

    name = "distilled"

    def __init__(
        self, path: str | Path, adapter: GameAdapter, frames: int = DEFAULT_FRAMES
    ) -> None:
        import torch

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"distilled policy not found: {path} (make one with `metabonk distill LOGDIR`)"
            )
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        if ckpt.get("format") != "metabonk-distilled-v1":
            raise MetabonkError(f"{path} is not a policy written by `metabonk distill`")
        if ckpt["game"] != adapter.spec.game:
            raise MetabonkError(f"{path} was distilled for {ckpt['game']}, not {adapter.spec.game}")
        self.adapter = adapter
        self.path = path
        self.frames = frames
        self.keys: list[str] = list(ckpt["vector_keys"])
        self.scale = np.asarray(ckpt["vector_scale"], np.float32)
        spec = adapter.spec
        self.net = _build_net(
            len(self.keys), len(spec.actions), spec.grid_w, spec.grid_h, spec.n_options
        )
        self.net.load_state_dict(ckpt["state_dict"])
        self.net.eval()

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> cf.Future[ThinkResult]:
        start = time.perf_counter()
        return done_future(self._predict(view, start))

    def _predict(self, view: GameView, start: float) -> ThinkResult:
        import torch

        spec = self.adapter.spec
        vector = (
            np.asarray([[float(view.info.get(k, view.get(k))) for k in self.keys]], np.float32)
            / self.scale
        )
        with torch.no_grad():
            la, lx, ly, lo = self.net(
                torch.from_numpy(frame_input(view.frame)[None]), torch.from_numpy(vector)
            )
        probs = torch.softmax(la, 1)[0]
        action = spec.actions[int(probs.argmax())]
        x, y, option = int(lx.argmax()), int(ly.argmax()), int(lo.argmax())
        if action in spec.option_actions:
            target: dict[str, int] | None = {"option": option if option < spec.n_options else 0}
        elif action in spec.tile_actions or (x < spec.grid_w and y < spec.grid_h):
            x = x if x < spec.grid_w else int(lx[0, : spec.grid_w].argmax())
            y = y if y < spec.grid_h else int(ly[0, : spec.grid_h].argmax())
            target = {"x": x, "y": y}
        else:
            target = None
        data = {
            "goal": f"{action} (distilled)",
            "reasoning": "",
            "action": action,
            "target": target,
            "duration_frames": self.frames,
            "confidence": round(float(probs.max()), 4),
        }
        try:
            directive: Directive = spec.validate(data, source="distilled")
        except DirectiveError as exc:
            return ThinkResult.fallback(spec, "invalid", str(exc), time.perf_counter() - start)
        return ThinkResult(directive, time.perf_counter() - start, raw=json.dumps(data))

    def describe(self) -> dict[str, Any]:
        return {"strategist": self.name, "model": str(self.path)}
