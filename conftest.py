"""Test tiers and doctests for the whole tree (tests/ and every module's doctests).

Tiers: a test declares what it needs with a marker (registered in pyproject.toml):
`toolchain` (gcc-arm-none-eabi and make, for ROM rebuilds), `llm` (llama-cpp-python and gguf;
`@pytest.mark.llm("llama-server")` also needs a llama-server binary), `net` (loopback sockets
and servers), `browser` (a headless chromium, `tests/browser.py`), `slow` (long runs; deselect
with `-m "not slow"`). Where a need is missing the test is skipped with the reason and the fix. With `METABONK_STRICT=1` (CI: `.ci/run`) every skip, of
a test, a doctest or a whole module, is a failure instead, and the rest of the suite still runs.
A test module that cannot import an optional dependency (`OPTIONAL_DEPS`) is skipped the same way.

Doctests: `--doctest-modules` collects every module of the package (testpaths in pyproject.toml).
`cli/`, `wrappers/`, `rewards/` and `savestates/` install as `metabonk_gym.*`, so their doctests
import them under those names (pytest would import `wrappers.x`, a second copy) and so do those
of `metabonk_gym/` (no sys.path change); a game folder's `game.py` is imported as
`GameData(folder).module()` does. This file sits at the root so that its hooks see all of them.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import socket
from collections.abc import Callable, Generator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _pytest.doctest import DoctestModule

ROOT = Path(__file__).resolve().parent
STRICT = os.environ.get("METABONK_STRICT", "") not in ("", "0")
#: Source folder -> installed package (pyproject.toml's package-dir).
INSTALLED_AS = {
    "metabonk_gym": "metabonk_gym",
    "cli": "metabonk_gym.cli",
    "wrappers": "metabonk_gym.wrappers",
    "rewards": "metabonk_gym.rewards",
    "savestates": "metabonk_gym.savestates",
}


# ---------------------------------------------------------------------- what each tier needs
@cache
def _missing_toolchain() -> str | None:
    missing = [tool for tool in ("arm-none-eabi-gcc", "make") if shutil.which(tool) is None]
    if not missing:
        return None
    return (
        f"needs the GBA toolchain ({', '.join(missing)} not on PATH): apt-get install "
        "gcc-arm-none-eabi libnewlib-arm-none-eabi make, or scripts/setup.sh dev"
    )


@cache
def _missing_modules(*names: str) -> str | None:
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return f"needs {', '.join(missing)}: pip install 'metabonk-gym[think]', or scripts/setup.sh dev"


@cache
def _missing_llama_server() -> str | None:
    try:
        from metabonk_gym.think.llama_server import find_llama_server

        found = find_llama_server(None)
    except Exception as exc:  # a broken lookup is a missing server, with the reason
        return f"needs a llama-server binary (lookup failed: {exc})"
    if found is None:
        return (
            "needs a llama-server binary: python -m metabonk_gym.think.llama_server build, "
            "or set METABONK_LLAMA_SERVER"
        )
    return None


@cache
def _missing_real_model() -> str | None:
    try:
        from metabonk_gym.think.models import default_model_path

        default_model_path()
    except Exception as exc:  # ModelNotInstalledError says how to install it
        return f"needs the default model: {exc}"
    return None


def _missing_llm(marker: pytest.Mark) -> str | None:
    missing = _missing_modules("llama_cpp", "gguf")
    if missing is None and "llama-server" in marker.args:
        missing = _missing_llama_server()
    if missing is None and "real-model" in marker.args:
        missing = _missing_real_model()
    if missing is None and "finetune" in marker.args:
        missing = _missing_modules("torch", "transformers", "peft")
    return missing


@cache
def _missing_net() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen(1)
    except OSError as exc:
        return f"needs TCP sockets on loopback (127.0.0.1): {exc}"
    return None


@cache
def _missing_browser() -> str | None:
    """A headless chromium (tests/browser.py, the one helper that starts it)."""
    helper = ROOT / "tests" / "browser.py"
    spec = importlib.util.spec_from_file_location("metabonk_tests_browser", helper)
    if spec is None or spec.loader is None:
        return "needs tests/browser.py (the headless-browser helper)"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reason: str | None = module.missing_browser()
    return reason


#: Marker -> what is missing for a test carrying it (None: nothing).
REQUIREMENTS: dict[str, Callable[[pytest.Mark], str | None]] = {
    "toolchain": lambda _: _missing_toolchain(),
    "llm": _missing_llm,
    "net": lambda _: _missing_net(),
    "browser": lambda _: _missing_browser(),
    "slow": lambda _: None,
}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test whose tier needs something missing (a failure under METABONK_STRICT=1)."""
    for name, missing in REQUIREMENTS.items():
        marker = item.get_closest_marker(name)
        reason = missing(marker) if marker is not None else None
        if reason is not None:
            pytest.skip(f"[{name}] {reason}")


