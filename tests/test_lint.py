"""The code style the project keeps: ruff (lint and format) on the tree, mypy on the public API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_lint_and_format() -> None:
    lint = _run("ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


@pytest.mark.slow
def test_mypy_on_the_public_api(tmp_path: Path) -> None:
    # pyproject.toml [tool.mypy] names the folders: metabonk_gym, wrappers, rewards, cli.
    result = _run("mypy", "--cache-dir", str(tmp_path / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_checks_cover_the_package_and_stay_strict() -> None:
    """A folder dropped from mypy's list or a rule set dropped from ruff's would pass silently."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    folders = set(tool["setuptools"]["package-dir"].values()) - {"savestates"}  # data only
    assert folders <= set(tool["mypy"]["files"]), "mypy must check every package folder"
    assert {"E", "F", "W", "I", "UP", "B"} <= set(tool["ruff"]["lint"]["select"])
    assert not tool["ruff"].get("exclude") and not tool["ruff"].get("extend-exclude")
