"""`metabonk think mix`: a decision log of whole groups and seeded samples of other logs' calls,
on logs written by the project's own `DecisionLog` and by the oracle playing the riddle quest."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from metabonk_gym.cli.main import app
from oracle_logs import oracle_log
from typer.testing import CliRunner

from metabonk_gym.think.directive import Directive
from metabonk_gym.think.engines import ThinkRequest
from metabonk_gym.think.finetune import load_pairs
from metabonk_gym.think.log import DecisionLog, DecisionLogNotFoundError, read_decisions
from metabonk_gym.think.mixlogs import MixError, MixSpec, mix_logs
from metabonk_gym.think.strategist import ThinkResult
from metabonk_gym.think.view import GameView

runner = CliRunner()
MOVE = Directive("go", "", "move", {"x": 1, "y": 2}, 30, 0.9, source="oracle")
#: The riddle-heavy design: every alpha call, a third as many beta calls, half as many others.
FLAGS = ["--group", "alpha=alpha", "--group", "beta=beta|gamma", "--keep", "alpha"]
FLAGS += ["--ratio", "beta=1/3", "--ratio", "rest=1/2"]
GROUPS = ["alpha=alpha", "beta=beta|gamma"]
RATIOS = ["beta=1/3", "rest=1/2"]


def write_log(folder: Path, goals: list[str], system: str) -> Path:
    """A decision log of one run: a call (and its outcome) per goal, the prompt's goal line
    `Goal: GOAL`, written by `DecisionLog`."""
    log = DecisionLog(folder, game="Demo", frames=False, meta={"system_prompt": system})
    view = GameView("Demo", 0, np.zeros((8, 8, 3), np.uint8), {}, {})
    for i, goal in enumerate(goals):
        request = ThinkRequest(system, f"hp=3, call {i}\nGoal: {goal}\n1 go", {})
        log.record_call(
            i, view, "start", "pause", ThinkResult(MOVE, 0.01, raw="{}", request=request)
        )
        log.record_outcome(i, {"status": "done", "frames": 30})
    return folder


@pytest.fixture
def logs(tmp_path: Path) -> list[Path]:
    """Two logs: 9 alpha, 7 beta/gamma and 20 other calls in all, goals interleaved."""
    one = ["alpha quest"] * 5 + ["beta quest"] * 4 + ["walk on"] * 12
    two = ["find gamma"] * 3 + ["alpha again"] * 4 + ["wait"] * 8
    random.Random(5).shuffle(one)
    return [
        write_log(tmp_path / "one", one, "System one."),
        write_log(tmp_path / "two", two, "S2."),
    ]


def reference_mix(sources: list[Path]) -> bytes:
    """The riddle-heavy log's original recipe, a standalone script (kept here as the oracle of
    the tool's sampling order): every alpha call, then `Random(0).sample` of the beta calls and
    then of the others."""
    metas: list[str] = []
    alpha: list[str] = []
    beta: list[str] = []
    other: list[str] = []
    for src in sources:
        for line in (src / "decisions.jsonl").read_text().splitlines(keepends=True):
            r = json.loads(line)
            if r.get("type") == "meta":
                metas.append(line)
            elif r.get("type") == "call" and r.get("user"):
                goal = r["user"].split("Goal:")[1].split("\n")[0] if "Goal:" in r["user"] else ""
                if "alpha" in goal:
                    alpha.append(line)
                elif "beta" in goal or "gamma" in goal:
                    beta.append(line)
                else:
                    other.append(line)
    rng = random.Random(0)
    keep = alpha + rng.sample(beta, min(len(beta), len(alpha) // 3))
    keep += rng.sample(other, min(len(other), len(alpha) // 2))
    return "".join(metas + keep).encode()


def invoke(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, ["think", "mix", *args])
    return result.exit_code, result.output


def test_mix_keeps_the_groups_sizes_and_metas_and_finetune_reads_it(
    logs: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "mix"
    code, output = invoke([*map(str, logs), "--out", str(out), *FLAGS])
    assert code == 0, output
    assert "alpha 9 (kept 9), beta 7 (kept 3), rest 20 (kept 4)" in output
    records = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert [r["type"] for r in records] == ["meta"] * 2 + ["call"] * 16  # no outcome records
    goals = [r["user"].split("Goal: ")[1].split("\n")[0] for r in records[2:]]
    assert sum("alpha" in g for g in goals) == 9 and goals[:9] == [g for g in goals if "alpha" in g]
    assert sum(("beta" in g or "gamma" in g) for g in goals[9:12]) == 3
    # every source line is copied as it was, the metas too
    source_lines = {ln for log in logs for ln in (log / "decisions.jsonl").read_text().splitlines()}
    assert set((out / "decisions.jsonl").read_text().splitlines()) <= source_lines
    game, pairs = load_pairs([out])
    assert game == "Demo" and len(pairs) == 16
    source_of = {r["user"]: log.name for log in logs for r in read_decisions(log)}
    systems = {"one": "System one.", "two": "S2."}
    assert all(pair.system == systems[source_of[pair.user]] for pair in pairs)


def test_the_sampling_is_the_original_recipes_byte_for_byte_and_seeded(
    logs: list[Path], tmp_path: Path
) -> None:
    spec = MixSpec.parse(GROUPS, ["alpha"], RATIOS)
    first = mix_logs(logs, tmp_path / "a", spec).path.read_bytes()
    assert first == reference_mix(logs)
    assert mix_logs(logs, tmp_path / "b", spec).path.read_bytes() == first
    others = {
        mix_logs(
            logs, tmp_path / f"s{seed}", MixSpec.parse(GROUPS, ["alpha"], RATIOS, seed)
        ).path.read_bytes()
        for seed in (1, 2, 3)
    }
    assert first not in others and len(others) > 1
    assert {len(b.splitlines()) for b in others} == {len(first.splitlines())}


def test_match_the_whole_prompt_and_drop_groups_neither_kept_nor_sampled(
    logs: list[Path], tmp_path: Path
) -> None:
    # "call 1\n" is in the prompt's first line, not the goal line
    goal = MixSpec.parse(["first=call 1$"], keep=["first"])
    with pytest.raises(MixError, match="keeps no call"):
        mix_logs(logs, tmp_path / "goal", goal)
    whole = MixSpec.parse(["first=(?m)call 1$", "noise=alpha"], keep=["first"], match="prompt")
    result = mix_logs(logs, tmp_path / "whole", whole)
    # one call 1 per log; log one's is an alpha call, and the first matching group wins
    assert result.found == {"first": 2, "noise": 8, "rest": 26}
    assert result.kept == {"first": 2, "noise": 0, "rest": 0}
    everything = mix_logs(logs, tmp_path / "all", MixSpec.parse([], keep=["rest"]))
    assert everything.kept == {"rest": 36}


def test_the_riddle_quests_mark_calls_of_oracle_logs(tmp_path: Path) -> None:
    """Real oracle logs (the riddle quest's room 3, and room 1 of the classic game): the mark
    calls all kept, and load_pairs reads them with their system prompts."""
    sources = [
        oracle_log(tmp_path / "r3", "riddles_room3", range(3)),
        oracle_log(tmp_path / "r1", "room1", range(1)),
    ]
    out = tmp_path / "mix"
    code, output = invoke(
        [*map(str, sources), "--out", str(out), "--group", "mark=onto the mark"]
        + ["--keep", "mark", "--ratio", "rest=1/2"]
    )
    assert code == 0, output
    _, source_pairs = load_pairs(sources)
    marks = [p for p in source_pairs if "onto the mark" in _goal(p.user)]
    assert len(marks) >= 3
    _, pairs = load_pairs([out])
    assert set(pairs) <= set(source_pairs)
    assert sorted(p.user for p in pairs if "onto the mark" in _goal(p.user)) == sorted(
        p.user for p in marks
    )
    assert len(pairs) == len(marks) + min(len(source_pairs) - len(marks), len(marks) // 2)


def _goal(user: str) -> str:
    return user.split("Goal:")[1].split("\n")[0] if "Goal:" in user else ""


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--group", "a=(", "--keep", "a"], "--group a: bad pattern '('"),
        (["--group", "a", "--keep", "a"], "--group 'a' is not NAME=REGEX"),
        (["--group", "rest=x", "--keep", "rest"], "--group rest: the name is the unmatched"),
        (["--group", "a=x", "--group", "a=y", "--keep", "a"], "--group a: the name is given twice"),
        (["--group", "a=x", "--keep", "b"], "--keep b: no such group (groups: a, rest)"),
        (["--group", "a=x", "--keep", "a", "--ratio", "rest=1/0"], "--ratio rest=1/0: not a"),
        (["--group", "a=x", "--keep", "a", "--ratio", "rest=-1"], "must be a fraction in"),
        (["--group", "a=x", "--ratio", "a=1/2"], "name one --keep group"),
        (["--group", "a=x", "--keep", "a", "--ratio", "a=1"], "group a is both in --keep and"),
        (["--keep", "rest", "--match", "user"], "--match must be one of goal, prompt"),
        (["--keep", "rest", "--seed", "-1"], "--seed must be a whole number"),
    ],
)
def test_bad_flags_are_one_line_errors(
    logs: list[Path], tmp_path: Path, flags: list[str], message: str
) -> None:
    code, output = invoke([str(logs[0]), "--out", str(tmp_path / "mix"), *flags])
    assert code == 2 and output.count("\n") == 1 and output.startswith("error: "), output
    assert message in output, output
    assert not (tmp_path / "mix").exists()


def test_bad_sources_and_outputs_are_one_line_errors_that_keep_files(
    logs: list[Path], tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "decisions.jsonl").write_text('{"type": "meta", "run": "r"}\nbroken\n')
    held = tmp_path / "held"
    held.mkdir()
    (held / "decisions.jsonl").write_text("mine\n")
    one = str(logs[0])
    cases = [
        ([one, str(tmp_path / "nowhere")], "mix", "no decision log at"),
        ([one, str(tmp_path / "empty")], "mix", "no think call with a prompt"),
        ([one, one], "mix", "given twice"),
        ([one], "held", "already holds files: choose a new folder, or pass --force"),
        ([one], "one", "is one of the sources"),
        ([one], "held/decisions.jsonl", "is a file, not a folder"),
    ]
    for sources, out, message in cases:
        out_path = logs[0] if out == "one" else tmp_path / out
        code, output = invoke([*sources, "--out", str(out_path), "--keep", "rest"])
        assert code == 2 and output.count("\n") == 1 and message in output, (sources, output)
    assert (held / "decisions.jsonl").read_text() == "mine\n"
    assert not (tmp_path / "mix").exists()
    with pytest.raises(DecisionLogNotFoundError):
        mix_logs([tmp_path / "nowhere"], tmp_path / "mix", MixSpec.parse([], ["rest"]))
    code, output = invoke([one, "--out", str(held), "--keep", "rest", "--force"])
    assert code == 0 and "rest 21 (kept 21)" in output, output
    assert load_pairs([held])[0] == "Demo"


def test_logs_made_in_one_second_have_their_own_run_ids(tmp_path: Path) -> None:
    """Two logs made back to back (the first one gone, so its address may be reused) get two
    run ids, so their calls stay apart once mixed into one file."""
    runs = set()
    for i in range(20):
        log = DecisionLog(tmp_path / str(i), game="Demo", frames=False)
        runs.add(log._run)
        del log
    assert len(runs) == 20
