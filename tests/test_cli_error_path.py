"""The CLI has one error path: every command is wrapped by `one_line_errors` (`guard_commands`
in cli/main.py), which prints a `MetabonkError` as one `error:` line with exit code 2.
`guarded` only stops long work on a signal; commands raise, they never print errors themselves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from metabonk_gym.cli.train import guarded

from metabonk_gym.errors import MetabonkError

ROOT = Path(__file__).resolve().parent.parent
#: Modules that call `exit_with_error` themselves, and why.
OWN_EXIT = {"think.py": "serve-vlm: a server that failed after good input exits 1, not 2"}


def test_guarded_lets_errors_through_to_the_one_handler() -> None:
    with pytest.raises(MetabonkError, match="no such run"):
        guarded(lambda: (_ for _ in ()).throw(MetabonkError("no such run")))
    assert guarded(lambda: 3) == 3


def test_no_command_prints_its_own_error_line() -> None:
    own = re.compile(r"exit_with_error\(|print\(f?[\"']error: ")
    found = sorted(
        path.name
        for path in (ROOT / "cli").glob("*.py")
        if path.name != "errors.py" and own.search(path.read_text())
    )
    assert found == sorted(OWN_EXIT)
