"""Reading gameplay videos: mp4/webm files (imageio's ffmpeg plugin) or folders of frame images.

Frames come out as uint8 RGB `(H, W, 3)`, resampled to a target rate by nearest frame time and
cropped; nothing here decodes a format by hand. Every read has caps: source frames, pixels per
frame (a decompression bomb fails before decoding) and the frames kept.

>>> parse_crop("8,0,240,160")
Crop(x=8, y=0, w=240, h=160)
>>> resample_indices(60.0, 15.0, 9)
[0, 4, 8]
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.training.errors import VideoError
from metabonk_gym.utils import check_number

VIDEO_SUFFIXES: tuple[str, ...] = (".mp4", ".webm", ".mkv", ".mov", ".avi")
FRAME_SUFFIXES: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".bmp")
#: Caps on what one video may make us decode: pixels per frame and source frames.
MAX_PIXELS = 4096 * 4096
MAX_SOURCE_FRAMES = 60 * 60 * 60 * 2  # two hours at 60 fps
#: The frame rates a video may be given (`--fps`): a rate near 0 would repeat one frame forever.
MIN_FPS, MAX_FPS = 0.1, 1000.0


@dataclass(frozen=True)
class Crop:
    """A window of the video (pixels): left `x`, top `y`, width `w`, height `h`."""

    x: int
    y: int
    w: int
    h: int

    def apply(self, frame: np.ndarray) -> np.ndarray:
        return frame[self.y : self.y + self.h, self.x : self.x + self.w]

    def check(self, width: int, height: int, source: str) -> None:
        if self.x + self.w > width or self.y + self.h > height:
            raise VideoError(
                f"--crop {self.x},{self.y},{self.w},{self.h} reaches outside {source} "
                f"({width}x{height}); give x,y,w,h inside the frame"
            )


def parse_crop(text: str | None) -> Crop | None:
    """`"x,y,w,h"` (pixels) as a `Crop`; None stays None."""
    if text is None:
        return None
    try:
        x, y, w, h = (int(v) for v in text.split(","))
    except ValueError:
        raise VideoError(f"--crop {text!r}: give four integers x,y,w,h, e.g. 0,0,240,160") from None
    if min(x, y) < 0 or min(w, h) < 1:
        raise VideoError(f"--crop {text!r}: x and y must be >= 0, w and h >= 1")
    return Crop(x, y, w, h)


def resample_indices(source_fps: float, rate: float, n_source: int) -> list[int]:
    """The source frame shown at each output step (nearest in time) for `n_source` frames."""
    return list(_resample(range(n_source), source_fps, rate))


def _resample(items: Any, source_fps: float, rate: float) -> Iterator[Any]:
    """Items at `source_fps` re-timed to `rate`: output j is source round(j * fps / rate)."""
    ratio = source_fps / rate
    j = 0
    for i, item in enumerate(items):
        while math.floor(j * ratio + 0.5) <= i:
            yield item
            j += 1


@dataclass
class VideoSource:
    """One opened video: its path, frame rate, size (w, h), frame count if known, and frames.

    Args:
        path: the video file or frame folder.
        fps: frames per second of the source.
        size: (width, height) of its frames.
        frames: how many frames it holds, when the container says.
        reader: the iterator of uint8 RGB frames.
    """

    path: Path
    fps: float
    size: tuple[int, int]
    frames: int | None
    reader: Iterator[np.ndarray]


def _rgb(frame: Any, source: Path) -> np.ndarray:
    array = np.asarray(frame)
    if array.dtype != np.uint8:
        raise VideoError(f"{source}: frames of dtype {array.dtype}; only 8-bit images are read")
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[-1] not in (1, 3, 4):
        raise VideoError(f"{source}: frames of shape {array.shape}; need (H, W, 1|3|4)")
    if array.shape[-1] == 1:
        array = np.repeat(array, 3, axis=-1)
    return np.ascontiguousarray(array[..., :3])


def _check_pixels(width: int, height: int, source: Path) -> None:
    if width * height > MAX_PIXELS or width < 1 or height < 1:
        raise VideoError(
            f"{source}: frames of {width}x{height} pixels; at most {MAX_PIXELS} pixels a frame "
            "are read (crop or scale the video down first)"
        )


def _open_file(path: Path, fps: float | None, max_frames: int) -> VideoSource:
    import imageio.v2 as imageio

    if path.stat().st_size == 0:
        raise VideoError(f"video {path} is empty (0 bytes); record or download it again")
    try:
        reader: Any = imageio.get_reader(path, format="ffmpeg")
        meta = reader.get_meta_data()
    except Exception as exc:
        raise VideoError(
            f"video {path} cannot be decoded (corrupt or not a video?): {_first_line(exc)}"
        ) from None
    width, height = (int(v) for v in meta.get("size", (0, 0)))
    _check_pixels(width, height, path)
    rate = float(fps or meta.get("fps") or 0.0)
    if not rate > 0:
        reader.close()
        raise VideoError(f"video {path} states no frame rate; pass --fps")
    nframes = meta.get("nframes")
    count = int(nframes) if isinstance(nframes, (int, float)) and math.isfinite(nframes) else None
    stated = _stated_frames(meta)

    def frames() -> Iterator[np.ndarray]:
        n = 0
        try:
            iterator = iter(reader)
            while True:
                try:
                    frame = next(iterator)
                except StopIteration:
                    if stated is not None and n < TRUNCATED * stated - 1:
                        raise VideoError(
                            f"video {path} ends after {n} of the {stated} frames its header "
                            "states (truncated?); download or record it again"
                        ) from None
                    break
                except Exception as exc:
                    raise VideoError(
                        f"video {path} is corrupt after {n} frames: {_first_line(exc)}"
                    ) from None
                n += 1
                if n > max_frames:
                    raise VideoError(
                        f"video {path} has more than {max_frames} frames; split it or raise "
                        "max_source_frames"
                    )
                yield _rgb(frame, path)
        finally:
            reader.close()

    return VideoSource(path, rate, (width, height), count, frames())


#: A video file is refused as truncated when fewer than this share of the frames its header
#: states (duration x frame rate) decode.
TRUNCATED = 0.9


def _stated_frames(meta: dict[str, Any]) -> int | None:
    """Frames a video's header states (its duration times its own frame rate), if it says."""
    duration, rate = meta.get("duration"), meta.get("fps")
    if not (isinstance(duration, int | float) and isinstance(rate, int | float)):
        return None
    if not (math.isfinite(duration) and math.isfinite(rate) and duration > 0 and rate > 0):
        return None
    return round(float(duration) * float(rate))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _image_size(file: Path) -> tuple[int, int]:
    """(width, height) of an image from its header alone (PIL reads no pixels on open)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():  # PIL's bomb warning: the size is checked here
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(file) as image:
                return image.size
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
        raise VideoError(f"frame {file} cannot be decoded: {_first_line(exc)}") from None


def _open_folder(path: Path, fps: float | None, default_fps: float, max_frames: int) -> VideoSource:
    import imageio.v2 as imageio

    files = sorted(p for p in path.iterdir() if p.suffix.lower() in FRAME_SUFFIXES)
    if not files:
        raise VideoError(
            f"frame folder {path} holds no images ({', '.join(FRAME_SUFFIXES)}); give a folder "
            "of frames named in order (frame_00001.png, ...)"
        )
    if len(files) > max_frames:
        raise VideoError(f"frame folder {path} has more than {max_frames} frames; split it")

    def read(file: Path) -> np.ndarray:
        _check_pixels(*_image_size(file), file)  # from the header: a bomb is never decoded
        try:
            return _rgb(imageio.imread(file), file)
        except VideoError:
            raise
        except Exception as exc:
            raise VideoError(f"frame {file} cannot be decoded: {_first_line(exc)}") from None

    first = read(files[0])
    height, width = first.shape[:2]
    _check_pixels(width, height, files[0])

    def frames() -> Iterator[np.ndarray]:
        yield first
        for file in files[1:]:
            frame = read(file)
            if frame.shape != first.shape:
                raise VideoError(
                    f"frame {file} is {frame.shape[1]}x{frame.shape[0]}, the folder's first is "
                    f"{width}x{height}; every frame of a folder must have one size"
                )
            yield frame

    return VideoSource(path, float(fps or default_fps), (width, height), len(files), frames())


def open_video(
    path: str | Path,
    *,
    fps: float | None = None,
    default_fps: float = 15.0,
    max_source_frames: int = MAX_SOURCE_FRAMES,
) -> VideoSource:
    """Open a video file or a folder of frames (`fps` overrides the file's own rate; a folder
    without `fps` is taken to be at `default_fps`)."""
    path = Path(path).expanduser()
    if fps is not None:
        check_number("--fps", fps, MIN_FPS, MAX_FPS)
    if path.is_dir():
        return _open_folder(path, fps, default_fps, max_source_frames)
    if not path.exists():
        raise VideoError(f"video not found: {path}")
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise VideoError(f"{path}: not a video ({', '.join(VIDEO_SUFFIXES)}) or a folder of frames")
    return _open_file(path, fps, max_source_frames)


def resampled(source: VideoSource, rate: float, crop: Crop | None = None) -> Iterator[np.ndarray]:
    """The source's frames cropped and re-timed to `rate` frames per second."""
    if crop is not None:
        crop.check(*source.size, str(source.path))
    frames = source.reader if crop is None else (crop.apply(f) for f in source.reader)
    return _resample(frames, source.fps, rate)
