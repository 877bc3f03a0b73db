"""The one `error:` line of a `metabonk` command that must fail with exit code 2.

Why: every hostile-input test pins the same contract (exit code 2, one line, nothing else
printed), so it is written once.

>>> one_line_error(["eval", "NoSuch/Env-v0", "random"]).startswith("error: ")
True
"""

from __future__ import annotations

from metabonk_gym.cli.main import app
from typer.testing import CliRunner

runner = CliRunner()


def one_line_error(args: list[str], progress: bool = False) -> str:
    """Run `metabonk ARGS`; assert exit code 2 and one `error:` line, the only line printed
    unless `progress` (then progress lines such as sheeprl's "Log dir:" may come first)."""
    result = runner.invoke(app, args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert result.exit_code == 2, result.output
    assert len(errors) == 1 and (progress or len(lines) == 1), result.output
    return errors[0]
