"""`RunLoop`: the part every trainer shares, so that a trainer is its loop body.

A trainer counts steps (optimizer steps, epochs or rounds) from `start` (a resumed run's) to
`total`; the loop owns what used to be written in each of them: the seed (`seed_all`), the
TensorBoard writer (scalars per step, purged past `start` on a resume), a checkpoint every
`checkpoint_every` steps and at the end, a time limit, Ctrl-C (a checkpoint, then the trainer's
`on_interrupt`, then the KeyboardInterrupt goes on), a failure hook and a progress bar.

>>> saved, lines = [], []
>>> loop = RunLoop(total=5, checkpoint=saved.append, checkpoint_every=2, log=lines.append)
>>> with loop:
...     for step in loop.steps():
...         loop.report(step, {"loss": 1.0 / step})
>>> saved, loop.step, loop.status
([2, 4, 5], 5, 'finished')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from metabonk_gym.utils import Log


def seed_all(seed: int, threads: int | None = None) -> np.random.Generator:
    """Seed torch's generator with `seed` (and set its CPU threads when given); returns numpy's
    generator of the same seed, which the trainer draws its data order from.

    >>> int(seed_all(3).integers(100)) == int(np.random.default_rng(3).integers(100))
    True
    """
    import torch

    torch.manual_seed(seed)
    if threads is not None:
        torch.set_num_threads(int(threads))
    return np.random.default_rng(seed)


@dataclass
class RunLoop:
    """Steps `start + 1 .. total` of one training run, with the run's writer, checkpoints and
    Ctrl-C. Use it as a context manager around `for step in loop.steps(): ...`.

    Args:
        total: the step count to reach (epochs or rounds for trainers that count those).
        start: steps already done (a resumed run's checkpoint).
        tensorboard: the event-file folder; `report` writes scalars there and `writer` is the
            `SummaryWriter` (images, text). None: no TensorBoard.
        checkpoint: saves a resumable checkpoint after `step` steps; called every
            `checkpoint_every` steps, after the last, when the time limit stops the run and
            on Ctrl-C.
        checkpoint_every: steps between checkpoints (0: only at the end, the time limit and
            Ctrl-C).
        time_limit_s: stop (with a checkpoint) once this many seconds have passed since `started`.
        log: progress lines (the time limit's).
        on_interrupt: called with the steps done on Ctrl-C, after the checkpoint (mark the run
            interrupted, save what the run keeps); the writer and the bar are closed first.
        on_error: called with the exception when the body fails (discard a new run's files),
            after the writer and the bar are closed.
        bar: a label: show a rich progress bar over the steps ("" for none).
        bar_keys: the reported values the bar shows beside the count.
        started: the clock (`time.monotonic`) the time limit counts from (default: entering).
    """

    total: int
    start: int = 0
    tensorboard: Path | None = None
    checkpoint: Callable[[int], Any] | None = None
    checkpoint_every: int = 0
    time_limit_s: float | None = None
    log: Log | None = None
    on_interrupt: Callable[[int], Any] | None = None
    on_error: Callable[[BaseException], Any] | None = None
    bar: str = ""
    bar_keys: tuple[str, ...] = ()
    started: float | None = None
    #: Steps done so far (`start` before the first).
    step: int = field(init=False, default=0)
    #: "running", then "finished", "stopped" (the time limit), "interrupted" or "failed".
    status: str = field(init=False, default="running")
    writer: Any = field(init=False, default=None)
    _saved: int = field(init=False, default=-1)
    _progress: Any = field(init=False, default=None)

    def __enter__(self) -> RunLoop:
        self.step = self.start
        if self.started is None:
            self.started = time.monotonic()
        if self.tensorboard is not None:
            from torch.utils.tensorboard import SummaryWriter

            purge = self.start + 1 if self.start else None
            self.writer = SummaryWriter(str(self.tensorboard), purge_step=purge)
        if self.bar:
            self._progress = _Bar(self.bar, self.total, self.start)
        return self

    @property
    def seconds(self) -> float:
        """Seconds since `started`."""
        return time.monotonic() - (self.started or 0.0)

    def steps(self) -> Iterator[int]:
        """The number of each step to do (`step + 1`): `step` counts it done when the body
        asks for the next one; checkpoints and the time limit are checked between steps."""
        while self.step < self.total:
            yield self.step + 1
            self.step += 1
            if self.checkpoint_every > 0 and self.step % self.checkpoint_every == 0:
                self.save()
            if self.time_limit_s is not None and self.seconds > float(self.time_limit_s):
                if self.log is not None:
                    self.log(f"time limit of {self.time_limit_s} s reached at step {self.step}")
                self.status = "stopped"
                break
        if self.checkpoint is not None and self._saved != self.step and self.step > self.start:
            self.save()

    def save(self) -> None:
        """Save a checkpoint of the steps done now (no-op without a `checkpoint`)."""
        if self.checkpoint is not None:
            self.checkpoint(self.step)
            self._saved = self.step

    def report(self, step: int, values: Mapping[str, float | None], prefix: str = "") -> None:
        """Write `values` (None skipped) as TensorBoard scalars `prefix + key` at `step`, and
        show the `bar_keys` among them on the progress bar."""
        if self.writer is not None:
            for key, value in values.items():
                if value is not None:
                    self.writer.add_scalar(prefix + key, value, step)
        if self._progress is not None:
            self._progress.show(step, {k: values[k] for k in self.bar_keys if k in values})

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.close()
        if self.writer is not None:
            self.writer.close()
        if error is None:
            self.status = "stopped" if self.status == "stopped" else "finished"
        elif isinstance(error, KeyboardInterrupt):
            self.status = "interrupted"
            self.save()
            if self.on_interrupt is not None:
                self.on_interrupt(self.step)
        else:
            self.status = "failed"
            if self.on_error is not None:
                self.on_error(error)


class _Bar:
    """A rich progress bar over a run's steps, with a few of its figures."""

    def __init__(self, label: str, total: int, done: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.bar = Progress(
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[extra]}"),
        )
        self.bar.start()
        self.task = self.bar.add_task(label, total=total, completed=done, extra="")

    def show(self, step: int, values: Mapping[str, float | None]) -> None:
        extra = "  ".join(f"{k} {v:.3f}" for k, v in values.items() if v is not None)
        self.bar.update(self.task, completed=step, extra=extra)

    def close(self) -> None:
        self.bar.stop()
