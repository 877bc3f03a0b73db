"""Faults a training run survives by saving and stopping: an env worker or game gone, a full disk.

`fault_cause` says whether an exception from SB3's `learn` is such a fault (and which, in one
line) or a bug to show in full; the vector engine reports a dead or hung env worker within its
deadline as `EnvWorkerError`. `TrainingFailed` is what the trainer raises after
saving a checkpoint and marking `run.json` failed; the CLI prints its one line and exits with 1.

>>> import errno
>>> fault_cause(OSError(errno.ENOSPC, "No space left on device", "/runs/a/model.zip"))
'the disk is full (No space left on device: /runs/a/model.zip)'
>>> fault_cause(EOFError()) is not None, fault_cause(ValueError("bug")) is None
(True, True)
>>> text = ["step of env 1 raised KeyError:", "Traceback ...", "  x", "KeyError: 'a'"]
>>> fault_cause(EnvWorkerError(chr(10).join(text)))
"an env worker failed: step of env 1 raised KeyError: KeyError: 'a'"
"""

from __future__ import annotations

import errno

from metabonk_gym.errors import EnvWorkerError
from metabonk_gym.training.errors import TrainingFailed as TrainingFailed  # re-exported

#: errno values meaning "no room to write": a full disk, a file size limit, a quota.
DISK_FULL_ERRNOS: frozenset[int] = frozenset(
    {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
)


def is_disk_full(exc: BaseException) -> bool:
    """True for an `OSError` that says there is no room to write (ENOSPC, EFBIG, EDQUOT)."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def fault_cause(exc: BaseException) -> str | None:
    """One line naming the fault behind `exc`, or None when `exc` is not such a fault (a bug)."""
    if is_disk_full(exc):
        assert isinstance(exc, OSError)
        where = f": {exc.filename}" if exc.filename else ""
        return f"the disk is full ({exc.strerror or exc}{where})"
    if isinstance(exc, EnvWorkerError):
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        if len(lines) > 2:  # a worker's traceback: its first line and the exception
            lines = [lines[0], lines[-1]]
        return f"an env worker failed: {' '.join(lines)}"
    if isinstance(exc, (EOFError, ConnectionError, TimeoutError)):
        detail = str(exc) or type(exc).__name__
        return (
            "an env stopped answering (its worker process died, or its game went away): "
            f"{type(exc).__name__}: {detail}"
        )
    return None
