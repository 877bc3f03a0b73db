"""Small helpers shared across the package."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

W = TypeVar("W")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a mix.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bin"
    >>> atomic_write_bytes(p, b"hi"); p.read_bytes()
    b'hi'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would (0666 & ~umask).
        os.chmod(tmp, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    """`atomic_write_bytes` for UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def find_wrapper(env: Any, cls: type[W]) -> W | None:
    """The outermost layer of `env`'s wrapper stack that is an instance of `cls` (None if none).

    Walks `.env` from `env` down to the unwrapped env, which is checked too.

    >>> import gymnasium as gym
    >>> env = gym.wrappers.ClipReward(gym.make("CartPole-v1"), -1, 1)
    >>> type(find_wrapper(env, gym.wrappers.ClipReward)).__name__
    'ClipReward'
    >>> find_wrapper(env, gym.wrappers.FrameStackObservation) is None
    True
    """
    layer = env
    while layer is not None:
        if isinstance(layer, cls):
            return layer
        layer = getattr(layer, "env", None)
    return None
