"""Files the tools read, made hostile (issue 36, item 3): a GGUF whose counts the file cannot
hold, a decision log of gigabytes or of lines that are not objects, a RAM session that names a
FIFO or holds arrays of the wrong shape. Each is one line and exit code 2 (or skipped where a
log may hold junk), in bounded memory and time."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from one_line import one_line_error as _error


# ------------------------------------------------------------------ GGUF
def gguf_bomb(path: Path) -> Path:
    """49 bytes: a GGUF v3 header, one metadata key whose array claims 2^61 u32 values."""
    data = struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
    data += struct.pack("<IIQ", 9, 4, 1 << 61)
    assert len(data) == 49
    path.write_bytes(data)
    return path


def test_a_gguf_claiming_2_61_values_is_refused_in_one_line(tmp_path: Path) -> None:
    bomb = gguf_bomb(tmp_path / "bomb.gguf")
    assert _error(["think", "check", str(bomb)]) == (
        f"error: {bomb} is a broken GGUF model (metadata key k: an array of "
        "2305843009213693952 values does not fit in the file); download or write it again"
    )


def test_a_gguf_bomb_costs_no_memory(tmp_path: Path) -> None:
    """The trial's `think check` passed 4 GB on it (gguf's reader sized its lists from the
    claim). In a child capped at 1.5 GiB of address space, the check refuses it from the
    header with a few MB more than the imports took."""
    bomb = gguf_bomb(tmp_path / "bomb.gguf")
    script = (
        "import resource, sys\n"
        "from metabonk_gym.think.models import BadModelFileError, check_gguf\n"
        "import gguf\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 29, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    check_gguf(sys.argv[1])\n"
        "except BadModelFileError as exc:\n"
        "    print(exc)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(bomb)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    message, grown_mb = done.stdout.strip().splitlines()
    assert "does not fit in the file" in message
    assert int(grown_mb) < 64


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda d: d[:40], "metadata key k: the file ends inside it"),
        (lambda d: d[:24] + struct.pack("<Q", 1 << 60) + d[32:], "a string of"),
        (lambda d: d[:8] + struct.pack("<Q", 1 << 40) + d[16:], "tensors do not fit"),
    ],
)
def test_other_counts_past_the_file_are_refused(tmp_path: Path, change, problem: str) -> None:
    from metabonk_gym.think.models import gguf_layout_problem

    sound = struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
    sound += struct.pack("<IIQ", 9, 4, 2) + bytes(8)
    path = tmp_path / "m.gguf"
    path.write_bytes(sound)
    assert gguf_layout_problem(path) is None
    path.write_bytes(change(sound))
    assert problem in str(gguf_layout_problem(path))
