"""Several embedded mGBA cores in one process: each from its own copy of stable-retro's extension
module and of the mGBA core library.

stable-retro refuses a second emulator per process because the extension keeps the running core
in static variables, and the libretro core keeps its own. A copy of both files loaded from
another path gets its own statics (the dynamic loader maps each path separately), so core number
`k` runs on copy `k`. pybind11 would refuse to register the copy's classes a second time in its
process-wide registry, so each copy is imported with a registry of its own (pybind11 keeps the
registry in a `builtins` attribute, which is set aside while the copy imports). No library does
this; the copies are cached under `~/.cache/metabonk/retro-copies/` and reused by every process.
`tests/test_core_copies.py` proves that cores on copies are independent and deterministic.

>>> retro_module(0).__name__
'stable_retro._retro'
>>> slots = CoreSlots()
>>> first, second = slots.take(), slots.take()
>>> (first, second), slots.release(first), slots.take()
((0, 1), None, 0)
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import os
import shutil
import threading
from pathlib import Path
from types import ModuleType

#: Cores in one process at most (each copy maps another ~20 MB of code).
MAX_CORES = 64

_lock = threading.Lock()
_modules: dict[int, ModuleType] = {}


def _cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "metabonk" / "retro-copies"


def _copy_atomically(source: Path, dest: Path) -> None:
    if dest.exists() and dest.stat().st_size == source.stat().st_size:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.copy2(source, tmp)
    os.replace(tmp, dest)


def _load_copy(slot: int) -> ModuleType:
    import stable_retro

    package = Path(stable_retro.__file__).parent
    original = Path(stable_retro._retro.__file__)  # type: ignore[attr-defined]
    version = (
        (package / "VERSION.txt").read_text().strip() if (package / "VERSION.txt").exists() else "x"
    )
    folder = _cache_root() / f"{version}-{original.stat().st_size}" / str(slot)
    extension = folder / original.name
    _copy_atomically(original, extension)
    for name in ("mgba_libretro.so", "mgba.json"):
        _copy_atomically(package / "cores" / name, folder / "cores" / name)
    name = f"_metabonk_retro_{slot}._retro"  # the init function is found by the last part
    loader = importlib.machinery.ExtensionFileLoader(name, str(extension))
    spec = importlib.util.spec_from_file_location(name, str(extension), loader=loader)
    assert spec is not None
    saved = {k: v for k, v in vars(builtins).items() if k.startswith("__pybind11_internals")}
    for key in saved:
        delattr(builtins, key)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    finally:
        for key in [k for k in vars(builtins) if k.startswith("__pybind11_internals")]:
            delattr(builtins, key)
        for key, value in saved.items():
            setattr(builtins, key, value)
    module.core_path(str(folder / "cores"))
    module.RetroEmulator.load_core_info((folder / "cores" / "mgba.json").read_text())
    return module


def retro_module(slot: int) -> ModuleType:
    """stable-retro's extension module for core number `slot` of this process (0: the installed
    one; others: private copies, made and cached on first use)."""
    if not 0 <= slot < MAX_CORES:
        raise ValueError(f"core slot must be in 0..{MAX_CORES - 1}, not {slot}")
    if slot == 0:
        import stable_retro

        return stable_retro._retro  # type: ignore[attr-defined,no-any-return]
    with _lock:
        module = _modules.get(slot)
        if module is None:
            module = _modules[slot] = _load_copy(slot)
        return module


class CoreSlots:
    """Which core slots of this process are in use: `take()` the lowest free one, `release()` it
    when its emulator closes."""

    def __init__(self) -> None:
        self._used: set[int] = set()
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            for slot in range(MAX_CORES):
                if slot not in self._used:
                    self._used.add(slot)
                    return slot
        raise RuntimeError(f"at most {MAX_CORES} embedded cores run in one process")

    def release(self, slot: int) -> None:
        with self._lock:
            self._used.discard(slot)


#: The slots of this process's cores.
SLOTS = CoreSlots()
