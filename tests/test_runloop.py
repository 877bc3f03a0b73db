"""The training-run skeleton (`metabonk_gym.runloop.RunLoop`): checkpoints, Ctrl-C, failures,
the time limit and a resumed run's TensorBoard, on real event files."""

from __future__ import annotations

from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from metabonk_gym.runloop import RunLoop


def _scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(folder))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_ctrl_c_saves_the_steps_done_then_calls_on_interrupt_and_goes_on() -> None:
    events: list[tuple[str, int]] = []
    loop = RunLoop(
        total=10,
        checkpoint=lambda s: events.append(("checkpoint", s)),
        checkpoint_every=4,
        on_interrupt=lambda s: events.append(("interrupted", s)),
        on_error=lambda exc: events.append(("error", 0)),
    )
    with pytest.raises(KeyboardInterrupt), loop:
        for step in loop.steps():
            if step == 6:  # mid-step: step 6 is not done
                raise KeyboardInterrupt
    assert events == [("checkpoint", 4), ("checkpoint", 5), ("interrupted", 5)]
    assert loop.status == "interrupted" and loop.step == 5


def test_a_failure_calls_on_error_and_saves_nothing() -> None:
    events: list[object] = []
    loop = RunLoop(total=3, checkpoint=events.append, on_error=events.append)
    with pytest.raises(ValueError, match="broken"), loop:
        for _ in loop.steps():
            raise ValueError("broken")
    assert len(events) == 1 and isinstance(events[0], ValueError) and loop.status == "failed"


def test_the_time_limit_stops_with_a_checkpoint_and_a_line() -> None:
    saved: list[int] = []
    lines: list[str] = []
    loop = RunLoop(total=100, checkpoint=saved.append, time_limit_s=0.0, log=lines.append)
    with loop:
        done = list(loop.steps())
    assert done == [1] and saved == [1] and loop.status == "stopped"
    assert lines == ["time limit of 0.0 s reached at step 1"]


def test_a_resumed_run_starts_after_its_checkpoint_and_purges_later_scalars(
    tmp_path: Path,
) -> None:
    board = tmp_path / "tensorboard"
    with (loop := RunLoop(total=6, tensorboard=board)):
        for step in loop.steps():
            loop.report(step, {"loss": float(step)}, prefix="t/")
    saved: list[int] = []
    resumed = RunLoop(total=8, start=4, tensorboard=board, checkpoint=saved.append)
    steps = []
    with resumed:
        for step in resumed.steps():
            steps.append(step)
            resumed.report(step, {"loss": 10.0 + step, "none": None}, prefix="t/")
    assert steps == [5, 6, 7, 8] and saved == [8]
    assert _scalars(board, "t/loss") == [
        (1, 1.0),
        (2, 2.0),
        (3, 3.0),
        (4, 4.0),
        (5, 15.0),
        (6, 16.0),
        (7, 17.0),
        (8, 18.0),
    ]


def test_a_finished_run_does_no_step_and_saves_nothing() -> None:
    saved: list[int] = []
    with (loop := RunLoop(total=3, start=3, checkpoint=saved.append)):
        assert list(loop.steps()) == []
    assert saved == [] and loop.status == "finished"
