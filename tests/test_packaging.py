"""The package layout: mapped folders install inside metabonk_gym, and the hand-kept package list
in pyproject.toml is complete."""

from __future__ import annotations

import importlib
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed() -> None:
    config = _pyproject()["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = config["package-dir"]
    found = set()
    for package, folder in mapping.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if "__pycache__" in rel.parts:
                continue
            found.add(".".join([package, *rel.parts]) if rel.parts else package)
    assert found - listed == set(), (
        "packages missing from pyproject.toml [tool.setuptools] packages"
    )
    assert listed - found == set(), "pyproject.toml lists packages that do not exist"


def test_mapped_folders_import_inside_metabonk_gym() -> None:
    for name in (
        "metabonk_gym.cli",
        "metabonk_gym.wrappers",
        "metabonk_gym.rewards",
        "metabonk_gym.savestates",
    ):
        module = importlib.import_module(name)
        assert module.__name__ == name


def test_no_bare_top_level_modules_are_importable() -> None:
    import importlib.util

    for bare in ("cli", "wrappers", "rewards"):
        spec = importlib.util.find_spec(bare)
        # pytest puts the repo root on sys.path only if tests import from it; an installed bare
        # module would live in site-packages.
        assert spec is None or "site-packages" not in str(spec.origin), (
            f"bare module {bare} is installed"
        )


def test_console_script_points_at_the_typer_app() -> None:
    target = _pyproject()["project"]["scripts"]["metabonk"]
    module, attr = target.split(":")
    app = getattr(importlib.import_module(module), attr)
    assert callable(app)
