"""Child processes that end with their parent: start, wait until ready, stop.

Every server this project starts (SkyEmu, llama-server, the BonkLink sim, test peers) goes through
`ChildProcess`, so none outlives the process that started it: on Linux the child asks the kernel
for SIGKILL when its parent dies (`prctl(PR_SET_PDEATHSIG)`), which covers a SIGKILL of the parent
that no Python cleanup could; `stop()` runs at interpreter exit and when the owner is garbage
collected, and the child's output goes to a log file that errors quote and `stop()` removes.
No library does this: `subprocess` has no parent-death option, and psutil only inspects.

>>> import sys
>>> with ChildProcess.start([sys.executable, "-c", "print('hi')"], name="echo") as child:
...     (child.wait_exit(timeout_s=30), child.log_tail().strip())
(0, 'hi')
>>> child.alive, child.log_path.exists()  # stopped, its temp log removed
(False, False)
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import faulthandler
import gc
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from metabonk_gym.errors import ChildProcessFailed as ChildProcessFailed  # re-exported

PR_SET_PDEATHSIG = 1
_LIVE: weakref.WeakSet[ChildProcess] = weakref.WeakSet()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` (loopback by default) that nothing listens on right now.

    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


try:  # looked up at import, in the parent: dlopen() in a child forked from a threaded parent can
    # deadlock on a loader lock another thread held at the fork
    _PRCTL: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


def die_with_parent(parent_pid: int) -> None:
    """Call in a child process (a multiprocessing worker): the kernel SIGKILLs it when the parent
    `parent_pid` dies (Linux; elsewhere nothing), and it exits now if the parent is already gone.

    >>> die_with_parent(os.getppid())  # this process's parent is alive: nothing happens
    """
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A `preexec_fn` that makes the kernel SIGKILL the child when its parent dies (Linux)."""

    # Look prctl up here, in the parent: dlopen() between fork and exec can deadlock when
    # another thread of the parent held the loader's lock at the fork.
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        prctl = None

    def setup() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return setup


_spawner_lock = threading.Lock()
_spawner: ThreadPoolExecutor | None = None


def _spawn(popen: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run `popen` on the main thread or on one long-lived spawner thread.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process: a child
    started from a short-lived worker thread would be killed with that thread. The spawner thread
    lives until the interpreter exits, so children started from any thread live as long as we do.
    """
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return popen()
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metabonk-spawner")
    return _spawner.submit(popen).result()


def _stop_popen(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """SIGTERM, wait up to `timeout_s`, then SIGKILL; the exit code (None if it never ended)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
    return proc.poll()


def _cleanup(proc: subprocess.Popen[bytes], log: Path | None, keep_log: bool) -> None:
    _stop_popen(proc, 2.0)
    if log is not None and not keep_log:
        log.unlink(missing_ok=True)


class ChildProcess:
    """A running child process tied to this one; build it with `ChildProcess.start`."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        name: str,
        log_path: Path | None,
        keep_log: bool,
    ) -> None:
        """Wrap a started `Popen`; use `start()` rather than calling this.

        Args:
            proc: the started process.
            name: a short name for messages ("llama-server", "skyemu").
            log_path: the file holding the child's stdout and stderr (None: inherited).
            keep_log: keep `log_path` after `stop()` (a path the caller chose).
        """
        self.proc = proc
        self.name = name
        self.log_path = log_path
        self._finalizer = weakref.finalize(self, _cleanup, proc, log_path, keep_log)
        _LIVE.add(self)

    @classmethod
    def start(
        cls,
        argv: Sequence[str | os.PathLike[str]],
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        inherit_output: bool = False,
    ) -> ChildProcess:
        """Start `argv` as a child that dies with this process.

        Args:
            argv: the program and its arguments.
            name: a short name for messages (default: the program's file name).
            env: the child's whole environment (default: this process's).
            cwd: the child's working directory.
            log_path: write the child's output there and keep it (default: a temp file removed
                on `stop()`).
            inherit_output: let the child write to this process's stdout/stderr instead.
        """
        args = [os.fspath(a) for a in argv]
        if not args:
            raise ValueError("argv is empty: give the program to start")
        label = name or Path(args[0]).name
        log: Path | None = None
        keep_log = log_path is not None
        if not inherit_output:
            if log_path is None:
                fd, tmp = tempfile.mkstemp(prefix=f"metabonk-{label}-", suffix=".log")
                os.close(fd)
                log = Path(tmp)
            else:
                log = Path(log_path)
                log.parent.mkdir(parents=True, exist_ok=True)
        out = open(log, "ab") if log is not None else None  # noqa: SIM115 (the child owns it)
        try:
            proc = _spawn(
                lambda: subprocess.Popen(
                    args,
                    env=dict(env) if env is not None else None,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT if out is not None else None,
                    preexec_fn=_die_with_parent(os.getpid()) if sys.platform == "linux" else None,
                )
            )
        except OSError as exc:
            if log is not None and not keep_log:
                log.unlink(missing_ok=True)
            raise ChildProcessFailed(f"cannot start {label} ({args[0]}): {exc}") from exc
        finally:
            if out is not None:
                out.close()
        return cls(proc, label, log, keep_log)

    # ---- state
    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, max_chars: int = 4000) -> str:
        """The last `max_chars` characters of the child's output ("" when inherited or gone)."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - max_chars))
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # ---- waiting
    def _failure(self, what: str) -> ChildProcessFailed:
        tail = self.log_tail().strip()
        return ChildProcessFailed(
            f"{self.name} (pid {self.pid}) {what}" + (f"; its output ends:\n{tail}" if tail else "")
        )

    def wait_ready(
        self, check: Callable[[], bool], timeout_s: float, interval_s: float = 0.05
    ) -> None:
        """Poll `check()` until it returns True; fail if the child exits or `timeout_s` passes."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise self._failure(f"exited with code {self.proc.returncode} before it was ready")
            with contextlib.suppress(Exception):
                if check():
                    return
            if time.monotonic() >= deadline:
                failure = self._failure(f"was not ready within {timeout_s:g} s and was stopped")
                self.stop()  # removes a temp log: quote it first
                raise failure
            time.sleep(interval_s)

    def wait_for_port(self, host: str, port: int, timeout_s: float) -> None:
        """Wait until something accepts TCP connections on `host:port`."""

        def listening() -> bool:
            with socket.create_connection((host, port), timeout=0.5):
                return True

        self.wait_ready(listening, timeout_s)

    def wait_exit(self, timeout_s: float) -> int:
        """Wait for the child to exit on its own; its exit code (stops it past the deadline)."""
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            failure = self._failure(f"did not exit within {timeout_s:g} s and was stopped")
            self.stop()  # removes a temp log: quote it first
            raise failure from None

    # ---- stopping
    def stop(self, timeout_s: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout_s`; its exit code. Safe to call twice."""
        code = _stop_popen(self.proc, timeout_s)
        self._finalizer()
        return code

    def __enter__(self) -> ChildProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.alive else f"exited {self.returncode}"
        return f"ChildProcess({self.name!r}, pid={self.pid}, {state})"


