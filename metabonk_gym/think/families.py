"""Which llama-cpp-python multimodal chat handler fits a vision-language GGUF.

What: `resolve_family(model_path, mmproj_path, name)` picks a `Family` (a handler class in
`llama_cpp.llama_chat_format` and the matching `--chat_format` of llama-cpp-python's server) from
a name the user gives, or from the model's file names and GGUF metadata (`general.architecture`,
`general.name`, `general.basename`).
Why: each VLM family needs its own prompt format around the image embeddings; a wrong handler
still "works" but the model sees garbage. Models the table does not know fall back to the generic
libmtmd handler, which renders the model's own chat template (right for Gemma 3, SmolVLM, Qwen3-VL,
InternVL and most recent GGUFs).

>>> resolve_family("Qwen2.5-VL-3B-Instruct-Q4_K_M.gguf", None, "auto").name
'qwen2.5-vl'
>>> resolve_family("m.gguf", None, "llava-1.6").handler
'Llava16ChatHandler'
>>> resolve_family("gemma-3-4b-it.gguf", None, "auto").server_chat_format
'mtmd'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from metabonk_gym.errors import MetabonkError
from metabonk_gym.think.models import gguf_layout_problem


@dataclass(frozen=True)
class Family:
    """A model family: its handler class name, server `--chat_format`, and name patterns."""

    name: str
    handler: str
    server_chat_format: str
    patterns: tuple[str, ...]


#: Most specific first: "llava-1.6" must win over "llava", "nanollava" over "llava".
FAMILIES: tuple[Family, ...] = (
    Family(
        "qwen2.5-vl",
        "Qwen25VLChatHandler",
        "qwen2.5-vl",
        ("qwen2.5-vl", "qwen2_5_vl", "qwen2vl", "qwen2-vl"),
    ),
    Family("minicpm-v", "MiniCPMv26ChatHandler", "minicpm-v-2.6", ("minicpm",)),
    Family("moondream2", "MoondreamChatHandler", "moondream", ("moondream",)),
    Family("nanollava", "NanoLlavaChatHandler", "nanollava", ("nanollava", "nano-llava")),
    Family(
        "llama-3-vision-alpha",
        "Llama3VisionAlphaChatHandler",
        "llama-3-vision-alpha",
        ("llama-3-vision-alpha", "llama3-vision-alpha"),
    ),
    Family(
        "llava-1.6",
        "Llava16ChatHandler",
        "llava-1-6",
        ("llava-v1.6", "llava-1.6", "llava1.6", "llava-next"),
    ),
    Family("llava-1.5", "Llava15ChatHandler", "llava-1-5", ("llava",)),
    Family("gemma4", "Gemma4ChatHandler", "gemma4", ("gemma4", "gemma-4")),
    Family(
        "mtmd",
        "MTMDChatHandler",
        "mtmd",
        ("gemma3", "gemma-3", "smolvlm", "qwen3-vl", "internvl", "pixtral", "mistral3"),
    ),
)
FAMILY_NAMES: tuple[str, ...] = tuple(f.name for f in FAMILIES)
_ALIASES = {
    "llava15": "llava-1.5",
    "llava16": "llava-1.6",
    "qwen25vl": "qwen2.5-vl",
    "moondream": "moondream2",
    "minicpm": "minicpm-v",
    "gemma3": "mtmd",
    "gemma-3": "mtmd",
    "generic": "mtmd",
    "gemma-4": "gemma4",
}


def family_by_name(name: str) -> Family:
    """The family called `name` (or an alias such as `llava15`, `gemma3`)."""
    key = _ALIASES.get(name.lower(), name.lower())
    for family in FAMILIES:
        if family.name == key or family.server_chat_format == key or family.handler.lower() == key:
            return family
    raise MetabonkError(
        f"unknown chat handler {name!r}; use 'auto' or one of: {', '.join(FAMILY_NAMES)}"
    )


def gguf_names(path: str | Path) -> list[str]:
    """`general.architecture`, `general.name` and `general.basename` of a GGUF (lower case)."""
    try:
        import gguf

        if gguf_layout_problem(path) is not None:  # counts the file cannot hold: not read
            return []
        reader = gguf.GGUFReader(str(path))
    except Exception:  # unreadable or not a GGUF: fall back to file names only
        return []
    out: list[str] = []
    for key in ("general.architecture", "general.name", "general.basename", "clip.projector_type"):
        field = reader.fields.get(key)
        if field is not None and field.types and field.types[0] == gguf.GGUFValueType.STRING:
            out.append(bytes(field.parts[field.data[0]]).decode("utf-8", "replace").lower())
    return out


def resolve_family(
    model_path: str | Path, mmproj_path: str | Path | None, name: str = "auto"
) -> Family:
    """The family for a model: `name` if given, else detected, else the generic libmtmd one."""
    if name and name != "auto":
        return family_by_name(name)
    haystack = [Path(model_path).name.lower()]
    if mmproj_path is not None:
        haystack.append(Path(mmproj_path).name.lower())
    if Path(model_path).is_file():
        haystack += gguf_names(model_path)
    text = " ".join(haystack).replace("_", "-")
    for family in FAMILIES:
        if any(p.replace("_", "-") in text for p in family.patterns):
            return family
    return family_by_name("mtmd")
