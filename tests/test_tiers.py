"""Test tiers (conftest.py at the root): a marker's missing need skips with its reason, and
METABONK_STRICT=1 turns every skip into a failure while the rest of the suite still runs. Checked
by running pytest on a small suite with the project's conftest.py and markers."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_root_conftest() -> ModuleType:
    """The root conftest.py as a module of its own name (`conftest` is ambiguous in sys.modules)."""
    spec = importlib.util.spec_from_file_location("metabonk_tiers", ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tiers = _load_root_conftest()

SUITE = {
    "test_needs.py": """
        import pytest

        @pytest.mark.toolchain
        def test_rebuild():
            pass

        @pytest.mark.net
        def test_socket():
            pass

        def test_plain():
            pass

        def test_skips_itself():
            pytest.skip("no frobnicator here")

        @pytest.mark.xfail(reason="known", strict=True)
        def test_known_bug():
            assert False
    """,
    "test_whole_module_skipped.py": """
        import pytest

        pytest.importorskip("no_such_module_anywhere")

        def test_never():
            pass
    """,
    "test_needs_pygame.py": """
        import pygame  # hidden below: an optional dependency that is not installed

        def test_play():
            pass
    """,
    "test_after.py": """
        def test_still_runs():
            pass
    """,
}


def run_suite(tmp_path: Path, strict: bool) -> tuple[int, dict[str, str], str]:
    """Run SUITE with the project's conftest.py and an empty PATH for tools (no toolchain)."""
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    markers = "\n".join(f"    {name}: x" for name in tiers.REQUIREMENTS)
    (tmp_path / "pytest.ini").write_text(f"[pytest]\nmarkers =\n{markers}\n")
    for name, code in SUITE.items():
        (tmp_path / name).write_text(textwrap.dedent(code))
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PATH"] = str(tmp_path / "no-tools")
    hidden = tmp_path / "hidden" / "pygame"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pygame'\", name='pygame')\n"
    )
    env["PYTHONPATH"] = str(tmp_path / "hidden")
    env["METABONK_STRICT"] = "1" if strict else "0"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist"]
        + ["-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcomes = {}
    for line in out.stdout.splitlines():
        match = re.match(r"\S+::(\w+) (PASSED|FAILED|SKIPPED|XFAIL|ERROR)", line)
        if match:  # -v: "file::test OUTCOME"; a failed setup reads ERROR
            outcomes[match.group(1)] = match.group(2)
    return out.returncode, outcomes, out.stdout + out.stderr


def test_a_missing_need_skips_with_its_reason(tmp_path: Path) -> None:
    code, outcomes, output = run_suite(tmp_path, strict=False)
    assert code == 0, output
    assert outcomes["test_rebuild"] == "SKIPPED", output
    assert "[toolchain] needs the GBA toolchain (arm-none-eabi-gcc, make not on PATH)" in output
    assert outcomes["test_socket"] == outcomes["test_plain"] == "PASSED", output
    assert outcomes["test_skips_itself"] == "SKIPPED" and outcomes["test_known_bug"] == "XFAIL"
    assert outcomes["test_still_runs"] == "PASSED", output
    assert (
        "needs pygame: pip install 'metabonk-gym[play]'" in output and "test_play" not in outcomes
    )


def test_strict_mode_fails_every_skip_and_runs_everything(tmp_path: Path) -> None:
    code, outcomes, output = run_suite(tmp_path, strict=True)
    assert code == 1, output
    assert outcomes["test_rebuild"] == "ERROR", output  # failed in setup
    assert outcomes["test_skips_itself"] == "FAILED", output
    assert "METABONK_STRICT=1 makes every skip a failure" in output
    assert "[toolchain] needs the GBA toolchain" in output and "no frobnicator here" in output
    assert re.search(r"ERROR \S*test_whole_module_skipped\.py", output), output
    assert "no_such_module_anywhere" in output
    assert re.search(r"ERROR \S*test_needs_pygame\.py", output), output
    assert outcomes["test_known_bug"] == "XFAIL", "an expected failure is not a skip"
    assert outcomes["test_socket"] == outcomes["test_plain"] == "PASSED", output
    assert outcomes["test_still_runs"] == "PASSED", "a skipped module must not stop the run"


def test_every_tier_marker_is_registered() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    registered = {line.split(":")[0] for line in config["ini_options"]["markers"]}
    assert set(tiers.REQUIREMENTS) <= registered
    assert "--doctest-modules" in config["ini_options"]["addopts"]
    assert {"metabonk_gym", "cli", "wrappers", "rewards"} <= set(config["ini_options"]["testpaths"])


def test_doctests_are_collected_under_installed_names() -> None:
    """pytest itself would import `wrappers/vram.py` as a bare `wrappers.vram` (a second copy)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-p", "no:xdist", "wrappers/vram.py", "cli/skyemu.py", "metabonk_gym/process.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for node in (
        "wrappers/vram.py::metabonk_gym.wrappers.vram.decode_display",
        "cli/skyemu.py::metabonk_gym.cli.skyemu",
        "metabonk_gym/process.py::metabonk_gym.process",
    ):
        assert node in out.stdout, out.stdout


def test_doctests_import_mapped_folders_under_their_installed_names() -> None:
    assert (
        tiers.installed_module_name(ROOT / "wrappers" / "vram.py") == "metabonk_gym.wrappers.vram"
    )
    assert tiers.installed_module_name(ROOT / "cli" / "__init__.py") == "metabonk_gym.cli"
    assert tiers.installed_module_name(ROOT / "metabonk_gym" / "gba" / "env.py") == (
        "metabonk_gym.gba.env"
    )
    assert tiers.installed_module_name(ROOT / "tests" / "test_tiers.py") is None


@pytest.mark.skipif(
    os.environ.get("METABONK_STRICT", "") in ("", "0"), reason="only CI must have everything"
)
def test_ci_has_every_need() -> None:
    """Under METABONK_STRICT=1 every tier's need is there (a clear list of what is not)."""
    missing = {
        name: reason
        for name, check in tiers.REQUIREMENTS.items()
        if (reason := check(pytest.mark.llm("llama-server").mark)) is not None
    }
    assert not missing, missing
