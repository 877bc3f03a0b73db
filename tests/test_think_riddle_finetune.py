"""`metabonk think finetune` on the oracle's riddle-quest decision logs: the
logs pair prompts that carry the sage's words with the option that names the same mark, and a
fine-tune of a few steps on them writes a GGUF that loads and answers a riddle's choice prompt.
A few steps teach nothing measurable; the 60-minute run and its win rate are not a test."""

from __future__ import annotations

import re
import time
from pathlib import Path

import gymnasium as gym
import pytest
from metabonk_gym.cli.main import app
from oracle_logs import oracle_log
from typer.testing import CliRunner

from metabonk_gym.think.directive import parse_answer
from metabonk_gym.think.engines import LlamaCppEngine
from metabonk_gym.think.finetune import load_pairs
from metabonk_gym.think.games import adapter_for
from metabonk_gym.think.models import check_gguf
from metabonk_gym.think.prompts import PromptBuilder
from metabonk_gym.think.view import GameView

QUEST = "MetaBonk/BonkQuest-v0"
SAID = re.compile(r"sage_said=the key of this room lies under the ([A-Z-]+) mark")
runner = CliRunner()


def test_the_oracles_riddle_logs_answer_the_mark_the_sage_names(tmp_path: Path) -> None:
    logs = oracle_log(tmp_path / "log", "riddles_room3", range(3), room=3)
    game, pairs = load_pairs([logs])
    riddles = [p for p in pairs if SAID.search(p.user)]
    assert game == "BonkQuest" and len(riddles) >= 3
    for pair in riddles:
        named = SAID.search(pair.user).group(1)  # type: ignore[union-attr]
        options = dict(line.split(" ", 1) for line in pair.user.splitlines() if line[:1].isdigit())
        assert f"step onto the {named} mark" in options[pair.answer]


@pytest.mark.llm("real-model", "finetune")
@pytest.mark.slow
@pytest.mark.timeout(2400)  # minutes on an idle CPU; a shared one can be 30x slower
def test_a_few_steps_on_riddle_logs_write_a_gguf_that_answers_a_riddle(tmp_path: Path) -> None:
    logs = oracle_log(tmp_path / "log", "riddles_room3", range(2), room=3)
    run = tmp_path / "run"
    cli = runner.invoke(
        app,
        ["think", "finetune", str(logs), "--out", str(run), "--steps", "2", "--batch-size", "1"]
        + ["--rank", "4", "--top-layers", "2", "--save-every", "1"],
    )
    assert cli.exit_code == 0, cli.output
    gguf = check_gguf(run / "model.gguf")
    engine = LlamaCppEngine(gguf, n_ctx=2048)
    env = gym.make(QUEST, state="riddles_room3")
    try:
        obs, info = env.reset(seed=5)
        adapter = adapter_for(env)
        builder = PromptBuilder.for_env(env, adapter, None, profile="choice")
        request = builder.build(GameView.capture(env, info, 0, obs), [], "start", vision=False)
        assert SAID.search(request.user) and len(request.choices) >= 5
        completion = engine.complete(request, time.monotonic() + 600)
        directive = parse_answer(completion.text, adapter.spec, request.choices)
        assert directive.source == "model"
        assert (directive.action, directive.target) in [
            (c.action, c.target) for c in request.choices
        ]
    finally:
        engine.close()
        env.close()
