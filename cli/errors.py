"""The one place where the package's errors become what the `metabonk` command prints.

A `MetabonkError` (bad input, a file refused, a run that failed) is printed as one line,
`error: <what and how to fix>`, on stderr, and the command exits with the error's `exit_code`
(2 unless the error says otherwise: `TrainingFailed` exits with 1). `one_line_errors` wraps every
registered command (`guard_commands` in cli/main.py): the CLI's one error path, so commands and
the helpers they call raise `MetabonkError` and never print errors themselves.

>>> import typer
>>> from metabonk_gym.errors import MetabonkError
>>> try:
...     exit_with_error(MetabonkError("no such thing;\\n  pick another"))
... except typer.Exit as stop:
...     stop.exit_code
2
>>> one_line("a\\n   b")
'a b'

Text is printed literally, never read as rich markup: a message holding `[/x]` or `[red]` (a
path, a user's file name) prints as it is (every console of the CLI is `plain_console()`).

>>> plain_console().print("clip[red] final[/x].mp4")
clip[red] final[/x].mp4
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from metabonk_gym.errors import MetabonkError

F = TypeVar("F", bound=Callable[..., Any])


def plain_console(stderr: bool = False) -> Console:
    """A rich console that prints text as given (`markup=False`): messages and paths come
    from users and files, and rich would read `[...]` in them as markup (or die on `[/x]`)."""
    return Console(stderr=stderr, markup=False)


err_console = plain_console(stderr=True)


def one_line(text: str) -> str:
    """`text` with its line breaks and runs of spaces folded into single spaces."""
    return " ".join(str(text).split())


def exit_with_error(exc: BaseException, code: int | None = None) -> NoReturn:
    """Print `exc` as one `error:` line on stderr and exit with `code`, else its `exit_code`
    (default 2)."""
    line = Text.assemble(("error:", "bold red"), " ", one_line(str(exc)))
    err_console.print(line, highlight=False, soft_wrap=True)
    raise typer.Exit(code if code is not None else int(getattr(exc, "exit_code", 2))) from None


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `message` as one `error:` line on stderr and exit with `code` (a usage error
    found by the command itself)."""
    exit_with_error(MetabonkError(message), code)


def path_error(exc: OSError) -> str | None:
    """One line for an `OSError` about a path (a read-only folder, a file where a folder is
    expected, `/proc/...`, a full disk), naming the path; None for other OS errors (sockets).

    >>> path_error(PermissionError(13, "Permission denied", "/proc/run/model.pt"))
    'cannot write or read /proc/run/model.pt: Permission denied; choose another path'
    >>> path_error(ConnectionRefusedError(111, "Connection refused")) is None
    True
    """
    if exc.filename is None:
        return None
    names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n is not None)
    reason = _REASONS.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return f"cannot write or read {names}: {reason}; choose another path"


_REASONS = {
    errno.EEXIST: "a file is there where a folder is needed",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "it is a folder, not a file",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
}


def one_line_errors(fn: F) -> F:
    """`fn` (a command) with its `MetabonkError`s and path `OSError`s turned into
    `exit_with_error` (one line, exit code 2)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MetabonkError as exc:
            exit_with_error(exc)
        except OSError as exc:
            if (line := path_error(exc)) is None:
                raise
            exit_with_error(MetabonkError(line))

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
