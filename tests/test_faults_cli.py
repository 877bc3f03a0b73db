"""Training survives what goes wrong around it (issue 12, items 1, 15 and 16).

Real faults, no mocks: an env worker of the shared-memory engine (`SharedMemoryVecEnv`)
killed with SIGKILL, a file size limit (RLIMIT_FSIZE, the kernel's EFBIG: what a full disk
does to a write), a trainer killed with SIGKILL, and a bonklink-sim game stopped
mid-training. Each time the trainer ends within a bounded time with one line naming the
cause and `--resume`, a checkpoint to continue from, and
`run.json` saying what happened.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from metabonk_gym.process import free_port

ENV = "MetaBonk/BonkQuest-v0"
METABONK = [sys.executable, "-m", "metabonk_gym.cli.main"]


def _train(run_dir: Path, *extra: str) -> list[str]:
    return [
        *METABONK,
        "train",
        "ppo",
        ENV,
        "--run-dir",
        str(run_dir),
        "--video-every",
        "0",
        "--no-progress",
        *extra,
    ]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.extend(int(t) for t in text)
    return out


def _wait_for(check, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _state(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.mark.slow
def test_a_killed_env_worker_stops_training_with_a_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = _train(run_dir, "--n-envs", "2", "--total-steps", "20000", "--checkpoint-every", "1024")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(
            lambda: (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").iterdir()),
            120,
            "a first checkpoint",
        )
        workers = _children(proc.pid)
        assert len(workers) >= 2, workers
        os.kill(workers[-1], signal.SIGKILL)
        killed = time.monotonic()
        _, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert took < 30, f"the trainer took {took:.0f} s to notice"
    assert proc.returncode == 1, stderr
    lines = _error_lines(stderr)
    assert len(lines) == 1, stderr
    assert f"pid {workers[-1]}" in lines[0] and "SIGKILL" in lines[0] and "--resume" in lines[0]
    state = _state(run_dir)
    assert state["status"] == "failed" and "--resume" in state["error"]
    saved = run_dir / "checkpoints" / state["last_checkpoint"]
    assert saved.is_file() and str(saved) in lines[0]
    # the checkpoint is whole: the run continues from it
    steps = int(state["num_timesteps"])
    more = _train(run_dir, "--resume", "--total-steps", str(steps + 300))
    done = subprocess.run(more, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert _state(run_dir)["status"] == "finished"


def _limit_file_size(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
def test_a_full_disk_names_the_last_good_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = _train(run_dir, "--n-envs", "1", "--total-steps", "256", "--checkpoint-every", "128")
    first += ["--set", "n_steps=128", "--set", "batch_size=64", "--set", "n_epochs=1"]
    done = subprocess.run(first, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    good = sorted((run_dir / "checkpoints").iterdir())[-1]
    # checkpoints are ~1.5 MB; the ROM's temp copy (512 KiB) and run.json still fit under 1 MB
    resume = _train(run_dir, "--resume", "--total-steps", "2048", "--checkpoint-every", "128")
    proc = subprocess.run(
        resume,
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=_limit_file_size(1_000_000),
    )
    assert proc.returncode == 1, proc.stderr
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "disk is full" in lines[0] and "File too large" in lines[0]
    assert f"last good checkpoint: {good}" in lines[0] and "--resume" in lines[0]
    state = _state(run_dir)
    assert state["status"] == "failed"
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.suffix == ".tmp"]
    assert not list(run_dir.glob(".*.tmp"))


@pytest.mark.slow
def test_a_killed_trainers_run_is_stale_on_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = _train(run_dir, "--n-envs", "1", "--total-steps", "20000", "--checkpoint-every", "128")
    cmd += ["--set", "n_steps=128", "--set", "batch_size=64", "--set", "n_epochs=1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(
            lambda: (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").iterdir()),
            120,
            "a first checkpoint",
        )
        state = _state(run_dir)
        assert state["status"] == "running" and state["pid"] == proc.pid
        # while it runs, a second trainer on the same directory is refused
        again = subprocess.run(
            _train(run_dir, "--resume", "--total-steps", "30000"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 2
        assert f"being trained right now by process {proc.pid}" in again.stderr
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _state(run_dir)["status"] == "running"  # what a killed run leaves behind
    steps = int(_state(run_dir)["num_timesteps"])
    more = _train(run_dir, "--resume", "--total-steps", str(steps + 200))
    done = subprocess.run(more, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "was killed" in done.stderr
    state = _state(run_dir)
    assert state["status"] == "finished" and state["stale"] is True


@pytest.mark.slow
@pytest.mark.net
def test_megabonk_training_whose_game_goes_away_saves_a_checkpoint(tmp_path: Path) -> None:
    port = free_port()
    sim = subprocess.Popen(
        [*METABONK, "bonklink-sim", "--lockstep", "--port", str(port), "--jpeg-hz", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    run_dir = tmp_path / "run"
    cmd = [*METABONK, "train", "ppo", "MetaBonk/Megabonk-v0", "--run-dir", str(run_dir)]
    cmd += ["--n-envs", "1", "--base-port", str(port), "--total-steps", "100000"]
    cmd += ["--checkpoint-every", "100000", "--video-every", "0", "--no-progress"]
    cmd += ["--set", "n_steps=64", "--set", "batch_size=64", "--set", "n_epochs=1"]
    proc = None
    try:
        time.sleep(2.0)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        events = run_dir / "tensorboard"
        _wait_for(
            lambda: (
                events.is_dir() and any(p.stat().st_size > 2000 for p in events.rglob("events*"))
            ),
            120,
            "some training",
        )
        sim.kill()
        sim.wait()
        _, stderr = proc.communicate(timeout=90)
    finally:
        for p in (sim, proc):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert proc.returncode == 1, stderr
    lines = _error_lines(stderr)
    assert len(lines) == 1 and "checkpoint saved" in lines[0], stderr
    state = _state(run_dir)
    assert state["status"] == "failed"
    assert (run_dir / "checkpoints" / state["last_checkpoint"]).is_file()
    assert state["num_timesteps"] > 0
