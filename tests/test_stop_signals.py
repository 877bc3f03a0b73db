"""SIGTERM (`kill PID`, a scheduler) and Ctrl-C stop a long command: it saves, then EXITS.

Real processes, real signals: each command runs as its own session (`start_new_session`), is
signalled by pid only (as `kill PID` does), and must exit with the shell's code (143 for
SIGTERM) within a deadline, its checkpoint written, and nothing of its session left running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from metabonk_gym.rundir import RunDir

QUEST = "MetaBonk/BonkQuest-v0"
FAST = [
    "--set", "n_steps=32", "--set", "batch_size=32", "--set", "n_epochs=1",
    "--set", "downscale=8", "--set", "frame_stack=2", "--set", "features_dim=32",
    "--set", "max_episode_steps=30", "--set", "video_every=0",
]  # fmt: skip
#: Seconds from the signal to the exit: a checkpoint save and the workers' shutdown, under load.
EXIT_DEADLINE_S = 45.0


def session_left(sid: int) -> list[str]:
    """The processes still in session `sid` (the command's workers, servers)."""
    out = subprocess.run(["ps", "-o", "pid=,args=", "-s", str(sid)], capture_output=True, text=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def start(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "metabonk_gym.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for(
    paths: Path, pattern: str, proc: subprocess.Popen[bytes], settle_s: float = 1.5
) -> None:
    deadline = time.monotonic() + 180
    while not list(paths.glob(pattern)):
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"never stepped:\n{proc.communicate()[0].decode()[-3000:]}")
        time.sleep(0.2)
    time.sleep(settle_s)  # some rollouts in


def stop(proc: subprocess.Popen[bytes], signum: int) -> tuple[float, str]:
    """Send `signum` to the command's pid; (seconds until it exited, its output)."""
    sent = time.monotonic()
    os.kill(proc.pid, signum)
    try:
        out, _ = proc.communicate(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(
            f"still running {EXIT_DEADLINE_S} s after the signal:\n{out.decode()[-3000:]}"
        ) from None
    return time.monotonic() - sent, out.decode()


def assert_nothing_left(sid: int) -> None:
    deadline = time.monotonic() + 10  # workers see their pipe close and exit
    while (left := session_left(sid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        os.killpg(sid, signal.SIGKILL)
    assert not left, f"orphaned: {left}"


def test_sigterm_stops_train_ppo_with_a_checkpoint_and_no_workers_left(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = start(["train", "ppo", QUEST, "--run-dir", str(run_dir), "--total-steps", "1000000",
                  "--n-envs", "2", "--no-progress", *FAST])  # fmt: skip
    wait_for(run_dir / "tensorboard", "events.*", proc)
    assert len(session_left(proc.pid)) >= 3  # the command and its two env workers
    _, out = stop(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "interrupted: checkpoint and model.zip saved" in out
    run = RunDir(run_dir)
    assert run.list_checkpoints() and run.model.is_file()
    assert run.read_state()["status"] == "interrupted"
    assert_nothing_left(proc.pid)


def test_sigterm_stops_bench_learning_instead_of_scoring_the_stopped_run(tmp_path: Path) -> None:
    # the part's loop used to take the stopped run as finished and go on evaluating it
    out_dir = tmp_path / "proof"
    proc = start(["bench", "learning", "ppo-room1", "--steps", "1000000", "--out", str(out_dir)])
    wait_for(out_dir / "ppo-room1" / "tensorboard", "events.*", proc)
    _, out = stop(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "stopped by SIGTERM" in out and "mean_return" not in out  # never scored
    assert RunDir(out_dir / "ppo-room1").list_checkpoints()
    assert_nothing_left(proc.pid)


SLOW_SAVE = """
import sys, time
from metabonk_gym.process import stop_on_signals, stop_exit_code
try:
    with stop_on_signals():
        print("ready", flush=True)
        time.sleep(60)
except KeyboardInterrupt:
    print("saving", flush=True)
    time.sleep(60)  # a save that takes long: a second signal must not wait for it
    sys.exit(stop_exit_code())
"""


def test_a_second_signal_during_the_save_exits_at_once() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen(
            [sys.executable, "-c", SLOW_SAVE],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            os.kill(proc.pid, signum)
            assert proc.stdout.readline().strip() == "saving"  # the first one: the save path
            sent = time.monotonic()
            os.kill(proc.pid, signum)
            assert proc.wait(timeout=10) == -signum  # killed by it, as a shell expects
            assert time.monotonic() - sent < 10
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_sigterm_stops_train_bc_keeping_the_clone_so_far(tmp_path: Path) -> None:
    # BC has no checkpoints: a stop used to lose every epoch and leave the run "running"
    dataset = f"test/stop-bc-{os.getpid()}-v0"
    recorded = subprocess.run(
        [sys.executable, "-m", "metabonk_gym.cli.main", "record", QUEST, "--dataset", dataset,
         "--episodes", "2", "--downscale", "8", "--set", "frame_stack=2"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    run_dir = tmp_path / "bc"
    proc = start(["train", "bc", QUEST, "--dataset", dataset, "--run-dir", str(run_dir),
                  "--epochs", "100000", "--no-progress", *FAST])  # fmt: skip
    wait_for(run_dir / "tensorboard", "events.*", proc)
    _, out = stop(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, out
    run = RunDir(run_dir)
    state = run.read_state()
    assert state["status"] == "interrupted" and state["epochs_done"] >= 1, state
    assert run.model.is_file()
    assert_nothing_left(proc.pid)


def test_sigterm_stops_record_keeping_the_unfinished_episode(tmp_path: Path) -> None:
    # SIGTERM used to interrupt the episode mid-step and drop it; now it ends like Ctrl-C's first
    # press: the episode stops, is saved marked truncated, and the command exits 143
    import minari

    dataset = f"test/stop-record-{os.getpid()}-v0"
    videos = tmp_path / "videos"
    # one episode, long whatever the machine's speed: a random player at one frame a step takes
    # 3,820 steps (~3 s on an idle machine) to end seed 0's; at the default frameskip its 406
    # steps could all run before the signal, which then met the next episode at step 0 (a flake)
    proc = start(["record", QUEST, "--dataset", dataset, "--agent", "random", "--episodes", "1",
                  "--set", "frameskip=1", "--max-steps", "200000", "--downscale", "8",
                  "--video", str(videos)])  # fmt: skip
    wait_for(videos, "episode_0000.mp4", proc, settle_s=0.5)  # the episode is under way
    _, out = stop(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "stopped after" in out and "saved, marked truncated" in out, out
    ds = minari.load_dataset(dataset)
    assert ds.total_episodes >= 1, out
    last = list(ds.iterate_episodes())[-1]
    assert bool(last.truncations[-1]) and not bool(last.terminations[-1])
    assert_nothing_left(proc.pid)


PBT_SPEC = """
population_size: 2
perturbation_interval: 128
total_steps: 1000000
mutations:
  learning_rate: [0.0001, 0.001]
quantile_fraction: 0.5
engine: sb3
train: {n_envs: 1, n_steps: 64, batch_size: 64, n_epochs: 1, max_episode_steps: 20, video_every: 0}
ray: {num_env_runners: 0}
"""


def test_ctrl_c_ends_tune_pbt_as_tune_does_keeps_best_and_exits_130(tmp_path: Path) -> None:
    # Ray Tune takes SIGINT for itself: the command used to exit 0 after a Ctrl-C (and SIGTERM
    # interrupted `fit`, leaving no best/); now both end Tune's loop gracefully, best/ is written
    # from the members' last checkpoints, and the shell's code comes back
    pbt = tmp_path / "pbt.yaml"
    pbt.write_text(PBT_SPEC)
    run_dir = tmp_path / "pbt"
    proc = start(["tune", "pbt", QUEST, "--run-dir", str(run_dir), "--pbt", str(pbt)])
    wait_for(run_dir / "tune", "*/checkpoint_000001", proc)  # a member saved twice
    _, out = stop(proc, signal.SIGINT)
    assert proc.returncode == 128 + signal.SIGINT, out
    assert "stopped by SIGINT" in out, out
    assert (run_dir / "best" / "model.zip").is_file(), out
    assert_nothing_left(proc.pid)
