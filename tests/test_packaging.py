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


def test_a_normal_install_ships_code_games_and_savestates(tmp_path: Path) -> None:
    """Build the wheel, install it into a bare folder and use it from elsewhere: the mapped
    folders live inside metabonk_gym, the ROMs and savestates are package data, nothing else."""
    import os
    import subprocess
    import sys
    import zipfile

    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("metabonk_gym-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"metabonk_gym"}
    for folder in ("cli", "wrappers", "rewards"):
        for source in (ROOT / folder).glob("*.py"):
            assert f"metabonk_gym/{folder}/{source.name}" in names
    for game in ("BonkQuest", "BonkArena"):
        for data in ("rom.gba", "data.json", "scenario.json", "metadata.json", "game_card.md"):
            assert f"metabonk_gym/games/{game}/{data}" in names
        shipped = {Path(n).name for n in names if n.startswith(f"metabonk_gym/savestates/{game}/")}
        assert shipped == {p.name for p in (ROOT / "savestates" / game).glob("*.state")}
    assert "metabonk_gym/games/Megabonk/game_card.md" in names  # System 2's rules for Megabonk

    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
        + [str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "import gymnasium as gym, metabonk_gym, metabonk_gym.wrappers, metabonk_gym.cli.main\n"
        "env = gym.make('MetaBonk/BonkQuest-v0', state='room2')\n"
        "obs, info = env.reset(seed=1)\n"
        "print(metabonk_gym.__file__, env.unwrapped.rom_path, info['room'])\n"
    )
    # Run from an empty folder with only the installed copy on the path (the checkout is not).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r})\n{code}"],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert out[0].startswith(str(target)) and out[1].startswith(str(target))
    assert out[2] == "2"
