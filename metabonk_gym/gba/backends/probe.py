"""Try a savestate of unknown origin in a throwaway process before the env's emulator loads it.

mGBA's C code can spin forever on a corrupted state (and Ctrl-C cannot interrupt it), so a state
file without this project's checksum (`metabonk_gym.gba.statefile`) is first loaded and run for
`PROBE_FRAMES` frames in a child process (`probe_child.main`, given the ROM and a temp file of the state)
that must exit within `PROBE_TIMEOUT_S`; a state that hangs or crashes there gives
`CorruptSavestateError`. Verdicts are cached per (ROM, state) hash, in this process and in
`~/.cache/metabonk/state-verdicts/`, so each state is tried once.

>>> import hashlib
>>> cached_verdict(hashlib.sha256(b"never probed").hexdigest(), "rom") is None
True
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from pathlib import Path

from metabonk_gym.errors import CorruptSavestateError
from metabonk_gym.process import ChildProcess, ChildProcessFailed
from metabonk_gym.utils import atomic_write_bytes

#: Seconds the throwaway process may take (start-up included) to load the state and run it.
PROBE_TIMEOUT_S = 30.0
#: Frames it runs after loading the state.
PROBE_FRAMES = 120
#: Exit code of a probe whose state the core refused (the message is on its stderr).
REFUSED = 3
_OK = "ok"
_CHILD = "import sys; from metabonk_gym.gba.backends.probe_child import main; sys.exit(main(sys.argv[1:]))"
_verdicts: dict[tuple[str, str], str] = {}
#: How many probes this process ran (for tests).
probes_run = 0


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "metabonk" / "state-verdicts"


def cached_verdict(state_sha: str, rom_sha: str) -> str | None:
    """`"ok"`, the error message of a refused state, or None when it was never tried."""
    key = (state_sha, rom_sha)
    if key in _verdicts:
        return _verdicts[key]
    try:
        verdict = (_cache_dir() / f"{rom_sha[:16]}-{state_sha}").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    _verdicts[key] = verdict
    return verdict


def _remember(state_sha: str, rom_sha: str, verdict: str) -> None:
    _verdicts[(state_sha, rom_sha)] = verdict
    with contextlib.suppress(OSError):  # a read-only home only costs probing again later
        atomic_write_bytes(_cache_dir() / f"{rom_sha[:16]}-{state_sha}", verdict.encode())


def probe_state(rom_path: Path, rom_sha: str, state: bytes) -> None:
    """Load `state` on `rom_path` in a throwaway process and run it (once per state and ROM);
    raise `CorruptSavestateError` if it hangs, crashes or is refused there."""
    global probes_run
    state_sha = hashlib.sha256(state).hexdigest()
    verdict = cached_verdict(state_sha, rom_sha)
    if verdict is None:
        probes_run += 1
        verdict, final = _run_probe(rom_path, state)
        if final:
            _remember(state_sha, rom_sha, verdict)
    if verdict != _OK:
        raise CorruptSavestateError(verdict)


def _run_probe(rom_path: Path, state: bytes) -> tuple[str, bool]:
    """The verdict of one probe (`"ok"` or the message of the error it gives) and whether it is
    about the state (cached) rather than the probe itself (e.g. a broken installation)."""
    fd, tmp = tempfile.mkstemp(prefix="metabonk-probe-", suffix=".bin")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(state)
        child = ChildProcess.start(
            [sys.executable, "-c", _CHILD, str(rom_path), tmp], name="savestate-probe"
        )
        try:
            code = child.wait_exit(timeout_s=PROBE_TIMEOUT_S)
        except ChildProcessFailed:
            return (
                f"the savestate did not finish loading and running {PROBE_FRAMES} frames within "
                f"{PROBE_TIMEOUT_S:g} s in a test process (the emulator hangs on it): a corrupt "
                "state, refused; re-create it with env.unwrapped.save_state(path)"
            ), True
        output = child.log_tail(2000).strip()
        child.stop()
        if code == 0:
            return _OK, True
        if code == REFUSED and output:
            return output.splitlines()[-1], True
        if code < 0:  # killed by a signal: the emulator crashed on the state
            return (
                f"the emulator crashed on the savestate in a test process (signal {-code}): a "
                "corrupt state, refused; re-create it with env.unwrapped.save_state(path)"
            ), True
        return f"the savestate test process failed (exit code {code}): {output[-600:]}", False
    finally:
        Path(tmp).unlink(missing_ok=True)
