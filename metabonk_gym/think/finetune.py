"""Teach a small language model with decision logs: (prompt, directive) pairs, LoRA, a new GGUF.

What: `load_pairs(logdirs)` turns decision logs (`metabonk_gym.think.log`; an oracle run's log
holds the prompt a model would have been sent with each of the oracle's directives) into
(system, user, answer) pairs. `finetune(logdirs, out)` loads the base GGUF with transformers
(dequantised to float32), trains LoRA adapters (peft) on the answer tokens only, with the chat
template the GGUF carries, merges them and writes `out/model.gguf`: the base file's metadata
(tokenizer, chat template) and untouched tensors copied, the merged weights as Q8_0
(`write_gguf`, with the `gguf` package). `out/` is a run dir (`metabonk_gym.rundir.RunDir`, as
every trainer's): `run.json`, one checkpoint `checkpoint.pt` written every `save_every` steps
and on Ctrl-C (`resume=True` goes on from it), TensorBoard scalars in `out/tensorboard`, and a
model card `out/README.md`; the steps are the body of a `metabonk_gym.runloop.RunLoop`, which
owns the checkpoints, the time limit, Ctrl-C and the writer. `--model out/model.gguf` and
`metabonk serve-vlm out/model.gguf` take the result.
Why LoRA rather than full fine-tuning: at 135M parameters both fit in memory, but LoRA trains
about 3% of the weights, keeps the optimizer state small and the checkpoints a few MB, and a
handful of steps already moves a small model (figures in docs/thinking.md). Written by hand:
the GGUF export (transformers reads GGUF but does not write it; llama.cpp's converter needs
llama.cpp's source tree), about 60 lines on `gguf`'s reader and writer.

>>> hf_name("blk.3.attn_q.weight"), hf_name("token_embd.weight"), hf_name("rope_freqs.weight")
('model.layers.3.self_attn.q_proj.weight', 'model.embed_tokens.weight', None)
>>> import tempfile
>>> load_pairs([tempfile.mkdtemp()])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
metabonk_gym.think.log.DecisionLogNotFoundError: no decision log at .../decisions.jsonl; pass ...
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from metabonk_gym.errors import MetabonkError
from metabonk_gym.rundir import RunDir
from metabonk_gym.runloop import RunLoop, seed_all
from metabonk_gym.think.directive import DIRECTIVE_KEYS
from metabonk_gym.think.log import LOG_NAME, log_records, read_decisions
from metabonk_gym.think.models import DEFAULT_MODEL, check_gguf, resolve_model
from metabonk_gym.utils import atomic_write_bytes, check_number

RUN_FORMAT = "metabonk-finetune-v1"
#: The fine-tune's files in its run dir besides `run.json` and `tensorboard/`: one checkpoint
#: (adapters, optimizer and schedule), overwritten at each save (a run keeps one, not
#: `checkpoints/step_N` files: old runs resume and disk use stays that of one); the GGUF and
#: its model card.
CHECKPOINT = "checkpoint.pt"
GGUF = "model.gguf"
CARD = "README.md"
#: llama-architecture GGUF tensor names -> transformers' (per block: `blk.N.` -> layers.N).
_GLOBAL = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_BLOCK = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
QUANTS = ("q8_0", "f16", "f32")


class FinetuneError(MetabonkError, ValueError):
    """Input a fine-tune cannot use: no pairs, logs of several games, a run dir of another."""


@dataclass(frozen=True)
class Pair:
    """One training example: the system prompt, the per-call prompt and the answer (JSON)."""

    system: str
    user: str
    answer: str

    def messages(self) -> list[dict[str, str]]:
        """The chat the model sees (the answer is what it learns to write after it)."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


