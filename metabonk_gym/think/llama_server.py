"""Find or build llama.cpp's `llama-server`, the batching engine behind `metabonk serve-vlm`.

What: `find_llama_server(explicit)` returns the binary to run: `explicit` (`--server-binary`),
else `$METABONK_LLAMA_SERVER`, else the build cached for the installed llama-cpp-python version
(`cached_binary()`, under `${XDG_CACHE_HOME:-~/.cache}/metabonk/llama-server-VERSION/`), else
`llama-server` on the PATH; None when there is none. `build_llama_server()` downloads the
llama-cpp-python sdist of the installed version with pip, builds the CMake target `llama-server`
of the llama.cpp it vendors (static, so the one file can be cached) and installs it atomically;
it does nothing when the cached binary exists. `scripts/setup.sh think` and `dev` run
`python -m metabonk_gym.think.llama_server build`.
Why: llama-cpp-python's own server answers one request at a time; llama.cpp's server batches
requests from many envs over `--parallel` slots, and building it from the same vendored sources
keeps the GGUF support identical to the in-process engine.

>>> cached_binary("0.3.36", cache_home="/tmp/cache").as_posix()
'/tmp/cache/metabonk/llama-server-0.3.36/llama-server'
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from metabonk_gym.errors import LlamaServerNotFound as LlamaServerNotFound  # re-exported
from metabonk_gym.errors import MetabonkError

#: Environment variable naming a llama-server binary to use.
ENV_VAR = "METABONK_LLAMA_SERVER"
BINARY = "llama-server"
#: CMake options for a CPU build of the server alone; `$CMAKE_ARGS` adds more (-DGGML_CUDA=on).
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
)


def llama_cpp_python_version() -> str | None:
    """The installed llama-cpp-python version (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return None


def cache_root(cache_home: str | os.PathLike[str] | None = None) -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/metabonk` (or under `cache_home`)."""
    home = cache_home or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(home).expanduser() / "metabonk"


def cached_binary(
    version: str | None = None, cache_home: str | os.PathLike[str] | None = None
) -> Path:
    """Where the build for llama-cpp-python `version` (default: the installed one) is cached."""
    version = version or llama_cpp_python_version() or "unknown"
    return cache_root(cache_home) / f"llama-server-{version}" / BINARY


def find_llama_server(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The llama-server to run (see the module docstring); raises when `explicit` or
    `$METABONK_LLAMA_SERVER` names a file that is not an executable."""
    for given, what in ((explicit, "--server-binary"), (os.environ.get(ENV_VAR), ENV_VAR)):
        if given:
            path = Path(given).expanduser()
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise LlamaServerNotFound(
                    f"{what} names {path}, which is not an executable file (give the path of a "
                    "llama-server binary, or run `scripts/setup.sh think` to build one)"
                )
            return path
    cached = cached_binary()
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    on_path = shutil.which(BINARY)
    return Path(on_path) if on_path else None


def require_llama_server(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`find_llama_server`, or a clear error saying how to get one."""
    found = find_llama_server(explicit)
    if found is None:
        raise LlamaServerNotFound(
            f"no llama-server binary: run `scripts/setup.sh think` (builds it into "
            f"{cached_binary().parent}), pass --server-binary PATH or set {ENV_VAR}, or use "
            "--engine python (llama-cpp-python's serial server)"
        )
    return found


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One build per cache folder at a time (two setups running at once wait for each other)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: The longest one build step (download, configure, compile) may take; a cold build on 2 cores
#: takes 6-17 minutes. `METABONK_BUILD_TIMEOUT_S` raises it for slow machines.
BUILD_STEP_TIMEOUT_S = float(os.environ.get("METABONK_BUILD_TIMEOUT_S", "5400"))


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    print("+ " + shlex.join(cmd), file=sys.stderr, flush=True)
    try:
        code = subprocess.run(cmd, cwd=cwd, timeout=BUILD_STEP_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired as exc:
        raise MetabonkError(
            f"{shlex.join(cmd)} did not finish within {BUILD_STEP_TIMEOUT_S:g} s and was stopped; "
            "set METABONK_BUILD_TIMEOUT_S to allow more"
        ) from exc
    if code != 0:
        raise MetabonkError(f"{shlex.join(cmd)} failed with exit code {code}")


def build_llama_server(
    version: str | None = None,
    cache_home: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> Path:
    """Build and cache llama-server from the llama-cpp-python `version` sdist (default: the
    installed version); return the cached binary. Skipped when it exists (unless `force`).
    Progress (pip, CMake) goes to stderr; about 6 minutes on 2 cores."""
    version = version or llama_cpp_python_version()
    if version is None:
        raise MetabonkError(
            "llama-cpp-python is not installed, so there is no version to build llama-server "
            "for: pip install 'metabonk-gym[think]' first"
        )
    target = cached_binary(version, cache_home)
    with _locked(target.parent):
        if target.is_file() and os.access(target, os.X_OK) and not force:
            print(f"llama-server {version} is cached: {target}", file=sys.stderr)
            return target
        with tempfile.TemporaryDirectory(prefix="metabonk-llama-server-") as tmp:
            work = Path(tmp)
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-binary",
                    ":all:",
                    "--no-deps",
                    "-d",
                    str(work),
                    f"llama-cpp-python=={version}",
                ]
            )
            sdists = sorted(work.glob("llama_cpp_python-*.tar.gz"))
            if not sdists:
                raise MetabonkError(f"pip downloaded no llama-cpp-python {version} sdist")
            with tarfile.open(sdists[0]) as archive:
                archive.extractall(work, filter="data")
            source = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"), None)
            if source is None or not (source / "CMakeLists.txt").is_file():
                raise MetabonkError(f"{sdists[0].name} vendors no llama.cpp sources")
            build = work / "build"
            extra = shlex.split(os.environ.get("CMAKE_ARGS", ""))
            _run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_OPTIONS, *extra])
            _run(["cmake", "--build", str(build), "--target", BINARY, "--config", "Release"])
            built = build / "bin" / BINARY
            if not built.is_file():
                raise MetabonkError(f"the build produced no {built}")
            staged = target.with_name(f".{BINARY}.installing")
            shutil.copy2(built, staged)
            staged.chmod(0o755)
            os.replace(staged, target)
    print(f"llama-server {version} built: {target}", file=sys.stderr)
    return target


def main(argv: list[str] | None = None) -> int:
    """`python -m metabonk_gym.think.llama_server build [--force] | path`."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["build"]:
        print(build_llama_server(force="--force" in args))
        return 0
    if args[:1] == ["path"]:
        found = find_llama_server()
        print(found if found is not None else "")
        return 0 if found is not None else 1
    print(
        "usage: python -m metabonk_gym.think.llama_server build [--force] | path", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
