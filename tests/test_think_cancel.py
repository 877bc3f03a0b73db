"""`Engine.cancel()` on the in-process engine: real llama-cpp-python on a tiny GGUF written here."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import pytest

from metabonk_gym.think.engines import EngineError, LlamaCppEngine, ThinkRequest
from metabonk_gym.think.games import adapter_for_name
from metabonk_gym.think.testing import write_tiny_llama

pytestmark = pytest.mark.llm

#: An answer the grammar keeps long: thousands of digits take the tiny model tens of seconds.
LONG = ThinkRequest(
    "You are a counter.",
    "Count.",
    {
        "type": "object",
        "properties": {
            "xs": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": 9},
                "minItems": 2000,
            }
        },
        "required": ["xs"],
    },
    max_tokens=4000,
)


def test_cancel_stops_decoding_at_once_and_the_engine_answers_again(tmp_path: Path) -> None:
    engine = LlamaCppEngine(write_tiny_llama(tmp_path / "tiny.gguf"), n_ctx=8192)
    try:
        # the prompt into the KV cache first: on a loaded CI machine evaluating it could take
        # longer than the 0.3 s below, and the cancel would land before decoding started
        engine.complete(dataclasses.replace(LONG, max_tokens=1), time.monotonic() + 60)
        started = time.monotonic()
        threading.Timer(0.3, engine.cancel).start()
        # llama.cpp may still be (re-)evaluating the prompt at 0.3 s (CI: twice in five runs,
        # though it was cached): a cancel must stop that at once too
        with pytest.raises(
            EngineError, match="cancelled (after [1-9][0-9]* tokens|while evaluating the prompt)"
        ):
            engine.complete(LONG, started + 60)
        assert time.monotonic() - started < 2.0  # decoding all of it takes over 10 s
        spec = adapter_for_name("BonkQuest").spec
        short = ThinkRequest("You are the strategist.", "Where now?", spec.schema(), max_tokens=200)
        assert engine.complete(short, time.monotonic() + 60).text  # a later request is not hit
    finally:
        engine.close()