@dataclass
class FinetuneConfig:
    """How to fine-tune.

    Args:
        steps: optimizer steps in all (a resumed run goes on to this many).
        batch_size: pairs per step.
        lr: peak learning rate (warm-up over 10 steps, then cosine to a tenth).
        rank: LoRA rank; `alpha` its scale; `dropout` LoRA dropout.
        targets: the linear layers that get adapters (llama names).
        top_layers: adapters only in this many of the top transformer blocks (0: all); the
            backward pass then stops below them (about half the compute at 12 of 30).
        max_len: pairs longer than this many tokens are left out.
        seed: data order and adapter initialisation.
        save_every: steps between checkpoints.
        quant: the merged weights' type in the GGUF (q8_0, f16, f32).
        threads: torch CPU threads.
        val_fraction: pairs held out for the validation loss and answer-token accuracy (at
            most 8 are scored: a CPU shared with other work is slow).
        max_minutes: stop training after this many minutes (0: no limit) and write the GGUF
            of the steps done; the run can be resumed to more steps later.
        device: where torch trains ("cpu", or "cuda" on a machine with a GPU); a resumed run
            takes the device given now, not the one it started on.
    """

    steps: int = 300
    batch_size: int = 4
    lr: float = 1e-3
    rank: int = 16
    alpha: int = 32
    dropout: float = 0.0
    targets: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )
    top_layers: int = 12
    max_len: int = 1280
    seed: int = 0
    save_every: int = 20
    quant: str = "q8_0"
    threads: int = 2
    val_fraction: float = 0.1
    max_minutes: float = 0.0
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)


def answer_text(directive: dict[str, Any]) -> str:
    """A directive as the JSON answer the model learns to write (the schema's key order).

    >>> answer_text({"goal": "key", "reasoning": "", "action": "collect",
    ...              "target": {"x": 1, "y": 2}, "duration_frames": 60, "confidence": 1.0,
    ...              "source": "oracle"})
    '{"goal":"key","reasoning":"","action":"collect","target":{"x":1,"y":2},"duration_frames":60,"confidence":1.0}'
    """
    return json.dumps({k: directive[k] for k in DIRECTIVE_KEYS}, separators=(",", ":"))


def pick_answer(raw: Any) -> str | None:
    """The answer a choice-profile call logged (an option's number), None if it is not one.

    >>> pick_answer("2"), pick_answer(None), pick_answer('{"goal": "x"}')
    ('2', None, None)
    """
    if isinstance(raw, str) and re.fullmatch(r"\s*[1-9]\d{0,3}\s*", raw):
        return raw.strip()
    return None


