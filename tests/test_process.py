"""`metabonk_gym.process.ChildProcess`: children die with their parent, waits have deadlines and
failures quote the child's output, `stop()` escalates to SIGKILL. Real processes throughout."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from metabonk_gym.process import ChildProcess, ChildProcessFailed, free_port, live_children

PY = sys.executable


def python(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie has exited: it only waits to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def wait_gone(pid: int, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


SLEEPER = "import time; print('up', flush=True); time.sleep(300)"


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("from_thread", [False, True])
def test_the_child_dies_when_its_parent_is_sigkilled(from_thread: bool) -> None:
    """No cleanup runs on SIGKILL; the kernel's parent-death signal must end the child. A child
    started from a short-lived thread must outlive that thread, and still die with the parent."""
    parent_code = f"""
        import sys, threading, time
        from metabonk_gym.process import ChildProcess
        argv = [sys.executable, "-c", {SLEEPER!r}]
        box = []
        if {from_thread}:
            worker = threading.Thread(target=lambda: box.append(ChildProcess.start(argv, name="sleeper")))
            worker.start()
            worker.join()
        else:
            box.append(ChildProcess.start(argv, name="sleeper"))
        box[0].wait_ready(lambda: "up" in box[0].log_tail(), timeout_s=60)
        print(box[0].pid, flush=True)
        time.sleep(300)
    """
    parent = subprocess.Popen(python(parent_code), stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        time.sleep(0.3)  # the thread that started it has ended by now
        assert running(pid), "the child died before its parent"
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert wait_gone(pid), f"child {pid} outlived its SIGKILLed parent"
    finally:
        parent.kill()
        parent.wait(timeout=30)


def test_children_are_stopped_at_interpreter_exit_and_when_collected() -> None:
    code = f"""
        import sys
        from metabonk_gym.process import ChildProcess
        child = ChildProcess.start([sys.executable, "-c", {SLEEPER!r}], name="sleeper")
        print(child.pid, flush=True)
    """  # exits without stop()
    out = subprocess.run(python(code), capture_output=True, text=True, timeout=60, check=True)
    assert wait_gone(int(out.stdout)), "the child outlived the interpreter"

    child = ChildProcess.start(python(SLEEPER), name="sleeper")
    pid, log = child.pid, child.log_path
    assert log is not None and log.exists()
    del child
    gc.collect()
    assert wait_gone(pid), "the child outlived its collected owner"
    assert not log.exists(), "its temp log outlived it"


def test_wait_ready_past_the_deadline_stops_the_child_and_quotes_its_output() -> None:
    child = ChildProcess.start(
        python("import time; print('loading the model', flush=True); time.sleep(300)"),
        name="slowpoke",
    )
    start = time.monotonic()
    with pytest.raises(ChildProcessFailed, match=r"(?s)slowpoke.*within 1 s.*loading the model"):
        child.wait_ready(lambda: "never" in child.log_tail(), timeout_s=1.0)
    assert time.monotonic() - start < 15
    assert not child.alive and not running(child.pid)


def test_a_child_that_exits_early_fails_the_wait_with_its_code_and_output() -> None:
    child = ChildProcess.start(
        python("import sys; sys.stderr.write('bad config: port\\n'); sys.exit(3)"), name="broken"
    )
    start = time.monotonic()
    with pytest.raises(ChildProcessFailed, match=r"(?s)broken.*exited with code 3.*bad config"):
        child.wait_ready(lambda: False, timeout_s=60)
    assert time.monotonic() - start < 30, "an early exit must not wait for the deadline"
    assert child.returncode == 3
    child.stop()


def test_stop_escalates_to_sigkill_for_a_child_ignoring_sigterm() -> None:
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring SIGTERM", flush=True)
        time.sleep(300)
    """
    child = ChildProcess.start(python(code), name="stubborn")
    child.wait_ready(lambda: "ignoring" in child.log_tail(), timeout_s=60)
    start = time.monotonic()
    code_ = child.stop(timeout_s=0.5)
    elapsed = time.monotonic() - start
    assert code_ == -signal.SIGKILL, "SIGTERM was ignored: only SIGKILL ends it"
    assert 0.5 <= elapsed < 10
    assert not running(child.pid)
    assert child.stop() == -signal.SIGKILL, "a second stop() is harmless"


def test_a_well_behaved_child_ends_on_sigterm() -> None:
    child = ChildProcess.start(python(SLEEPER), name="sleeper")
    child.wait_ready(lambda: "up" in child.log_tail(), timeout_s=60)
    assert child in live_children()
    assert child.stop(timeout_s=10) == -signal.SIGTERM
    assert child not in live_children()


@pytest.mark.net
def test_wait_for_port_sees_a_server_listen(tmp_path: Path) -> None:
    port = free_port()
    code = f"""
        import socket, time
        time.sleep(0.5)
        server = socket.create_server(("127.0.0.1", {port}))
        time.sleep(300)
    """
    with ChildProcess.start(python(code), name="listener", log_path=tmp_path / "l.log") as child:
        child.wait_for_port("127.0.0.1", port, timeout_s=60)
        assert child.alive
    assert not child.alive
    assert (tmp_path / "l.log").exists(), "a log path the caller chose is kept"


def test_a_missing_program_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ChildProcessFailed, match="cannot start nope"):
        ChildProcess.start([str(tmp_path / "nope")])
