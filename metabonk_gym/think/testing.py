"""Tiny random GGUF models (a llama text model and a LLaVA-1.5-style mmproj) for tests and docs.

What: `write_tiny_llama(path)` writes a llama-architecture GGUF with random weights and a 260-token
byte-level vocabulary (SentencePiece byte fallback: `<unk>`, `<s>`, `</s>`, the 256 byte tokens and
the space piece); `write_tiny_mmproj(path)` writes a matching CLIP vision tower with an "mlp" projector.
Why: the test suite (and anyone trying the thinking stack without downloading gigabytes) needs a
real GGUF that real llama-cpp-python loads in milliseconds and decodes fast under a JSON-schema
grammar. A small vocabulary keeps grammar-constrained decoding cheap (its cost grows with the
vocabulary), and the facts checked for llama-cpp-python 0.3.36 are in
`shared/specs/ecosystem-facts.md`.

The weights are random, but not aimless: every token embedding carries a constant component that
the output layer reads as a bias towards the characters that close JSON values (`"`, `}`, `,`) and
towards the digit 1 (and against signs, fractions and exponents). Under a JSON-schema grammar the model therefore writes short, schema-valid
directives (short strings, one-digit numbers) in a few dozen tokens, while the random part of the
weights still makes the answer depend on the prompt and the image.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_tiny_llama(folder / "tiny.gguf").stat().st_size > 100_000
True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metabonk_gym.utils import atomic_write_bytes

#: Handles string content and OpenAI-style lists of parts; MTMDChatHandler renders image parts as
#: `{"type": "text", "text": "<__media__>"}`, so list content must be supported.
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{{ '\\n' }}{% endif %}"
)

#: Output biases: JSON value terminators and the digit 1 up; signs, fractions, exponents down.
_FAVOURED = {
    '"': 10.0,
    "}": 9.0,
    ",": 9.0,
    "1": 5.0,
    "{": 6.0,
    "a": 4.0,
    "-": -8.0,
    ".": -8.0,
    "e": -8.0,
    "E": -8.0,
}
_N_SPECIAL = 3  # <unk>, <s>, </s>
SPACE = "\u2581"  # SentencePiece's space


@dataclass(frozen=True)
class TinyModelConfig:
    """Sizes of the tiny text model (defaults load in ~10 ms and decode ~1000 tokens/s on a CPU)."""

    n_embd: int = 64
    n_head: int = 4
    n_layer: int = 2
    n_ff: int = 128
    n_ctx: int = 8192
    seed: int = 0


@dataclass(frozen=True)
class TinyVisionConfig:
    """Sizes of the tiny vision tower (E != F, see the facts on the "mlp" projector)."""

    image_size: int = 32
    patch_size: int = 8
    n_embd: int = 32
    n_ff: int = 48
    n_head: int = 4
    n_layer: int = 2
    seed: int = 1


def byte_token_id(byte: int) -> int:
    """Token id of a raw byte in the tiny vocabulary.

    >>> byte_token_id(ord('"'))
    37
    """
    return _N_SPECIAL + byte


def write_tiny_llama(path: str | Path, config: TinyModelConfig | None = None) -> Path:
    """Write the tiny random llama GGUF to `path` (atomically) and return the path."""
    import gguf

    cfg = config or TinyModelConfig()
    rng = np.random.default_rng(cfg.seed)
    n_vocab = _N_SPECIAL + 256 + 1
    path = Path(path)
    tmp = path.with_name(f".{path.name}.writing")
    writer = gguf.GGUFWriter(str(tmp), "llama")
    writer.add_name("metabonk tiny random llama")
    writer.add_context_length(cfg.n_ctx)
    writer.add_embedding_length(cfg.n_embd)
    writer.add_block_count(cfg.n_layer)
    writer.add_feed_forward_length(cfg.n_ff)
    writer.add_head_count(cfg.n_head)
    writer.add_head_count_kv(cfg.n_head)
    writer.add_rope_dimension_count(cfg.n_embd // cfg.n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    # SentencePiece writes spaces as U+2581; without a token for it every space would cost three
    # byte tokens.
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"<0x{b:02X}>".encode() for b in range(256)]
    tokens.append(SPACE.encode("utf-8"))
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * n_vocab)
    writer.add_token_types([int(t) for t in types])
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)
    writer.add_chat_template(TINY_CHAT_TEMPLATE)

    def rand(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # Dimension 0 of every embedding is a large constant: after the final RMS norm it dominates,
    # so column 0 of the output layer acts as a per-token bias.
    embd = rand(n_vocab, cfg.n_embd, scale=0.5)
    embd[:, 0] = 8.0
    writer.add_tensor("token_embd.weight", embd)
    for i in range(cfg.n_layer):
        e, f = cfg.n_embd, cfg.n_ff
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(e, np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", rand(e, e, scale=0.1))
        writer.add_tensor(f"blk.{i}.attn_k.weight", rand(e, e, scale=0.1))
        writer.add_tensor(f"blk.{i}.attn_v.weight", rand(e, e, scale=0.1))
        writer.add_tensor(f"blk.{i}.attn_output.weight", rand(e, e, scale=0.1))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(e, np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", rand(f, e, scale=0.1))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", rand(f, e, scale=0.1))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", rand(e, f, scale=0.1))
    writer.add_tensor("output_norm.weight", np.ones(cfg.n_embd, np.float32))
    output = rand(n_vocab, cfg.n_embd, scale=0.05)
    output[:, 0] = 0.0
    for char, bias in _FAVOURED.items():
        output[byte_token_id(ord(char)), 0] = bias
    writer.add_tensor("output.weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    atomic_write_bytes(path, tmp.read_bytes())
    tmp.unlink()
    return path


def write_tiny_mmproj(
    path: str | Path, text_n_embd: int | None = None, config: TinyVisionConfig | None = None
) -> Path:
    """Write a tiny random LLaVA-1.5-style mmproj ("mlp" projector) for the tiny llama.

    `text_n_embd` is the text model's embedding width (the projector's output); it defaults to
    `TinyModelConfig().n_embd`. Every declared block gets its tensors: a missing graph tensor
    crashes the process inside libmtmd rather than raising.
    """
    import gguf

    cfg = config or TinyVisionConfig()
    if cfg.n_ff == cfg.n_embd:
        raise ValueError("the vision feed-forward width must differ from its embedding width")
    t = text_n_embd or TinyModelConfig().n_embd
    rng = np.random.default_rng(cfg.seed)
    n_patches = (cfg.image_size // cfg.patch_size) ** 2
    path = Path(path)
    tmp = path.with_name(f".{path.name}.writing")
    writer = gguf.GGUFWriter(str(tmp), "clip")
    writer.add_name("metabonk tiny random mmproj")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.has_text_encoder", False)
    writer.add_string("clip.projector_type", "mlp")
    writer.add_uint32("clip.vision.image_size", cfg.image_size)
    writer.add_uint32("clip.vision.patch_size", cfg.patch_size)
    writer.add_uint32("clip.vision.embedding_length", cfg.n_embd)
    writer.add_uint32("clip.vision.feed_forward_length", cfg.n_ff)
    writer.add_uint32("clip.vision.block_count", cfg.n_layer)
    writer.add_uint32("clip.vision.attention.head_count", cfg.n_head)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32("clip.vision.projection_dim", t)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    def rand(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    e, f = cfg.n_embd, cfg.n_ff
    writer.add_tensor("v.patch_embd.weight", rand(e, 3, cfg.patch_size, cfg.patch_size))
    writer.add_tensor("v.position_embd.weight", rand(n_patches, e))
    for i in range(cfg.n_layer):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"v.blk.{i}.{name}.weight", rand(e, e))
        writer.add_tensor(f"v.blk.{i}.ffn_up.weight", rand(f, e))
        writer.add_tensor(f"v.blk.{i}.ffn_down.weight", rand(e, f))
    writer.add_tensor("mm.0.weight", rand(t, e, scale=0.1))
    writer.add_tensor("mm.0.bias", np.zeros(t, np.float32))
    writer.add_tensor("mm.2.weight", rand(t, t, scale=0.1))
    writer.add_tensor("mm.2.bias", np.zeros(t, np.float32))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    atomic_write_bytes(path, tmp.read_bytes())
    tmp.unlink()
    return path


def write_tiny_pair(folder: str | Path) -> tuple[Path, Path]:
    """Write `tiny-llama.gguf` and `tiny-mmproj.gguf` into `folder`; return both paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return write_tiny_llama(folder / "tiny-llama.gguf"), write_tiny_mmproj(
        folder / "tiny-mmproj.gguf"
    )


if __name__ == "__main__":  # python -m metabonk_gym.think.testing DIR
    import sys

    for written in write_tiny_pair(sys.argv[1] if len(sys.argv) > 1 else "."):
        print(written)
