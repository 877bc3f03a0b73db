"""The README's quick start and CI stay in step."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_COMMAND = "scripts/setup.sh dev && python -m pytest -n 2"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert TEST_COMMAND in readme
    assert ci.rstrip().splitlines()[-1] == TEST_COMMAND