def _metas(folder: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for record in log_records(folder / LOG_NAME):
        if record.get("type") == "meta":
            out[str(record.get("run", ""))] = record
    return out


def load_pairs(logdirs: Sequence[str | Path], game: str | None = None) -> tuple[str, list[Pair]]:
    """The game and the (prompt, directive) pairs of decision logs: every call that has its
    prompt text and a directive that is not a fallback. All logs must be of one game (`game`,
    default: the first log's); `FinetuneError` names the log that is not, or says that there
    are no pairs."""
    pairs: list[Pair] = []
    for logdir in logdirs:
        folder = Path(logdir)
        records = read_decisions(folder)  # DecisionLogNotFoundError for a folder without one
        metas = _metas(folder)
        for record in records:
            meta = metas.get(str(record.get("run", "")), {})
            log_game = str(meta.get("game", ""))
            if game is None:
                game = log_game
            elif log_game != game:
                raise FinetuneError(
                    f"{folder} is a decision log of {log_game or 'an unknown game'}, not {game}: "
                    "fine-tune on logs of one game (pass --game to choose)"
                )
            directive = record.get("directive")
            if (
                not isinstance(directive, dict)
                or not record.get("user")
                or not meta.get("system_prompt")
                or directive.get("source") == "fallback"
                or any(k not in directive for k in DIRECTIVE_KEYS)
            ):
                continue
            if meta.get("profile") == "choice":  # the answer is the option's number
                answer = pick_answer(record.get("raw"))
                if answer is None:  # the oracle's directive was none of the options
                    continue
            else:
                answer = answer_text(directive)
            pairs.append(Pair(str(meta["system_prompt"]), str(record["user"]), answer))
    if not pairs:
        names = ", ".join(str(d) for d in logdirs)
        raise FinetuneError(
            f"no (prompt, directive) pairs in {names}: record a log with prompts, e.g. "
            "`metabonk play ENV_ID --agent think --model oracle --agent-opt log_dir=DIR`"
        )
    return str(game), pairs


# ---------------------------------------------------------------------------------- GGUF
def hf_name(gguf_name: str) -> str | None:
    """The transformers name of a llama GGUF tensor (None for tensors transformers lacks)."""
    if gguf_name in _GLOBAL:
        return _GLOBAL[gguf_name]
    match = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", gguf_name)
    if match and match.group(2) in _BLOCK:
        return f"model.layers.{match.group(1)}.{_BLOCK[match.group(2)]}.weight"
    return None


def permute_qk(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's row order of a q or k projection from transformers' (the inverse of the
    un-permutation transformers applies when it reads a llama GGUF; `n_head`: the heads of that
    projection). Rows of each head go from [first halves, second halves] to interleaved pairs.

    >>> permute_qk(np.arange(8.0).reshape(8, 1), 2)[:, 0].tolist()
    [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
    """
    rows = weights.shape[0]
    return (
        weights.reshape(n_head, 2, rows // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _field(reader: Any, name: str) -> Any:
    field_ = reader.fields.get(name)
    return field_.contents() if field_ is not None else None


def write_gguf(
    base: str | Path,
    weights: dict[str, np.ndarray],
    out: str | Path,
    quant: str = "q8_0",
    name: str | None = None,
    extra: dict[str, str] | None = None,
) -> Path:
    """Write `out`: the llama GGUF `base` with the tensors named (transformers names) in
    `weights` replaced, as `quant`; metadata (tokenizer, chat template) and the other tensors
    copied byte for byte; `name` the new `general.name`, `extra` more string metadata. Atomic:
    a temporary file renamed into place."""
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, quants

    if quant not in QUANTS:
        raise FinetuneError(f"quant must be one of {', '.join(QUANTS)}, not {quant!r}")
    qtype = {
        "q8_0": GGMLQuantizationType.Q8_0,
        "f16": GGMLQuantizationType.F16,
        "f32": GGMLQuantizationType.F32,
    }[quant]
    reader = GGUFReader(str(base))
    arch = str(_field(reader, "general.architecture"))
    if arch != "llama":
        raise FinetuneError(f"{base}: only llama-architecture GGUFs can be written, not {arch}")
    n_head = int(_field(reader, f"{arch}.attention.head_count"))
    n_head_kv = int(_field(reader, f"{arch}.attention.head_count_kv") or n_head)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    writer = GGUFWriter(str(tmp), arch)
    for field_ in reader.fields.values():
        if field_.name.startswith("GGUF.") or field_.name == "general.architecture":
            continue
        value = field_.contents()
        if field_.name == "general.name" and name is not None:
            value = name
        kind = field_.types[0]
        sub = field_.types[-1] if kind == GGUFValueType.ARRAY and len(field_.types) > 1 else None
        writer.add_key_value(field_.name, value, kind, sub_type=sub)
    if name is not None and "general.name" not in reader.fields:
        writer.add_name(name)
    for extra_key, text in (extra or {}).items():
        writer.add_string(extra_key, text)
    for tensor in reader.tensors:
        key = hf_name(tensor.name)
        if key is not None and key in weights:
            w = np.asarray(weights[key], np.float32)
            if tensor.name.endswith("attn_q.weight"):
                w = permute_qk(w, n_head)
            elif tensor.name.endswith("attn_k.weight"):
                w = permute_qk(w, n_head_kv)
            if quant == "f32":
                writer.add_tensor(tensor.name, w)
            elif quant == "f16":
                writer.add_tensor(tensor.name, w.astype(np.float16))
            else:
                writer.add_tensor(tensor.name, quants.quantize(w, qtype), raw_dtype=qtype)
        else:
            writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out


# ---------------------------------------------------------------------------------- training
def _encode(tokenizer: Any, pair: Pair) -> tuple[list[int], list[int]]:
    """Token ids of the chat + answer and their labels (-100 on the prompt: only the answer
    and the end-of-turn token are learnt)."""
    prompt = tokenizer.apply_chat_template(
        pair.messages(), tokenize=False, add_generation_prompt=True
    )
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    end = tokenizer.eos_token or ""
    answer_ids = tokenizer(pair.answer + end, add_special_tokens=False)["input_ids"]
    return prompt_ids + answer_ids, [-100] * len(prompt_ids) + answer_ids


def _batch(encoded: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, Any]:
    import torch

    width = max(len(ids) for ids, _ in encoded)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    labels = torch.full((len(encoded), width), -100, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, (i, lab) in enumerate(encoded):
        ids[row, : len(i)] = torch.tensor(i)
        labels[row, : len(lab)] = torch.tensor(lab)
        mask[row, : len(i)] = 1
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def shared_prefix(encoded: Sequence[tuple[list[int], list[int]]]) -> int:
    """How many leading tokens every pair shares before its first answer token (the system
    prompt and the chat template's start): computed once a step without gradients and reused
    from the KV cache by every pair of the batch, as llama.cpp reuses it at inference.

    >>> shared_prefix([([1, 2, 3, 4], [-100, -100, -100, 4]), ([1, 2, 5, 6], [-100] * 3 + [6])])
    2
    """
    first = encoded[0][0]
    n = min(len(ids) for ids, _ in encoded)
    for ids, labels in encoded:
        answer = next((i for i, label in enumerate(labels) if label != -100), len(labels))
        n = min(n, answer)
        for i in range(n):
            if ids[i] != first[i]:
                n = i
                break
    return n


def _loss(
    model: Any, encoded: list[tuple[list[int], list[int]]], prefix: list[int], pad_id: int
) -> Any:
    """The model's output on a batch whose pairs all start with `prefix` (its KV computed
    once, without gradients, repeated over the batch)."""
    import torch

    cut = len(prefix)
    batch = _batch([(ids[cut:], labels[cut:]) for ids, labels in encoded], pad_id)
    if not cut:
        return model(**batch)
    with torch.no_grad():
        cache = model(input_ids=torch.tensor([prefix]), use_cache=True).past_key_values
    cache.batch_repeat_interleave(len(encoded))
    mask = torch.cat(
        [torch.ones((len(encoded), cut), dtype=torch.long), batch["attention_mask"]], dim=1
    )
    return model(
        input_ids=batch["input_ids"],
        attention_mask=mask,
        labels=batch["labels"],
        past_key_values=cache,
        use_cache=True,
    )


def _schedule(step: int, total: int, warmup: int = 10) -> float:
    """The learning rate's multiplier at `step`: linear warm-up, then cosine down to 0.1.

    >>> round(_schedule(0, 100), 2), round(_schedule(10, 100), 2), round(_schedule(100, 100), 2)
    (0.1, 1.0, 0.1)
    """
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def _order(n: int, seed: int, step: int, batch_size: int) -> list[int]:
    """The pair indices of `step`'s batch: epoch after epoch of a seeded shuffle, so a resumed
    run sees the same data in the same order.

    >>> _order(5, 0, 0, 2) + _order(5, 0, 1, 2) + _order(5, 0, 2, 2)[:1] == sorted(range(5))
    False
    >>> sorted(_order(4, 0, 0, 2) + _order(4, 0, 1, 2))
    [0, 1, 2, 3]
    """
    out = []
    for k in range(step * batch_size, (step + 1) * batch_size):
        epoch, i = divmod(k, n)
        out.append(int(np.random.default_rng(seed + epoch).permutation(n)[i]))
    return out


def _load_base(base: Path, threads: int) -> tuple[Any, Any]:
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:  # pragma: no cover - the think extra installs them
        raise MetabonkError(
            "metabonk think finetune needs transformers and peft: pip install 'metabonk-gym[think]'"
        ) from exc
    torch.set_num_threads(max(1, threads))
    tokenizer = AutoTokenizer.from_pretrained(str(base.parent), gguf_file=base.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(base.parent), gguf_file=base.name, dtype=torch.float32
    )
    return tokenizer, model


#: Devices `FinetuneConfig.device` may name (torch's CPU and GPU back ends, with an index).
_DEVICE = re.compile(r"^(cpu|cuda|mps|xpu)(:\d{1,2})?$")


def check_config(config: FinetuneConfig) -> FinetuneConfig:
    """`config` when every option is in range, else a one-line `BadNumberError` or
    `FinetuneError` naming the option: checked before the base model loads (a minute on a CPU),
    so a typo costs nothing.

    >>> check_config(FinetuneConfig(steps=0))
    Traceback (most recent call last):
    ...
    metabonk_gym.errors.BadNumberError: --steps must be a whole number in [1, 10000000], not 0
    """
    check_number("--steps", config.steps, 1, 10_000_000, integer=True)
    check_number("--batch-size", config.batch_size, 1, 4096, integer=True)
    check_number("--lr", config.lr, 0, 1, low_open=True)
    check_number("--rank", config.rank, 1, 4096, integer=True)
    check_number("alpha", config.alpha, 0, 1e6, low_open=True)
    check_number("dropout", config.dropout, 0, 1)
    check_number("--top-layers", config.top_layers, 0, 10_000, integer=True)
    check_number("max_len", config.max_len, 1, 1 << 20, integer=True)
    check_number("--seed", config.seed, 0, 2**32 - 1, integer=True)
    check_number("--save-every", config.save_every, 1, 10_000_000, integer=True)
    check_number("--threads", config.threads, 1, 4096, integer=True)
    check_number("val_fraction", config.val_fraction, 0, 0.9)
    check_number("--max-minutes", config.max_minutes, 0, 525_600)  # 0: no limit; a year at most
    if config.quant not in QUANTS:
        raise FinetuneError(f"--quant must be one of {', '.join(QUANTS)}, not {config.quant!r}")
    if not isinstance(config.device, str) or not _DEVICE.match(config.device):
        raise FinetuneError(
            f"--device must be cpu or cuda (cuda:N for one GPU), not {config.device!r}"
        )
    return config


def check_out(out: Path, resume: bool) -> None:
    """Refuse an `--out` folder that holds files but is not a fine-tune run: writing the run
    there would replace files of the same names (README.md, checkpoint.pt, model.gguf)."""
    run = RunDir(out)
    if run.path.exists() and not run.path.is_dir():
        raise FinetuneError(f"--out {out} is a file, not a folder: choose a new folder")
    if run.state_file.is_file() or not run.path.is_dir():
        return
    held = sorted(p.name for p in run.path.iterdir())
    if held:
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        what = "has no run.json to resume from" if resume else "is not a fine-tune run"
        raise FinetuneError(
            f"--out {out} already holds files ({shown}) and {what}; choose a new or empty folder"
        )


def finetune(
    logdirs: Sequence[str | Path],
    out: str | Path,
    base: str | Path | None = None,
    config: FinetuneConfig | None = None,
    game: str | None = None,
    resume: bool = False,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Fine-tune `base` (default: the default model) on the pairs of `logdirs`, write the run
    dir `out` (see the module docstring) and return the figures (pairs, steps, losses, the
    held-out answer-token accuracy, seconds, the GGUF's path). Tensors are made on
    `config.device` (torch's default device for the run)."""
    config = check_config(config or FinetuneConfig())
    check_out(Path(out), resume)
    import torch

    with torch.device(config.device):
        return _finetune(logdirs, RunDir(Path(out)), base, config, game, resume, progress)


def _finetune(
    logdirs: Sequence[str | Path],
    run: RunDir,
    base: str | Path | None,
    config: FinetuneConfig,
    game: str | None,
    resume: bool,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """The fine-tune in stages: the data and config, the model with adapters, the steps and
    the held-out figures (`_train`), the GGUF and the model card (see `finetune`)."""
    base_path = check_gguf(resolve_model(base))
    game, pairs = load_pairs(logdirs, game)
    config = _resume_config(run, game, config, resume)
    note = run.check_not_running() if resume else None
    if note is not None:
        progress(note)
    run.path.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    tokenizer, model = _load_base(base_path, config.threads)
    model = model.to(config.device)
    load_s = time.monotonic() - started
    data = _Data.split(tokenizer, pairs, config)
    training = _Training.start(model, config, run)
    if resume and training.ckpt.is_file():
        training.restore(progress)
    training.run = {
        "format": RUN_FORMAT,
        "game": game,
        "base": str(base_path),
        "logdirs": [str(d) for d in logdirs],
        "pairs": len(pairs),
        "train": len(data.train),
        "val": len(data.val),
        "config": {**asdict(config), "targets": list(config.targets)},
    }
    run.write_state(**training.run, status="running", step=training.step, **run.owner())
    losses, held_out = _train(training, data, config, started, progress)
    figures: dict[str, Any] = {
        "game": game,
        "pairs": len(pairs),
        "too_long": len(pairs) - len(data.keep),
        "train": len(data.train),
        "val": len(data.val),
        "steps": training.step,
        "load_s": round(load_s, 1),
        "final_loss": float(np.mean(losses[-10:])) if losses else None,
        "prefix_tokens": len(data.prefix),
        **held_out,
    }
    name = f"{DEFAULT_MODEL.name if base is None else base_path.stem} metabonk {game}"
    gguf_path = _export(training.model, config, base_path, run.path / GGUF, name, game)
    figures["gguf"] = str(gguf_path)
    figures["seconds"] = round(time.monotonic() - started, 1)
    run.write_state(step=training.step, status="done", figures=figures)
    atomic_write_bytes(run.path / CARD, model_card(training.run, figures).encode())
    return figures


def _previous_run(run: RunDir) -> dict[str, Any]:
    """The `run.json` of the fine-tune in `run` (`{}` when there is none): read by `RunDir`
    (size and field checks); `FinetuneError` when it is not a fine-tune's."""
    if not run.state_file.is_file():
        return {}
    previous = run.read_state()
    fix = "choose another --out"
    if previous.get("format") != RUN_FORMAT:
        raise FinetuneError(
            f"{run.state_file} is not a fine-tune run's run.json (format "
            f"{str(previous.get('format'))[:40]!r}, not {RUN_FORMAT!r}); {fix}"
        )
    known = {f.name for f in fields(FinetuneConfig)}
    stored = previous.get("config")
    if not isinstance(stored, dict) or not set(stored) <= known:
        raise FinetuneError(
            f"{run.state_file}: its config is not a fine-tune's; restore it from a backup or {fix}"
        )
    return previous


def _resume_config(run: RunDir, game: str, config: FinetuneConfig, resume: bool) -> FinetuneConfig:
    """The config of the run: `config`, or for a resumed run its first config with the steps
    and device given now (checked again). `FinetuneError` for a run dir without `resume` or of
    another game."""
    previous = _previous_run(run)
    if previous and not resume:
        raise FinetuneError(
            f"{run.path} is already a fine-tune run: pass --resume to go on, or another --out"
        )
    if not (resume and previous):
        return config
    if previous.get("game") != game:
        raise FinetuneError(
            f"{run.path} fine-tunes for {previous.get('game')}, and these logs are of {game}"
        )
    config = FinetuneConfig(
        **{**asdict(config), **previous["config"], "steps": config.steps, "device": config.device}
    )
    config.targets = tuple(config.targets)
    return check_config(config)


@dataclass
class _Data:
    """The encoded pairs and their split: `keep` (not longer than max_len), `train` and `val`
    (indices into `encoded`), the shared `prefix` and the padding token."""

    encoded: list[tuple[list[int], list[int]]]
    keep: list[int]
    train: list[int]
    val: list[int]
    prefix: list[int]
    pad_id: int

    @classmethod
    def split(cls, tokenizer: Any, pairs: Sequence[Pair], config: FinetuneConfig) -> _Data:
        """Encode `pairs` and split them (a seeded shuffle, `val_fraction` held out when there
        are at least 10)."""
        encoded = [_encode(tokenizer, p) for p in pairs]
        keep = [i for i, (ids, _) in enumerate(encoded) if len(ids) <= config.max_len]
        order = np.random.default_rng(config.seed).permutation(keep).tolist()
        n_val = int(len(order) * config.val_fraction) if len(order) >= 10 else 0
        val, train = order[:n_val], order[n_val:]
        if not train:
            raise FinetuneError(f"every pair is longer than max_len={config.max_len} tokens")
        prefix = encoded[train[0]][0][: shared_prefix([encoded[i] for i in train + val])]
        pad_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        return cls(encoded, keep, train, val, prefix, pad_id)


@dataclass
class _Training:
    """The model with its LoRA adapters, the optimizer and schedule, the step reached, the run
    dir and its `run.json` description (`run`: what the model card reads), with its checkpoint
    `ckpt`."""

    model: Any
    params: list[Any]
    opt: Any
    sched: Any
    rundir: RunDir
    step: int = 0
    run: dict[str, Any] = field(default_factory=dict)

    @property
    def ckpt(self) -> Path:
        return self.rundir.path / CHECKPOINT

    @classmethod
    def start(cls, model: Any, config: FinetuneConfig, rundir: RunDir) -> _Training:
        """Adapters on `config.targets` of the top `config.top_layers` blocks (seeded), AdamW
        and the warm-up + cosine schedule."""
        import torch
        from peft import LoraConfig, get_peft_model

        seed_all(config.seed)
        n_layers = int(model.config.num_hidden_layers)
        top = min(n_layers, config.top_layers) if config.top_layers > 0 else n_layers
        lora = LoraConfig(
            r=config.rank,
            lora_alpha=config.alpha,
            lora_dropout=config.dropout,
            target_modules=list(config.targets),
            layers_to_transform=list(range(n_layers - top, n_layers)),
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _schedule(s, config.steps))
        return cls(model, params, opt, sched, rundir)

    def restore(self, progress: Callable[[str], None]) -> None:
        """Go on from the checkpoint: adapters, and the optimizer and schedule when it holds
        them (adapters alone, e.g. trained on another machine and sent back small: a fresh
        optimizer goes on). Tensors only (`weights_only`): nothing in it is unpickled."""
        import torch
        from peft import set_peft_model_state_dict

        state = torch.load(self.ckpt, map_location="cpu", weights_only=True)
        set_peft_model_state_dict(self.model, state["adapter"])
        if "optimizer" in state:
            self.opt.load_state_dict(state["optimizer"])
            self.sched.load_state_dict(state["scheduler"])
        else:
            self.sched.last_epoch = int(state["step"])
        self.step = int(state["step"])
        progress(f"resuming {self.rundir.path} at step {self.step}")

    def train_step(self, data: _Data, config: FinetuneConfig) -> float:
        """One optimizer step on the batch of the step reached (`_order`); its loss."""
        import torch

        chosen = _order(len(data.train), config.seed, self.step, config.batch_size)
        batch = [data.encoded[data.train[i]] for i in chosen]
        loss = _loss(self.model, batch, data.prefix, data.pad_id).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad()
        self.step += 1
        return float(loss)

    def save(self) -> None:
        """The checkpoint (atomic) and `run.json`'s step at the step reached."""
        import io

        import torch
        from peft import get_peft_model_state_dict

        buffer = io.BytesIO()
        torch.save(
            {
                "adapter": get_peft_model_state_dict(self.model),
                "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(),
                "step": self.step,
            },
            buffer,
        )
        atomic_write_bytes(self.ckpt, buffer.getvalue())
        self.rundir.write_state(step=self.step)


def _train(
    training: _Training,
    data: _Data,
    config: FinetuneConfig,
    started: float,
    progress: Callable[[str], None],
) -> tuple[list[float], dict[str, Any]]:
    """The loop body: optimizer steps up to `config.steps` in a `RunLoop` (a checkpoint every
    `save_every` steps and at the end, the `max_minutes` budget counted from `started`, Ctrl-C
    saves, marks the run interrupted and re-raises), TensorBoard scalars `finetune/*` and a
    progress line a step; then the held-out figures. The losses and those figures."""
    limit = 60 * config.max_minutes or None
    spent = limit is not None and time.monotonic() - started >= limit  # before step 1: none

    def interrupted(_steps: int) -> None:
        training.rundir.write_state(step=training.step, status="interrupted")
        progress(f"interrupted at step {training.step}; checkpoint saved, go on with --resume")

    loop = RunLoop(
        total=training.step if spent else config.steps,
        start=training.step,
        tensorboard=training.rundir.tensorboard,
        checkpoint=lambda _step: training.save(),
        checkpoint_every=config.save_every,
        time_limit_s=limit,
        log=progress,
        on_interrupt=interrupted,
        started=started,
    )
    losses: list[float] = []
    with loop:
        training.model.train()
        for step in loop.steps():
            t0 = time.monotonic()
            loss = training.train_step(data, config)
            losses.append(loss)
            seconds = time.monotonic() - t0
            lr = training.sched.get_last_lr()[0]
            values = {"loss": loss, "lr": lr, "seconds_per_step": seconds}
            loop.report(step, values, prefix="finetune/")
            progress(f"step {step}/{config.steps} loss {loss:.4f} ({seconds:.1f} s)")
        held_out = _validate_run(training, data, loop.writer)
    return losses, held_out


def _validate_run(training: _Training, data: _Data, writer: Any) -> dict[str, Any]:
    """The held-out figures (or the first training pairs' when none are held out), also added
    to the run's TensorBoard scalars (`writer`)."""
    scored = [data.encoded[i] for i in (data.val or data.train)[:8]]
    figures: dict[str, Any] = dict(_validate(training.model, scored, data.prefix, data.pad_id))
    figures["val_split"] = "val" if data.val else "train"
    writer.add_scalar("finetune/val_loss", figures["val_loss"], training.step)
    writer.add_scalar("finetune/val_token_accuracy", figures["val_token_accuracy"], training.step)
    return figures


def _export(
    model: Any, config: FinetuneConfig, base_path: Path, out: Path, name: str, game: str
) -> Path:
    """Merge the adapters and write the GGUF `out` (the adapted weights as `config.quant`),
    checked."""
    merged = model.merge_and_unload()
    suffixes = tuple(f".{t}.weight" for t in config.targets)
    weights = {
        k: v.detach().float().cpu().numpy()
        for k, v in merged.state_dict().items()
        if k.endswith(suffixes)
    }
    gguf_path = write_gguf(
        base_path,
        weights,
        out,
        quant=config.quant,
        name=name,
        extra={"metabonk.finetune.game": game, "metabonk.finetune.base": base_path.name},
    )
    check_gguf(gguf_path)
    return gguf_path


def _validate(
    model: Any, encoded: list[tuple[list[int], list[int]]], prefix: list[int], pad_id: int
) -> dict[str, float]:
    """Teacher-forced loss and accuracy on the answer tokens of `encoded`."""
    import torch

    model.eval()
    losses, right, total = [], 0, 0
    with torch.no_grad():
        for i in range(0, len(encoded), 4):
            result = _loss(model, encoded[i : i + 4], prefix, pad_id)
            batch = _batch(
                [(ids[len(prefix) :], lab[len(prefix) :]) for ids, lab in encoded[i : i + 4]],
                pad_id,
            )
            losses.append(float(result.loss))
            predicted = result.logits[:, :-1].argmax(-1)
            labels = batch["labels"][:, 1:]
            mask = labels != -100
            right += int(((predicted == labels) & mask).sum())
            total += int(mask.sum())
    model.train()
    return {
        "val_loss": float(np.mean(losses)) if losses else float("nan"),
        "val_token_accuracy": right / max(1, total),
    }


def model_card(run: dict[str, Any], figures: dict[str, Any]) -> str:
    """The model card of a fine-tuned GGUF: base model, license, data, steps, figures.

    >>> "Apache-2.0" in model_card({"base": "b.gguf", "config": {}}, {"steps": 1})
    True
    """
    config = run.get("config", {})
    lines = [
        f"# {Path(str(run.get('base', 'model'))).stem} fine-tuned for {run.get('game')}",
        "",
        f"- base model: `{run.get('base')}` ({DEFAULT_MODEL.name}, {DEFAULT_MODEL.license}, "
        f"from the PyPI wheel `{DEFAULT_MODEL.package}` when it is the default)",
        "- license: the base model's (Apache-2.0 for SmolLM2-135M-Instruct)",
        f"- data: {run.get('pairs')} (prompt, directive) pairs from the decision logs "
        f"{', '.join(run.get('logdirs', []))} ({run.get('train')} trained on, {run.get('val')} held out, "
        f"{figures.get('too_long', 0)} longer than max_len left out)",
        f"- method: LoRA r={config.get('rank')} alpha={config.get('alpha')} on "
        f"{', '.join(config.get('targets', []))}, lr {config.get('lr')}, batch "
        f"{config.get('batch_size')}, merged and written as {config.get('quant')} "
        "(`metabonk think finetune`)",
        f"- steps: {figures.get('steps')}",
        "",
        "## Figures",
        "",
        "```json",
        json.dumps(figures, indent=2),
        "```",
        "",
        "Use: `metabonk play ENV_ID --agent think --model model.gguf` or "
        "`metabonk serve-vlm model.gguf`. Agreement with the oracle and win rates: "
        "`metabonk bench think --model model.gguf` (docs/thinking.md).",
        "",
    ]
    return "\n".join(lines)