# ---------------------------------------------------------------------- skips fail in CI
def _strict_message(longrepr: Any) -> str:
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr
    return f"METABONK_STRICT=1 makes every skip a failure; this one was skipped: {reason}"


def pytest_configure(config: pytest.Config) -> None:
    if STRICT:
        # A module skipped as a whole fails its collection: the other modules still run.
        config.option.continue_on_collection_errors = True


def pytest_report_header(config: pytest.Config) -> str:
    return f"metabonk tiers: METABONK_STRICT={'1 (skips fail)' if STRICT else '0 (skips skip)'}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if STRICT and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = _strict_message(report.longrepr)
    return report


#: Optional dependencies -> the extra that installs them: a test module that cannot import one
#: is skipped as a whole, with the fix (and fails under METABONK_STRICT=1, like any skip).
OPTIONAL_DEPS = {
    "torch": "train",
    "stable_baselines3": "train",
    "tensorboard": "train",
    "minari": "train",
    "h5py": "train",
    "imageio": "train",
    "tqdm": "train",
    "pygame": "play",
    "llama_cpp": "think",
    "gguf": "think",
    "jsonschema": "think",
    "httpx": "think",
    "ray": "ray",
    "ladybug": "memory",
    "neo4j": "memory",
    "sheeprl": "world",
}
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def _missing_optional_dep(report: pytest.CollectReport) -> str | None:
    match = _NO_MODULE.search(str(report.longrepr))
    if match is None or match.group(1).split(".")[0] not in OPTIONAL_DEPS:
        return None
    name = match.group(1).split(".")[0]
    return (
        f"needs {name}: pip install 'metabonk-gym[{OPTIONAL_DEPS[name]}]', or scripts/setup.sh dev"
    )


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    reason = _missing_optional_dep(report) if report.failed else None
    if reason is not None:
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), 0, f"Skipped: {reason}")
    if STRICT and report.skipped:
        report.outcome = "failed"
        report.longrepr = _strict_message(report.longrepr)
    return report


# ---------------------------------------------------------------------- doctests, installed names
def installed_module_name(path: Path) -> str | None:
    """`metabonk_gym.wrappers.vram` for `wrappers/vram.py`; None outside the package's folders."""
    try:
        rel = path.resolve().relative_to(ROOT)
    except ValueError:
        return None
    if rel.suffix != ".py" or rel.parts[0] not in INSTALLED_AS:
        return None
    parts = list(rel.with_suffix("").parts[1:])
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join([INSTALLED_AS[rel.parts[0]], *parts])


def _is_game_module(path: Path) -> bool:
    """A game folder's `game.py` (`metabonk_gym/games/<Game>/game.py`, not a package)."""
    return path.name == "game.py" and not (path.parent / "__init__.py").exists()


class InstalledDoctestModule(DoctestModule):
    """Doctests of a package module, imported under its installed name."""

    def _getobj(self) -> ModuleType:
        if _is_game_module(self.path):
            from metabonk_gym.gamedata import GameData

            module = GameData(self.path.parent).module()
            assert module is not None
            return module
        name = installed_module_name(self.path)
        assert name is not None
        return importlib.import_module(name)


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(
    file_path: Path, parent: pytest.Collector
) -> Generator[None, list[Any], list[Any]]:
    collected = yield
    if installed_module_name(file_path) is None:
        return collected
    return [
        InstalledDoctestModule.from_parent(parent, path=file_path)
        if type(node) is DoctestModule
        else node
        for node in collected
    ]
