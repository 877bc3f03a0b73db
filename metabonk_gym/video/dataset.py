"""Video datasets: gameplay videos as frame sequences at the env's step rate and screen size.

`to_dataset` decodes each video (`metabonk_gym.video.decode`), crops it, re-times it to the env's
step rate (60 fps / frameskip for the GBA games), scales it to the env's full-size screen
(`metabonk_gym.video.screen`) and stores the frames as compressed `.npz` chunks (no pickle) beside
an `index.json` (source, game, fps, length per video, and the look-alike check's result). Every
file is written atomically and the index last, so a folder with an index is complete. Frames are
full-size RGB: `convert_frames` turns them into any `obs_type`/`downscale` the way the env does.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as tmp:
...     VideoDataset(tmp)
Traceback (most recent call last):
...
metabonk_gym.video.errors.VideoDatasetError: ... is not a video dataset (no index.json); make one with `metabonk video to-dataset VIDEO... --env ENV_ID --out DIR`
"""

from __future__ import annotations

import io
import json
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.utils import atomic_write_bytes, atomic_write_text
from metabonk_gym.video.decode import open_video, parse_crop, resampled
from metabonk_gym.video.envfacts import EnvFacts, env_facts, reference_frames
from metabonk_gym.video.errors import VideoDatasetError, VideoError
from metabonk_gym.video.screen import (
    LOOKS_LIKE_THRESHOLD,
    check_aspect,
    colour_histogram,
    fit_to_screen,
    similarity,
)

INDEX = "index.json"
FORMAT = "metabonk-video-dataset"
VERSION = 1
#: Frames per stored chunk, and the default cap on the steps kept of one video.
CHUNK = 256
MAX_STEPS = 20_000
Log = Callable[[str], None]


