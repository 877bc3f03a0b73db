"""Real llama-cpp-python on tiny GGUFs written here: text and vision paths, deadlines, bad files."""

from __future__ import annotations

import time
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from metabonk_gym.think.directive import parse_directive
from metabonk_gym.think.engines import (
    EngineError,
    LlamaCppEngine,
    ModelFileNotFoundError,
    ThinkRequest,
    ThinkTimeout,
    chat_messages,
    png_bytes,
)
from metabonk_gym.think.games import adapter_for_name
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.think.strategist import ModelStrategist, deadline_result
from metabonk_gym.think.testing import write_tiny_pair
from metabonk_gym.think.view import GameView

pytestmark = pytest.mark.llm

SPEC = adapter_for_name("BonkQuest").spec


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_tiny_pair(tmp_path_factory.mktemp("gguf"))


def request(
    image: np.ndarray | None = None, user: str = "Where should the agent go?"
) -> ThinkRequest:
    return ThinkRequest(
        system="You are the strategist of a tile game. Answer with a JSON directive.",
        user=user,
        schema=SPEC.schema(),
        image_png=png_bytes(image) if image is not None else None,
        max_tokens=200,
    )


def frame(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (160, 240, 3), dtype=np.uint8)


def schema_valid(text: str) -> None:
    d = parse_directive(text, SPEC)
    jsonschema.validate(
        {k: v for k, v in d.to_dict().items() if k not in ("source", "reason")}, SPEC.schema()
    )


def test_in_process_text_model_gives_schema_valid_directives(tiny: tuple[Path, Path]) -> None:
    engine = LlamaCppEngine(tiny[0])
    try:
        assert engine.vision is False and engine.n_gpu_layers in (0, -1)
        for i in range(3):
            completion = engine.complete(request(user=f"state {i}"), time.monotonic() + 60)
            schema_valid(completion.text)
            assert completion.completion_tokens and completion.prompt_tokens
    finally:
        engine.close()


@pytest.mark.parametrize("handler", ["auto", "llava-1.5"])
def test_image_goes_through_a_multimodal_chat_handler(
    tiny: tuple[Path, Path], handler: str
) -> None:
    engine = LlamaCppEngine(tiny[0], tiny[1], chat_handler=handler, logits_all=True)
    try:
        assert engine.vision is True
        assert engine.family == ("mtmd" if handler == "auto" else "llava-1.5")
        for seed in (0, 1):
            schema_valid(engine.complete(request(frame(seed)), time.monotonic() + 60).text)

        def first_logprobs(seed: int) -> list[float]:
            messages = chat_messages(request(frame(seed)), image=True)
            out = engine.llm.create_chat_completion(
                messages=messages, max_tokens=1, logprobs=True, top_logprobs=5, temperature=0
            )  # type: ignore[arg-type]
            return [
                t["logprob"] for t in out["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            ]  # type: ignore[index]

        # the image reaches the model: another picture changes the logits, the same one does not
        first = first_logprobs(0)
        assert first_logprobs(1) != first
        assert first_logprobs(0) == pytest.approx(first, abs=1e-5)
    finally:
        engine.close()


def test_a_game_frame_and_prompt_through_the_vision_model(
    make_env, tiny: tuple[Path, Path]
) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    obs, info = env.reset(seed=2)
    adapter = adapter_for_name("BonkQuest")
    builder = PromptBuilder(adapter, game_card="Walk to the key, then the door.")
    engine = LlamaCppEngine(tiny[0], tiny[1])
    strategist = ModelStrategist(engine, builder, timeout_s=60)
    try:
        view = GameView.capture(env, info, 0, obs)
        result = strategist.request(view, [], "start").result()
        assert result.category is None, result.error
        assert result.request is not None and result.request.image_png is not None
        assert "## Map" in result.request.user and "@" in result.request.user
    finally:
        strategist.close()


def test_missing_model_and_mmproj_files_raise_at_construction_naming_the_path(
    tmp_path: Path, tiny: tuple[Path, Path]
) -> None:
    missing = tmp_path / "nope" / "model.gguf"
    with pytest.raises(ModelFileNotFoundError, match=f"model file not found: {missing}"):
        LlamaCppEngine(missing)
    with pytest.raises(ModelFileNotFoundError, match="mmproj file not found: .*proj.gguf"):
        LlamaCppEngine(tiny[0], tmp_path / "proj.gguf")
    with pytest.raises(FileNotFoundError):  # also a FileNotFoundError for generic handlers
        LlamaCppEngine(missing)


def test_a_file_that_is_not_a_gguf_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(EngineError, match="could not load"):
        LlamaCppEngine(bad)


def test_deadline_stops_decoding_and_the_strategist_falls_back(tiny: tuple[Path, Path]) -> None:
    engine = LlamaCppEngine(tiny[0])
    try:
        with pytest.raises(ThinkTimeout):
            engine.complete(request(), time.monotonic() - 1)
        long = request(
            user="x " * 1500
        )  # thousands of byte tokens: prompt evaluation takes a while
        started = time.monotonic()
        with pytest.raises(ThinkTimeout, match="while evaluating the prompt"):
            engine.complete(long, started + 0.01)
        stopped = time.monotonic() - started
        # the model is usable again afterwards
        schema_valid(engine.complete(request(), time.monotonic() + 60).text)
        # the stop came inside prompt evaluation: the same work done whole (another prompt of
        # the same length, so nothing is cached) takes far longer than the stopped call
        whole_started = time.monotonic()
        engine.complete(request(user="y " * 1500), whole_started + 600)
        whole = time.monotonic() - whole_started
        assert stopped < whole / 2, (stopped, whole)
    finally:
        engine.close()


def test_strategist_never_waits_past_timeout(make_env, tiny: tuple[Path, Path]) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    obs, info = env.reset(seed=0)
    adapter = adapter_for_name("BonkQuest")
    strategist = ModelStrategist(
        LlamaCppEngine(tiny[0]), PromptBuilder(adapter, "x" * 3000), timeout_s=0.2
    )
    try:
        view = GameView.capture(env, info, 0, obs)
        started = time.monotonic()
        result = deadline_result(strategist.request(view, [], "start"), adapter.spec, started, 0.2)
        waited = time.monotonic() - started
        assert result.category == "timeout" and result.directive.source == "fallback"
        # the answer came at the deadline, not after the model's work: that work done whole (no
        # deadline; a card of the same length, so nothing is cached) takes far longer
        other = PromptBuilder(adapter, "y" * 3000).build(view, [], "start", False, None)
        whole_started = time.monotonic()
        strategist.engine.complete(other, whole_started + 600)
        whole = time.monotonic() - whole_started
        assert waited < 0.2 + whole / 2, (waited, whole)
        assert result.directive.action == adapter.spec.fallback_action
    finally:
        strategist.close()