@contextlib.contextmanager
def gc_paused() -> Iterator[bool]:
    """Python's garbage collector off for the block, for a fork in it (the child starts with it
    off, so that nothing is collected before `adopt_inherited_objects`); yields whether it was on.

    >>> import gc
    >>> with gc_paused() as was_on:
    ...     gc.isenabled()
    False
    >>> gc.isenabled() == was_on
    True
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield was_on
    finally:
        if was_on:
            gc.enable()


def adopt_inherited_objects(gc_was_on: bool = True) -> None:
    """Call first in a child forked in `gc_paused()`: freeze every object it inherited
    (`gc.freeze`), so that its collections never finalize its parent's garbage, then turn the
    collector back on (`gc_was_on`: as it was in the parent).

    A long-lived parent's garbage can hold native objects whose destructors crash anywhere but
    in that parent. In CI both workers of `metabonk curriculum --swarm`, forked by a test process
    that had run Ray tests before, died of SIGSEGV in gRPC's `pollset_shutdown` inside
    `ray/_raylet.so` (the kernel log): collecting the Ray session's leftover objects shut down
    gRPC clients whose poller threads exist only in the parent. This is the recipe of `gc.freeze`'s
    documentation (collector off before the fork, objects frozen, collector on in the child); it
    also leaves the inherited objects' pages shared.
    """
    gc.freeze()
    if gc_was_on:
        gc.enable()


#: The signals that stop a command: Ctrl-C and SIGTERM (`kill PID`, a scheduler ending the job).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_stop: dict[str, Any] = {"signum": None, "depth": 0, "previous": {}}


def stop_signal() -> int | None:
    """The signal that asked this process to stop (SIGINT or SIGTERM), None if none did: a loop
    that would start more work after a stop checks it (`raise_if_stopping`).

    >>> stop_signal() is None
    True
    """
    return _stop["signum"]


def stop_exit_code(default: int = 130) -> int:
    """The shell's exit code for the stop signal (128 + signal: 130 Ctrl-C, 143 SIGTERM).

    >>> stop_exit_code()
    130
    """
    signum = _stop["signum"]
    return default if signum is None else 128 + int(signum)


def raise_if_stopping() -> None:
    """Raise KeyboardInterrupt if a stop signal came: work after a saved stop must not start."""
    if _stop["signum"] is not None:
        raise KeyboardInterrupt


def _on_stop_signal(signum: int, frame: Any) -> None:
    if _stop["signum"] is not None:  # the second signal (e.g. during the save): exit at once
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # killed by it, as the shell and schedulers expect
        os._exit(128 + signum)  # not reached unless it is blocked
    _stop["signum"] = signum
    raise KeyboardInterrupt  # the first: the usual Ctrl-C path saves a checkpoint, then exits


def graceful_stop_handler(on_stop: Callable[[], None]) -> Callable[[int, Any], None]:
    """A SIGINT / SIGTERM handler for a loop that ends its unit of work cleanly instead of being
    interrupted (a recorder finishing and saving its episode): the first signal calls `on_stop`
    and is kept as the stop (`stop_signal`, `stop_exit_code`: the command exits 130 / 143 once
    the unit is saved), a second one kills at once, as under `stop_on_signals`.

    >>> stops = []
    >>> handler = graceful_stop_handler(lambda: stops.append(1))
    >>> callable(handler), stops
    (True, [])
    """

    def handler(signum: int, frame: Any) -> None:
        if _stop["signum"] is not None:
            _on_stop_signal(signum, frame)  # the second: killed by it
        _stop["signum"] = signum
        on_stop()

    return handler


@contextlib.contextmanager
def graceful_stop_signals(on_stop: Callable[[], None]) -> Iterator[None]:
    """In the block, SIGINT and SIGTERM go to `graceful_stop_handler(on_stop)`; the handlers
    before are back after it. Off the main thread it does nothing; a signal inherited as
    ignored (`nohup`) stays ignored.

    >>> with graceful_stop_signals(lambda: None):
    ...     signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    True
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = graceful_stop_handler(on_stop)
    previous = {
        sig: signal.signal(sig, handler)
        for sig in STOP_SIGNALS
        if signal.getsignal(sig) != signal.SIG_IGN
    }
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def reclaim_stop_signals() -> None:
    """Inside `stop_on_signals`, install its handler again: call after a library that sets its
    own SIGTERM handler (`ray.init` exits 1 on SIGTERM, skipping the checkpoint).

    >>> reclaim_stop_signals()  # outside the block: nothing to reclaim
    >>> signal.getsignal(signal.SIGTERM) is _on_stop_signal
    False
    """
    if _stop["depth"] == 0 or threading.current_thread() is not threading.main_thread():
        return
    for sig in _stop["previous"]:
        signal.signal(sig, _on_stop_signal)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """In the block, SIGINT and SIGTERM both raise KeyboardInterrupt once (the code's Ctrl-C path
    saves its checkpoint), and a second one kills the process at once; `stop_signal()` keeps which.

    The one handler of every long command (cli `guarded`): a stop must end the process, never
    only the step running, so the caller exits with `stop_exit_code()` and refuses new work
    (`raise_if_stopping`). Nested blocks share the outer one's handlers; off the main thread
    (where Python cannot install handlers) it does nothing; a signal inherited as ignored
    stays ignored.

    >>> with stop_on_signals():
    ...     signal.getsignal(signal.SIGTERM) is _on_stop_signal
    True
    >>> signal.getsignal(signal.SIGTERM) is _on_stop_signal
    False
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _stop["depth"] == 0:
        _stop["previous"] = {  # a signal ignored by who started us (`nohup`, `cmd &`) stays so
            sig: signal.signal(sig, _on_stop_signal)
            for sig in STOP_SIGNALS
            if signal.getsignal(sig) != signal.SIG_IGN
        }
    _stop["depth"] += 1
    try:
        yield
    finally:
        _stop["depth"] -= 1
        if _stop["depth"] == 0:
            for sig, previous in _stop["previous"].items():
                signal.signal(sig, previous)


#: The most of a child's stack `CrashStack.text` keeps (its end: the innermost frames of each
#: thread come first in faulthandler's dump, the main thread last).
CRASH_STACK_CHARS = 8000
_crash_writer: Any = None  # the writer end `record_crash_stack` keeps open in a child


def record_crash_stack(writer: Any) -> None:
    """Call first in a child that a `CrashStack` watches: on a fatal signal (SIGSEGV, SIGABRT,
    SIGBUS, SIGILL, SIGFPE), and on SIGUSR1, faulthandler writes every thread's Python stack
    into `writer` (the `CrashStack`'s), which stays open for the life of the process."""
    global _crash_writer
    _crash_writer = writer
    # enable() on an already enabled faulthandler (the parent's, inherited: pytest's, Ray's
    # driver) only swaps the file and installs no handler: a library that has since taken
    # SIGSEGV over (Ray's) would keep it and the child would die without a word
    faulthandler.disable()
    faulthandler.enable(file=writer.fileno(), all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=writer.fileno(), all_threads=True)


def crash_report(raw: str, limit: int = CRASH_STACK_CHARS) -> str:
    """faulthandler's output, readable in `limit` characters: its error line, then the thread
    that crashed ("Current thread"), then the others; without the list of extension modules
    (hundreds in a test process: it pushed the crash itself out of a tail cut).

    >>> raw = ("Fatal Python error: Segmentation fault\\n\\nThread 0x1 (most recent call first):\\n"
    ...        "  File \\"t.py\\", line 9 in idle\\n\\nCurrent thread 0x2 (most recent call first):\\n"
    ...        "  File \\"w.py\\", line 5 in step\\n\\nExtension modules: numpy (total: 1)\\n")
    >>> print(crash_report(raw))
    Fatal Python error: Segmentation fault
    <BLANKLINE>
    Current thread 0x2 (most recent call first):
      File "w.py", line 5 in step
    <BLANKLINE>
    Thread 0x1 (most recent call first):
      File "t.py", line 9 in idle
    """
    blocks = [b.strip("\n") for b in raw.split("\n\n") if b.strip()]
    blocks = [b for b in blocks if not b.startswith("Extension modules:")]
    first = [b for b in blocks if not b.startswith(("Thread ", "Current thread "))]
    current = [b for b in blocks if b.startswith("Current thread ")]
    others = [b for b in blocks if b.startswith("Thread ")]
    return "\n\n".join(first + current + others)[:limit].strip()


class CrashStack:
    """Where a multiprocessing child died of a fatal signal, or where it hangs: its faulthandler
    writes every thread's Python stack into a pipe whose other end this object reads.

    Without it a worker that crashes in C code (an emulator core) is reported only as "killed by
    SIGSEGV", and the stack faulthandler prints goes to a stderr nobody keeps (a test worker's).
    Pass `writer` to the child, which calls `record_crash_stack(writer)` first; call `started()`
    once the child runs, `text()` once it is gone, `dump(pid)` before killing one that hangs.

    Args:
        ctx: the multiprocessing context that starts the child (a `Pipe` of it reaches spawned
            and forkserver children too).

    >>> import multiprocessing
    >>> def crash(writer):
    ...     record_crash_stack(writer)
    ...     os.kill(os.getpid(), signal.SIGSEGV)
    >>> ctx = multiprocessing.get_context("fork")
    >>> stack = CrashStack(ctx)
    >>> child = ctx.Process(target=crash, args=(stack.writer,))
    >>> child.start(); stack.started(); child.join()
    >>> child.exitcode, "Segmentation fault" in stack.text(), "in crash" in stack.text()
    (-11, True, True)
    >>> stack.close()
    """

    def __init__(self, ctx: Any) -> None:
        self._reader, self.writer = ctx.Pipe(duplex=False)
        self._data = b""

    def started(self) -> None:
        """The child has its end now: close this process's copy (else nothing reads as ended)."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def _read(self, wait_s: float = 0.0) -> None:
        """Take what the child wrote; wait up to `wait_s` for the first of it."""
        if self._reader.closed:
            return
        fd = self._reader.fileno()
        deadline = time.monotonic() + wait_s
        while len(self._data) < 4 * CRASH_STACK_CHARS:
            timeout = max(0.0, deadline - time.monotonic()) if not self._data else 0.05
            if not select.select([fd], [], [], timeout)[0]:
                return
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            self._data += chunk

    def text(self) -> str:
        """The stack the child wrote ("" when it wrote none: it exited, or was SIGKILLed), the
        crashing thread first (`crash_report`)."""
        self._read()
        return crash_report(self._data.decode(errors="replace"))

    def dump(self, pid: int, wait_s: float = 1.0) -> str:
        """Ask the live child `pid` where it is (SIGUSR1) and return its stack; call it only
        before killing the child (one that has not called `record_crash_stack` yet dies of it)."""
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGUSR1)
            self._read(wait_s)
        return self.text()

    def close(self) -> None:
        """Keep what was read (for `text()`) and close the pipe."""
        self._read()
        for conn in (self._reader, self.writer):
            with contextlib.suppress(OSError):
                conn.close()


def live_children() -> list[ChildProcess]:
    """Children started here that are still running (for tests and diagnostics)."""
    return [child for child in list(_LIVE) if child.alive]


def _stop_all() -> None:
    for child in list(_LIVE):
        with contextlib.suppress(Exception):
            child.stop(timeout_s=2.0)


atexit.register(_stop_all)
