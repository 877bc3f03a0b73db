"""Episode videos: mp4 files (imageio-ffmpeg) and animated GIFs in TensorBoard.

TensorBoard shows videos as animated GIF image summaries. torch's `add_video` encodes them with
moviepy, which is a large extra dependency; Pillow writes the same GIF, and the summary proto is
written directly, so the video lands in the same event file as the scalars.

>>> import numpy as np
>>> gif = encode_gif(np.zeros((3, 16, 16, 3), np.uint8), fps=15)
>>> gif[:6]
b'GIF89a'
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.utils import atomic_write_bytes


def _as_rgb(frames: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    array = np.asarray(frames)
    if array.ndim == 3:
        array = array[..., None]
    if array.shape[-1] == 1:
        array = np.repeat(array, 3, axis=-1)
    return array.astype(np.uint8, copy=False)


def encode_gif(
    frames: Sequence[np.ndarray] | np.ndarray, fps: float, max_frames: int = 400
) -> bytes:
    """An animated GIF of (T, H, W, C) frames; long clips are subsampled to `max_frames`."""
    from PIL import Image

    array = _as_rgb(frames)
    step = max(1, int(np.ceil(len(array) / max_frames)))
    array = array[::step]
    images = [Image.fromarray(frame) for frame in array]
    buffer = io.BytesIO()
    duration = max(20, int(1000 * step / max(fps, 1e-3)))
    images[0].save(
        buffer, format="GIF", save_all=True, append_images=images[1:], duration=duration, loop=0
    )
    return buffer.getvalue()


def write_mp4(path: Path, frames: Sequence[np.ndarray] | np.ndarray, fps: float) -> Path:
    """An H.264 mp4 of the frames, written atomically (GBA frames 240x160 need no padding)."""
    import imageio.v2 as imageio

    array = _as_rgb(frames)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.mp4")
    try:
        writer: Any = imageio.get_writer(tmp, fps=fps, codec="libx264", macro_block_size=2)
        with writer:
            for frame in array:
                writer.append_data(frame)
        atomic_write_bytes(path, tmp.read_bytes())
    finally:
        tmp.unlink(missing_ok=True)
    return path


class Mp4Stream:
    """An mp4 written frame by frame (no episode kept in memory); `discard()` drops it.

    Args:
        path: the file to write.
        fps: frames per second.
    """

    def __init__(self, path: Path, fps: float) -> None:
        import imageio.v2 as imageio

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer: Any = imageio.get_writer(
            self.path, fps=fps, codec="libx264", macro_block_size=2
        )

    def add(self, frame: np.ndarray) -> None:
        self._writer.append_data(_as_rgb(frame[None])[0])

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def discard(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def tensorboard_writer(logger: Any) -> Any:
    """The `SummaryWriter` behind an SB3 logger's TensorBoard output, or None."""
    from stable_baselines3.common.logger import TensorBoardOutputFormat

    for fmt in getattr(logger, "output_formats", []):
        if isinstance(fmt, TensorBoardOutputFormat):
            return fmt.writer
    return None


def add_gif_summary(
    writer: Any, tag: str, frames: Sequence[np.ndarray] | np.ndarray, step: int, fps: float
) -> None:
    """Write frames as an animated image summary (TensorBoard's video format)."""
    from tensorboard.compat.proto.summary_pb2 import Summary

    array = _as_rgb(frames)
    gif = encode_gif(array, fps=fps)
    image = Summary.Image(
        height=array.shape[1], width=array.shape[2], colorspace=3, encoded_image_string=gif
    )
    summary = Summary(value=[Summary.Value(tag=tag, image=image)])
    writer._get_file_writer().add_summary(summary, step)
    writer.flush()