def _save_chunk(path: Path, frames: list[np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, frames=np.stack(frames))
    atomic_write_bytes(path, buffer.getvalue())


class VideoDataset:
    """A video dataset folder: its index and each video's frames (T, H, W, 3) uint8.

    Args:
        path: the folder `to_dataset` wrote.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        index = self.path / INDEX
        if not index.is_file():
            raise VideoDatasetError(
                f"{self.path} is not a video dataset (no {INDEX}); make one with "
                "`metabonk video to-dataset VIDEO... --env ENV_ID --out DIR`"
            )
        try:
            self.index: dict[str, Any] = json.loads(index.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise VideoDatasetError(f"{index} cannot be read (corrupt?): {exc}") from None
        if self.index.get("format") != FORMAT or not isinstance(self.index.get("videos"), list):
            raise VideoDatasetError(f"{index} is not a {FORMAT} index; make it again")

    @property
    def env_id(self) -> str:
        return str(self.index["env_id"])

    @property
    def game(self) -> str:
        return str(self.index["game"])

    @property
    def videos(self) -> list[dict[str, Any]]:
        return list(self.index["videos"])

    @property
    def steps(self) -> int:
        return int(sum(v["length"] for v in self.videos))

    def __len__(self) -> int:
        return len(self.videos)

    def frames(self, i: int) -> np.ndarray:
        """Video `i`'s frames (T, H, W, 3)."""
        entry = self.videos[i]
        parts = []
        for name in entry["chunks"]:
            file = self.path / name
            try:
                with np.load(file, allow_pickle=False) as data:
                    parts.append(data["frames"])
            except Exception as exc:
                raise VideoDatasetError(f"{file} cannot be read (corrupt?): {exc}") from None
        frames = np.concatenate(parts)
        if len(frames) != entry["length"]:
            raise VideoDatasetError(
                f"video {i} of {self.path} has {len(frames)} frames, its index says {entry['length']}"
            )
        return frames

    def iter_frames(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self.frames(i)


def _prepare_out(out: Path) -> bool:
    if (out / INDEX).exists():
        raise VideoDatasetError(f"{out} already holds a video dataset; pick a new --out folder")
    if out.exists() and any(out.iterdir()):
        raise VideoDatasetError(f"--out {out} exists and is not empty; pick a new folder")
    existed = out.exists()
    out.mkdir(parents=True, exist_ok=True)
    return existed


def _convert_one(
    number: int,
    video: Path,
    out: Path,
    facts: EnvFacts,
    crop_text: str | None,
    fps: float | None,
    max_steps: int,
) -> tuple[dict[str, Any], np.ndarray]:
    crop = parse_crop(crop_text)
    source = open_video(video, fps=fps, default_fps=facts.step_rate)
    width, height = (crop.w, crop.h) if crop is not None else source.size
    check_aspect(width, height, facts.screen, f"video {video}" + (" after --crop" if crop else ""))
    chunks: list[str] = []
    buffer: list[np.ndarray] = []
    samples: list[np.ndarray] = []
    length = 0
    for frame in resampled(source, facts.step_rate, crop):
        if length >= max_steps:
            raise VideoError(
                f"video {video} is longer than {max_steps} steps at {facts.step_rate:g} steps/s; "
                "split it or raise --max-steps"
            )
        screen = fit_to_screen(frame, facts.screen)
        if length % 10 == 0 and len(samples) < 200:
            samples.append(screen)
        buffer.append(screen)
        length += 1
        if len(buffer) == CHUNK:
            name = f"videos/{number:04d}_{len(chunks):04d}.npz"
            _save_chunk(out / name, buffer)
            chunks.append(name)
            buffer = []
    if buffer:
        name = f"videos/{number:04d}_{len(chunks):04d}.npz"
        _save_chunk(out / name, buffer)
        chunks.append(name)
    if length < 2:
        raise VideoError(
            f"video {video} has {length} frame(s) at the env's step rate; a dataset needs at "
            "least 2 (is it empty or a single image?)"
        )
    entry = {
        "source": str(video),
        "fps": source.fps,
        "size": list(source.size),
        "crop": crop_text,
        "length": length,
        "duration_s": round(length / facts.step_rate, 3),
        "chunks": chunks,
    }
    return entry, np.stack(samples)


def to_dataset(
    videos: Sequence[str | Path],
    env_id: str,
    out: str | Path,
    crop: str | None = None,
    fps: float | None = None,
    *,
    check: bool = True,
    max_steps: int = MAX_STEPS,
    log: Log | None = None,
) -> VideoDataset:
    """Convert videos (files or frame folders) of `env_id`'s game into a video dataset at `out`.

    `crop` ("x,y,w,h") cuts the game's window out of each video, `fps` overrides the videos' own
    frame rate. With `check`, each video's colours are compared with frames of the real env and
    the index says whether it looks like the game (`looks_like_game`, `similarity`); `log` gets
    a line per video (and a warning for those that do not look like the game).
    """
    if not videos:
        raise VideoError("no video given: pass one or more video files or frame folders")
    facts = env_facts(env_id)
    out = Path(out).expanduser()
    existed = _prepare_out(out)
    reference: np.ndarray | None = None
    check_note = None
    if check:
        try:
            reference = colour_histogram(reference_frames(env_id))
        except Exception as exc:  # e.g. a game that must be running (Megabonk)
            check_note = f"look-alike check skipped: {env_id} could not run ({exc})"
            if log is not None:
                log(check_note)
    entries = []
    started = time.monotonic()
    try:
        (out / "videos").mkdir(exist_ok=True)
        for number, video in enumerate(videos):
            entry, samples = _convert_one(
                number, Path(video).expanduser(), out, facts, crop, fps, max_steps
            )
            if reference is not None:
                score = similarity(colour_histogram(samples), reference)
                entry["similarity"] = score
                entry["looks_like_game"] = score >= LOOKS_LIKE_THRESHOLD
            entries.append(entry)
            if log is not None:
                log(
                    f"{video}: {entry['length']} steps ({entry['duration_s']:g} s at "
                    f"{facts.step_rate:g} steps/s) from {entry['fps']:g} fps"
                )
                if entry.get("looks_like_game") is False:
                    log(
                        f"warning: {video} does not look like {facts.game} (colour similarity "
                        f"{entry['similarity']:.2f} < {LOOKS_LIKE_THRESHOLD}); check --crop"
                    )
        index = {
            "format": FORMAT,
            "version": VERSION,
            "env_id": facts.env_id,
            "game": facts.game,
            "step_rate": facts.step_rate,
            "frameskip": facts.frameskip,
            "screen": list(facts.screen),
            "obs": {"obs_type": "rgb", "downscale": 1},
            "check": check_note or ("colour histogram" if check else "off"),
            "seconds": round(time.monotonic() - started, 3),
            "videos": entries,
        }
        atomic_write_text(out / INDEX, json.dumps(index, indent=2))
    except BaseException:
        if existed:
            for child in out.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        else:
            shutil.rmtree(out, ignore_errors=True)
        raise
    return VideoDataset(out)
