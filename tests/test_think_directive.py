"""Directives: the schema, lenient parsing, strict validation, game vocabularies, families."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metabonk_gym.think.directive import DirectiveError, DirectiveSpec, parse_directive
from metabonk_gym.think.families import FAMILY_NAMES, family_by_name, resolve_family
from metabonk_gym.think.games import adapter_for_name
from metabonk_gym.think.testing import write_tiny_llama

QUEST = adapter_for_name("BonkQuest").spec
ARENA = adapter_for_name("BonkArena").spec


def answer(**changes: object) -> str:
    data = {
        "goal": "get the key",
        "reasoning": "it is close",
        "action": "collect",
        "target": {"x": 10, "y": 7},
        "duration_frames": 300,
        "confidence": 0.8,
    }
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize("spec", [QUEST, ARENA, adapter_for_name("Unknown").spec])
def test_schema_is_a_valid_json_schema_and_accepts_valid_directives(spec: DirectiveSpec) -> None:
    schema = spec.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    fallback = spec.fallback("test").to_dict()
    payload = {k: fallback[k] for k in schema["required"]}
    jsonschema.validate(payload, schema)


def test_parse_repairs_what_is_unambiguous() -> None:
    fenced = "Here you go:\n```json\n" + answer() + "\n```\nGood luck!"
    assert parse_directive(fenced, QUEST).tile == (10, 7)
    # raw control characters inside strings, as byte-level vocabularies emit under a grammar
    text = answer(goal="GOAL", reasoning="REASON").replace("GOAL", "get\x01 the\x1f key")
    d = parse_directive(text.replace("REASON", "line\nbreak"), QUEST)
    assert d.goal == "get the key" and d.reasoning == "line break"
    d = parse_directive(
        answer(target={"x": "10", "y": 7.0}, duration_frames="300", confidence="0.5"), QUEST
    )
    assert d.target == {"x": 10, "y": 7} and d.duration_frames == 300 and d.confidence == 0.5
    long = parse_directive(answer(reasoning="x" * 5000), QUEST)
    assert len(long.reasoning) == QUEST.max_reasoning_chars
    assert parse_directive(answer(action=" wait ", target=None), QUEST).action == "wait"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty answer"),
        ("I think you should go left.", "no JSON object"),
        ("[1, 2, 3]", "no JSON object"),
        (answer(action="dance"), "action 'dance' is not one of"),
        (answer(target={"x": 1111111, "y": 3}), "target.x 1111111 is out of range 0..29"),
        (answer(target={"x": 3, "y": -1}), "target.y -1 is out of range 0..19"),
        (answer(target=None), "action 'collect' needs a target"),
        (answer(target={"option": 1}), "BonkQuest has no menu options"),
        (answer(target={"x": 1}), "target must be {x, y} or {option}"),
        (answer(duration_frames=0), "duration_frames 0 is out of range"),
        (answer(duration_frames=10**9), "duration_frames 1000000000 is out of range"),
        (answer(confidence=1.5), "confidence 1.5 is out of range 0..1"),
        (answer(confidence=True), "confidence must be a number, not a boolean"),
        (answer(goal=""), "goal is empty"),
        (answer(goal=7), "goal must be a string"),
        (json.dumps({"goal": "x"}), "missing field(s): reasoning, action"),
        (answer(extra=1), "unknown field(s): extra"),
    ],
)
def test_strict_validation_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(DirectiveError, match=re.escape(message)):
        parse_directive(text, QUEST)


def test_menu_options_are_range_checked_in_the_arena() -> None:
    d = parse_directive(answer(action="choose_upgrade", target={"option": 2}), ARENA)
    assert d.option == 2 and d.tile is None
    with pytest.raises(DirectiveError, match="out of range 0..2"):
        parse_directive(answer(action="choose_upgrade", target={"option": 3}), ARENA)
    with pytest.raises(DirectiveError, match="needs a menu option"):
        parse_directive(answer(action="choose_upgrade", target={"x": 1, "y": 1}), ARENA)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_a_directive_or_a_directive_error(text: str) -> None:
    try:
        d = parse_directive(text, QUEST)
    except DirectiveError:
        return
    jsonschema.validate(
        {k: v for k, v in d.to_dict().items() if k not in ("source", "reason")}, QUEST.schema()
    )


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "goal": st.text(min_size=1, max_size=100),
            "reasoning": st.text(max_size=300),
            "action": st.sampled_from(QUEST.actions + ("bogus",)),
            "target": st.one_of(
                st.none(),
                st.fixed_dictionaries({"x": st.integers(-5, 40), "y": st.integers(-5, 40)}),
            ),
            "duration_frames": st.integers(-10, 5000),
            "confidence": st.floats(-1, 2, allow_nan=False),
        }
    )
)
def test_validated_directives_always_satisfy_the_schema(data: dict) -> None:
    try:
        d = QUEST.validate(data)
    except DirectiveError:
        return
    jsonschema.validate(
        {k: v for k, v in d.to_dict().items() if k not in ("source", "reason")}, QUEST.schema()
    )


#: Answers that break Python's JSON reader itself: a 5000-digit integer (over the 4300-digit
#: conversion limit: ValueError) and `[` nested past the interpreter's stack (RecursionError).
HUGE_NUMBER = answer(duration_frames=0).replace(
    '"duration_frames": 0', '"duration_frames": ' + "9" * 5000
)
DEEP_NESTING = answer().replace('"reasoning": "it is close"', '"reasoning": ' + "[" * 100_000)


def test_a_5000_digit_number_is_a_directive_error() -> None:
    assert "9" * 5000 in HUGE_NUMBER
    with pytest.raises(DirectiveError, match="unreadable number"):
        parse_directive(HUGE_NUMBER, QUEST)


def test_deep_nesting_is_a_directive_error() -> None:
    with pytest.raises(DirectiveError, match="nested too deeply"):
        parse_directive(DEEP_NESTING, QUEST)
    # the same depth of objects in prose scans quickly too
    with pytest.raises(DirectiveError):
        parse_directive("{" * 100_000, QUEST)


def test_fallback_is_a_defined_safe_directive() -> None:
    assert QUEST.fallback("timeout: x").to_dict() == {
        "goal": "keep safe until the strategist answers",
        "reasoning": "",
        "action": "wait",
        "target": None,
        "duration_frames": 48,
        "confidence": 0.0,
        "source": "fallback",
        "reason": "timeout: x",
    }
    assert ARENA.fallback("invalid").action == "flee"


@pytest.mark.parametrize(
    ("file_name", "family"),
    [
        ("Qwen2.5-VL-7B-Instruct-Q4_K_M.gguf", "qwen2.5-vl"),
        ("llava-v1.6-mistral-7b.Q4_K_M.gguf", "llava-1.6"),
        ("llava-v1.5-7b-Q4_K.gguf", "llava-1.5"),
        ("MiniCPM-V-2_6-Q4_K_M.gguf", "minicpm-v"),
        ("moondream2-text-model-f16.gguf", "moondream2"),
        ("nanollava-text-model-f16.gguf", "nanollava"),
        ("gemma-3-4b-it-Q4_K_M.gguf", "mtmd"),
        ("gemma-4-e2b-it.gguf", "gemma4"),
        ("SmolVLM-256M-Instruct.gguf", "mtmd"),
        ("some-unknown-vlm.gguf", "mtmd"),
    ],
)
def test_handler_family_from_file_names(file_name: str, family: str) -> None:
    assert resolve_family(file_name, None, "auto").name == family


@pytest.mark.llm
def test_handler_family_by_name_and_from_gguf_metadata(tmp_path) -> None:
    import llama_cpp.llama_chat_format as formats

    for name in FAMILY_NAMES:  # every handler named in the table exists in llama-cpp-python
        assert hasattr(formats, family_by_name(name).handler)
    assert family_by_name("llava15").name == "llava-1.5"
    with pytest.raises(Exception, match="unknown chat handler 'nope'; use 'auto' or one of"):
        family_by_name("nope")
    # the tiny model's general.name says nothing about a family: the generic handler
    model = write_tiny_llama(tmp_path / "model.gguf")
    assert resolve_family(model, None, "auto").name == "mtmd"
