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
metabonk_gym.training.errors.VideoDatasetError: ... is not a video dataset (no index.json); make one with `metabonk video to-dataset VIDEO... --env ENV_ID --out DIR`
"""

from __future__ import annotations

import io
import json
import re
import shutil
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.configfile import ConfigFileError, load_config_file
from metabonk_gym.training.errors import VideoDatasetError, VideoError
from metabonk_gym.utils import Log, atomic_write_bytes, atomic_write_text, check_number
from metabonk_gym.video.decode import MAX_FPS, MIN_FPS, open_video, parse_crop, resampled
from metabonk_gym.video.envfacts import EnvFacts, env_facts, reference_frames
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


#: Bounds on what an index.json may say (it sizes every array read from the dataset).
MAX_SIDE = 4096
MAX_LENGTH = 10_000_000
_CHUNK_NAME = re.compile(r"^videos/[A-Za-z0-9_.-]{1,64}\.npz$")


def _check_index(index: dict[str, Any], where: Path) -> None:
    """Refuse an index whose numbers would size arrays without bound or whose chunk names
    leave the dataset folder (it is read before any frame)."""

    def bad(what: str) -> VideoDatasetError:
        return VideoDatasetError(f"{where}: {what}; make the dataset again with video to-dataset")

    screen = index.get("screen")
    if (
        not isinstance(screen, list)
        or len(screen) != 2
        or not all(type(v) is int and 1 <= v <= MAX_SIDE for v in screen)
    ):
        raise bad(f"screen must be [height, width] of 1..{MAX_SIDE} pixels, not {screen!r}")
    frameskip = index.get("frameskip", 4)
    if type(frameskip) is not int or not 1 <= frameskip <= 1000:
        raise bad(f"frameskip must be a whole number in 1..1000, not {frameskip!r}")
    for i, entry in enumerate(index["videos"]):
        if not isinstance(entry, dict):
            raise bad(f"video {i} is {type(entry).__name__}, not an entry")
        length, chunks = entry.get("length"), entry.get("chunks")
        if type(length) is not int or not 0 <= length <= MAX_LENGTH:
            raise bad(f"video {i} length must be a whole number in 0..{MAX_LENGTH}, not {length!r}")
        if not isinstance(chunks, list) or not all(
            isinstance(c, str) and _CHUNK_NAME.match(c) for c in chunks
        ):
            raise bad(f"video {i} chunks must be names videos/NAME.npz, not {chunks!r}")


def _read_chunk(file: Path, frame_shape: tuple[int, int, int]) -> np.ndarray:
    """A chunk's frames (n, H, W, 3) uint8: its array header is checked against the index's
    screen and `CHUNK` before anything is decompressed."""
    try:
        with zipfile.ZipFile(file) as archive, archive.open("frames.npy") as member:
            version = np.lib.format.read_magic(member)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read_header(member)
            if fortran or dtype != np.uint8 or len(shape) != 4 or tuple(shape[1:]) != frame_shape:
                raise VideoDatasetError(
                    f"{file} holds frames {tuple(shape)} {dtype}; the index says n x "
                    f"{' x '.join(map(str, frame_shape))} uint8: the dataset is corrupt"
                )
            if not 1 <= shape[0] <= CHUNK:
                raise VideoDatasetError(
                    f"{file} holds {shape[0]} frames; a chunk holds 1..{CHUNK}: corrupt"
                )
            size = int(np.prod(shape))
            data = member.read(size + 1)
    except VideoDatasetError:
        raise
    except Exception as exc:
        raise VideoDatasetError(f"{file} cannot be read (corrupt?): {exc}") from None
    if len(data) != size:
        raise VideoDatasetError(f"{file} holds {len(data)} bytes of frames, not {size}: corrupt")
    return np.frombuffer(data, dtype=np.uint8).reshape(shape).copy()


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
            self.index: dict[str, Any] = load_config_file(index)
        except ConfigFileError as exc:
            raise VideoDatasetError(f"{index} cannot be read (corrupt?): {exc}") from None
        if (
            not isinstance(self.index, dict)
            or self.index.get("format") != FORMAT
            or not isinstance(self.index.get("videos"), list)
        ):
            raise VideoDatasetError(f"{index} is not a {FORMAT} index; make it again")
        _check_index(self.index, index)

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
        height, width = self.index["screen"]
        for name in entry["chunks"]:
            parts.append(_read_chunk(self.path / name, (height, width, 3)))
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
    check_number("--max-steps", max_steps, 2, MAX_LENGTH, integer=True)
    if fps is not None:
        check_number("--fps", fps, MIN_FPS, MAX_FPS)
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
