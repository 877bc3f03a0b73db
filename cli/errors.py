"""The one place where the package's errors become what the `metabonk` command prints.

A `MetabonkError` (bad input, a file refused, a run that failed) is printed as one line,
`error: <what and how to fix>`, on stderr, and the command exits with the error's `exit_code`
(2 unless the error says otherwise: `TrainingFailed` exits with 1). `one_line_errors` wraps every
registered command (cli/main.py), `guarded` in cli/train.py calls `exit_with_error` too.

>>> import typer
>>> from metabonk_gym.errors import MetabonkError
>>> try:
...     exit_with_error(MetabonkError("no such thing;\\n  pick another"))
... except typer.Exit as stop:
...     stop.exit_code
2
>>> one_line("a\\n   b")
'a b'
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console

from metabonk_gym.errors import MetabonkError

F = TypeVar("F", bound=Callable[..., Any])

err_console = Console(stderr=True)


def one_line(text: str) -> str:
    """`text` with its line breaks and runs of spaces folded into single spaces."""
    return " ".join(str(text).split())


def exit_with_error(exc: BaseException, code: int | None = None) -> NoReturn:
    """Print `exc` as one `error:` line on stderr and exit with `code`, else its `exit_code`
    (default 2)."""
    err_console.print(f"[bold red]error:[/] {one_line(str(exc))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code if code is not None else int(getattr(exc, "exit_code", 2))) from None


def one_line_errors(fn: F) -> F:
    """`fn` (a command) with its `MetabonkError`s turned into `exit_with_error`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MetabonkError as exc:
            exit_with_error(exc)

    wrapper.one_line_errors = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def guard_commands(app: typer.Typer) -> None:
    """Wrap every command of `app` and of its sub-apps with `one_line_errors` (once each)."""
    for info in app.registered_commands:
        if info.callback is not None and not getattr(info.callback, "one_line_errors", False):
            info.callback = one_line_errors(info.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            guard_commands(group.typer_instance)
