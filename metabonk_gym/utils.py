"""Small helpers shared across the package."""

from __future__ import annotations

import contextlib
import difflib
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from metabonk_gym.errors import BadNumberError

W = TypeVar("W")

#: A progress sink: one line of text, no return (`print`, a logger's method, a list's append).
Log = Callable[[str], None]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never a mix.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.bin"
    >>> atomic_write_bytes(p, b"hi"); p.read_bytes()
    b'hi'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:  # name the file asked for, not the temporary one
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
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


@contextlib.contextmanager
def env_var(name: str, value: str) -> Iterator[None]:
    """Environment variable `name` set to `value` inside the block, as it was after (unset
    included): for libraries that read their settings from the environment (Minari, Ray Tune).

    >>> with env_var("METABONK_DOCTEST", "1"):
    ...     os.environ["METABONK_DOCTEST"]
    '1'
    >>> "METABONK_DOCTEST" in os.environ
    False
    """
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


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


def check_number(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    integer: bool = False,
    low_open: bool = False,
) -> Any:
    """`value` if it is a finite number (a whole one with `integer`) in `[low, high]` (`(low,
    high]` with `low_open`), else a one-line `BadNumberError` naming `name` and the range.

    NaN and infinity pass most comparisons unnoticed (`nan < 0` is False), so every number
    from a flag or a file goes through here before it sizes or steers anything.

    >>> check_number("--fps", 30.0, 0, 1000, low_open=True)
    30.0
    >>> check_number("--fps", float("inf"), 0, 1000, low_open=True)
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.BadNumberError: --fps must be a number in (0, 1000], not inf
    >>> check_number("--epochs", -3, 1, integer=True)
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.BadNumberError: --epochs must be a whole number >= 1, not -3
    """
    kind = "a whole number" if integer else "a number"
    if low is not None and high is not None:
        where = f" in {'(' if low_open else '['}{_fmt(low)}, {_fmt(high)}]"
    elif low is not None:
        where = f" {'>' if low_open else '>='} {_fmt(low)}"
    elif high is not None:
        where = f" <= {_fmt(high)}"
    else:
        where = ""
    bad = BadNumberError(f"{name} must be {kind}{where}, not {value!r}")
    if isinstance(value, bool | str | bytes):  # "four" or "4" from a file is not a number
        raise bad
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise bad from None
    if not math.isfinite(number) or (integer and not float(number).is_integer()):
        raise bad
    if integer and not isinstance(value, int):
        try:
            if int(value) != number:
                raise bad
        except (TypeError, ValueError):
            raise bad from None
    if low is not None and (number <= low if low_open else number < low):
        raise bad
    if high is not None and number > high:
        raise bad
    return value


def _fmt(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e15 else f"{bound:g}"


#: Characters a terminal acts on instead of showing: C0 controls (ESC starts escape sequences),
#: DEL and the C1 controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def did_you_mean(word: object, choices: Iterable[object]) -> str:
    """` (did you mean 'x'?)` naming the choice nearest to `word`, or `""` when none is close:
    the hint every "unknown name" error carries (names compared as strings).

    >>> did_you_mean("gama", ["gamma", "seed"])
    " (did you mean 'gamma'?)"
    >>> did_you_mean("zzz", ["gamma"])
    ''
    """
    close = difflib.get_close_matches(str(word), [str(choice) for choice in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def printable(text: str, replacement: str = "?") -> str:
    """`text` with every control character replaced, so text from a file (a ROM header, a name
    someone chose) printed to a terminal shows as text and never moves the cursor, retitles the
    window or hides what follows. Tabs and newlines are controls too: the text is one field.

    >>> printable("BONK\x1b[2JQUEST\x07")
    'BONK?[2JQUEST?'
    """
    return _CONTROL.sub(replacement, text)
