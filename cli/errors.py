"""The one place where the package's errors become what the `metabonk` command prints.

A `MetabonkError` (bad input, a file refused, a run that failed) is printed as one line,
`error: <what and how to fix>`, on stderr, and the command exits with the error's `exit_code`
(2 unless the error says otherwise: `TrainingFailed` exits with 1). `one_line_errors` wraps every
registered command (`guard_commands` in cli/main.py): the CLI's one error path, so commands and
the helpers they call raise `MetabonkError` and never print errors themselves.

Bad command-line input that click finds itself (a missing argument, a bad choice, `--steps abc`,
an unknown option or command, a `typer.BadParameter` from a callback) takes the same path: the
`metabonk` group is a `OneLineErrorsGroup`, which prints it as one `error:` line naming the
command's `--help`, exit code 2, instead of typer's boxed usage panel.

>>> from typer.testing import CliRunner
>>> demo = typer.Typer(cls=OneLineErrorsGroup)
>>> @demo.command()
... def run(steps: int = 1) -> None: ...
>>> @demo.command()
... def other() -> None: ...
>>> result = CliRunner().invoke(demo, ["run", "--steps", "abc"], prog_name="demo")
>>> result.exit_code, len(result.output.splitlines()), result.output.startswith("error: Invalid value")
(2, 1, True)
>>> result.output.rstrip().endswith("; try 'demo run --help'")
True

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from metabonk_gym.errors import MetabonkError

F = TypeVar("F", bound=Callable[..., Any])

#: The exceptions click raises for bad command-line input (`UsageError`, `BadParameter`, ...):
#: typer vendors click and bases them on its public `TyperException`; an older typer raised the
#: `click` package's own.
USAGE_ERRORS: tuple[type[Exception], ...] = tuple(
    cls for cls in (getattr(typer, "TyperException", None),) if cls is not None
)
try:
    import click

    USAGE_ERRORS += (click.ClickException,)
except ImportError:  # typer without the click package: its vendored errors are enough
    pass


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


def usage_error_line(exc: Exception) -> str:
    """One line for a click usage error: its message and, when click knows the command, a
    pointer to that command's `--help` (the usage text itself is one `--help` away)."""
    format_message = getattr(exc, "format_message", None)
    message = one_line(format_message() if callable(format_message) else str(exc)).rstrip(".")
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None)
    return f"{message}; try '{path} --help'" if path else message


@contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Turn click's usage errors raised inside into `exit_with_error` (one line, click's exit
    code: 2 for every usage error). A bare group's "no arguments: show the help" passes on."""
    try:
        yield
    except USAGE_ERRORS as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help page, as typer prints it
            raise
        exit_with_error(MetabonkError(usage_error_line(exc)), int(getattr(exc, "exit_code", 2)))


class OneLineErrorsGroup(TyperGroup):
    """A typer group (`typer.Typer(cls=OneLineErrorsGroup)`) whose usage errors are one line.

    Why a group class: `cls` is typer's documented hook for the click group behind an app, and
    click raises these errors while it parses (`make_context`: this group's options) or while it
    invokes (`invoke`: every sub-group's and command's parsing, parameter callbacks and bodies
    run inside the root's `invoke`), so catching them in these two methods of the root covers
    every command without patching typer's or click's internals (typer prints them itself, as
    a rich panel, only after they leave the group).
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        with one_line_usage_errors():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with one_line_usage_errors():
            return super().invoke(ctx)


def one_line_errors(fn: F) -> F:
    """`fn` (a command) with its `MetabonkError`s, path `OSError`s and click usage errors (a
    `typer.BadParameter` raised in its body) turned into `exit_with_error` (one line, exit
    code 2)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with one_line_usage_errors():
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
