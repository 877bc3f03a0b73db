"""CHANGELOG.md (Keep a Changelog) and the version agree: its newest release is the version
pyproject.toml and `metabonk_gym.__version__` say, releases are newest first, and the changes
users must make (issue 26, item 6) are named."""

from __future__ import annotations

import re
from pathlib import Path

import metabonk_gym
from metabonk_gym.configfile import load_config_file

ROOT = Path(__file__).resolve().parent.parent


def _releases() -> list[tuple[tuple[int, ...], str]]:
    text = (ROOT / "CHANGELOG.md").read_text()
    found = re.findall(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    return [((int(a), int(b), int(c)), day) for a, b, c, day in found]


def test_the_newest_release_is_the_packages_version() -> None:
    releases = _releases()
    assert releases and releases[-1][0] == (0, 1, 0)  # from the first release on
    assert [v for v, _ in releases] == sorted((v for v, _ in releases), reverse=True)
    assert [d for _, d in releases] == sorted((d for _, d in releases), reverse=True)
    project = load_config_file(ROOT / "pyproject.toml")["project"]
    newest = ".".join(map(str, releases[0][0]))
    assert project["version"] == newest == metabonk_gym.__version__


def test_the_renames_users_must_make_are_named() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    release = text.split("## [0.2.0]", 1)[1]  # an [Unreleased] section above may have its own
    changed = release.split("### Changed", 1)[1].split("### Added", 1)[0]
    for old, new in (("health", "hp"), ("max_health", "max_hp"), ('"frame"', '"pixels"')):
        assert old in changed and new in changed, (old, new)
    assert "PauseToThink(backend=...)" in changed and "PauseToThink(engine=...)" in changed
