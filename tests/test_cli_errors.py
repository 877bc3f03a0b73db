"""What a new or careless user meets on the command line (issue 12, items 14, 17-20): one-line
errors with exit code 2 before any work, progress lines in logs, no invisible human play, and
the README and setup script that get a fresh clone going."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import typer
from metabonk_gym.cli.main import app
from one_line import one_line_error
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
QUEST = "MetaBonk/BonkQuest-v0"
METABONK = [sys.executable, "-m", "metabonk_gym.cli.main"]


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


def test_every_command_maps_package_errors_in_one_place() -> None:
    def commands(group: typer.Typer):
        yield from group.registered_commands
        for sub in group.registered_groups:
            yield from commands(sub.typer_instance)

    found = list(commands(app))
    assert len(found) > 15
    unguarded = [
        i.name or i.callback.__name__
        for i in found
        if not getattr(i.callback, "one_line_errors", False)
    ]
    assert unguarded == []


@pytest.mark.parametrize(
    ("flags", "key"),
    [
        (["--set", "learning_rate=-1"], "learning_rate"),
        (["--total-steps", "0"], "total_steps"),
        (["--set", "gamma=1.5"], "gamma"),
        (["--set", "clip_range=0"], "clip_range"),
    ],
)
def test_bad_numbers_are_one_line_and_touch_nothing(
    tmp_path: Path, flags: list[str], key: str
) -> None:
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "ppo", QUEST, "--run-dir", str(run_dir), *flags])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert key in line and "must be" in line
    assert not run_dir.exists()


def test_a_non_numeric_reward_weight_is_one_line(tmp_path: Path) -> None:
    spec = '{"hurt": {"type": "penalty", "variable": "hp", "weight": "abc"}}'
    run_dir = tmp_path / "run"
    cmd = ["train", "ppo", QUEST, "--run-dir", str(run_dir), "--set", f"reward={spec}"]
    result = CliRunner().invoke(app, [*cmd, "--total-steps", "64", "--n-envs", "1"])
    assert result.exit_code == 2, result.output
    assert "abc" in _one_error_line(result)
    assert not run_dir.exists()


def test_distill_without_a_log_or_learnable_calls_is_one_line(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["distill", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "no decision log" in _one_error_line(missing)
    (tmp_path / "decisions.jsonl").write_text('{"fallback": true}\n')
    empty = CliRunner().invoke(app, ["distill", str(tmp_path), "--out", str(tmp_path / "p.pt")])
    assert empty.exit_code == 2 and "no learnable calls" in _one_error_line(empty)
    assert not (tmp_path / "p.pt").exists()


def test_serve_vlm_with_a_missing_model_or_engine_is_one_line(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["serve-vlm", str(tmp_path / "no.gguf")])
    assert missing.exit_code == 2 and "no.gguf" in _one_error_line(missing)
    import importlib.util

    if importlib.util.find_spec("vllm") is None:  # the GPU engines are optional extras
        engine = CliRunner().invoke(app, ["serve-vlm", "Qwen/Qwen2.5-VL-3B", "--engine", "vllm"])
        assert engine.exit_code == 2 and "pip install vllm" in _one_error_line(engine)


@pytest.mark.parametrize("where", ["file-as-folder", "proc"])
def test_eval_out_that_cannot_be_written_fails_before_evaluating(
    tmp_path: Path, where: str
) -> None:
    if where == "file-as-folder":
        (tmp_path / "a_file").write_text("x")
        out = tmp_path / "a_file" / "report.json"
    else:
        out = Path("/proc/metabonk-report.json")  # nobody, not even root, creates files here
    cmd = [*METABONK, "eval", QUEST, "random", "--episodes", "100000", "--out", str(out)]
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--out" in lines[0] and str(out) in lines[0]
    assert time.monotonic() - start < 30


def test_eval_report_best_episode_is_an_int(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    cmd = ["eval", QUEST, "random", "--episodes", "2", "--max-steps", "8"]
    result = CliRunner().invoke(app, [*cmd, "--out", str(out), "--video", str(tmp_path / "v")])
    assert result.exit_code == 0, result.output
    videos = json.loads(out.read_text())["videos"]
    assert isinstance(videos["best_episode"], int) and isinstance(videos["worst_episode"], int)
    assert Path(videos["best"]).is_file()


@pytest.mark.parametrize(
    "environ",
    [{"SDL_VIDEODRIVER": "dummy", "DISPLAY": ":0"}, {"SDL_VIDEODRIVER": None, "DISPLAY": None}],
)
def test_a_human_with_no_display_is_refused(tmp_path: Path, environ: dict) -> None:
    environ = {**environ, "WAYLAND_DISPLAY": None}
    runner = CliRunner()
    play = runner.invoke(app, ["play", QUEST, "--max-steps", "5"], env=environ)
    assert play.exit_code == 2
    assert "needs a window" in play.output.splitlines()[-1]
    dataset = "test/nodisplay-v0"
    record = runner.invoke(
        app,
        ["record", QUEST, "--agent", "human", "--dataset", dataset, "--episodes", "1"],
        env=environ,
    )
    assert record.exit_code == 2 and "needs a window" in _one_error_line(record)
    from metabonk_gym.training.datasets import check_dataset_id  # nothing was published

    check_dataset_id(dataset)


def test_training_in_a_log_prints_progress_lines(tmp_path: Path) -> None:
    cmd = [*METABONK, "train", "ppo", QUEST, "--run-dir", str(tmp_path / "run"), "--n-envs", "1"]
    cmd += ["--total-steps", "1024", "--video-every", "0", "--progress-every", "0.5"]
    cmd += ["--set", "n_steps=128", "--set", "batch_size=64", "--set", "n_epochs=1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "steps/s" in line]
    assert len(lines) >= 2, done.stderr
    assert lines[-1].startswith("PPO BonkQuest-v0: 1024/1024 steps (100%)")
    assert "episodes" in lines[-1]
    assert "steps/s" not in done.stdout  # stdout keeps only the result


def test_readme_says_to_make_a_venv_and_documents_datasets_and_trust() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && . .venv/bin/activate" in readme
    assert "MINARI_DATASETS_PATH" in readme and "~/.minari" in readme
    assert "docs/trust.md" in readme and (ROOT / "docs" / "trust.md").is_file()
    rewards = readme.split("### Rewards", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    assert "import metabonk_gym" in rewards
    namespace: dict = {}
    exec(compile(rewards, "README rewards example", "exec"), namespace)
    env = namespace["env"]
    env.reset(seed=0)
    _, _, _, _, info = env.step(0)
    assert set(info["reward_terms"]) == {"explore", "keys", "hurt", "win"}
    env.close()


def test_setup_sh_makes_a_venv_on_an_externally_managed_python(tmp_path: Path) -> None:
    """Run the real script from a copy, on the machine's system Python, with an unknown mode so
    it stops right after choosing where to install."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    assert system is not None
    probe = "import os, sys, sysconfig; print(sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"
    managed = (
        subprocess.run([system, "-c", probe], capture_output=True, text=True).stdout.strip()
        == "True"
    )
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", "scripts/setup.sh", "no-such-mode"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "unknown mode" in done.stderr
    assert (tmp_path / ".venv" / "bin" / "python").exists() == managed, done.stderr
    assert ("PEP 668" in done.stderr) == managed
    assert sysconfig.get_path("stdlib")  # the probe's own API exists here too
    assert os.path.isdir(tmp_path / "scripts")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        # a value click cannot convert: one line naming the option and the command's --help
        (
            ["bench", "learning", "--seeds", "abc"],
            ["'--seeds'", "'metabonk bench learning --help'"],
        ),
        # below an option's minimum
        (["bench", "learning", "--seeds", "0"], ["'--seeds'", "greater than or equal to 1"]),
        # a missing required argument
        (["eval"], ["Missing argument 'env_id'", "'metabonk eval --help'"]),
        # a choice that is not one of the choices
        (["bench", "bonklink", "--frame-format", "png"], ["'--frame-format'", "'png'", "jpeg"]),
        # a typer.BadParameter raised by a command's own check
        (["bench", "advice", "--order", "xyz"], ["--order", "takes seeds like 2,1,0"]),
        # an unknown command or option
        (["nosuch"], ["No such command 'nosuch'", "'metabonk --help'"]),
        (["eval", "--bogus"], ["No such option: --bogus"]),
    ],
)
def test_bad_command_line_input_is_one_error_line(args: list[str], words: list[str]) -> None:
    """click's own usage errors take the CLI's one error path (`OneLineErrorsGroup`): one
    `error:` line and exit code 2, not typer's boxed usage panel."""
    line = one_line_error(args)
    assert "Usage" not in line and "╭" not in line
    for word in words:
        assert word in line, line


def test_the_installed_command_prints_usage_errors_as_one_line() -> None:
    """The real entry point (a process of its own, stderr apart): one line on stderr, exit 2,
    nothing on stdout; a bare group still prints its help."""
    script = Path(sysconfig.get_path("scripts")) / "metabonk"  # the console script pip made
    assert script.is_file(), f"no installed metabonk script at {script}: pip install -e . first"
    bad = subprocess.run(
        [str(script), "train", "ppo", QUEST, "--total-steps", "abc"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2, bad.stderr
    assert bad.stdout == "" and bad.stderr.count("\n") == 1, bad.stderr
    assert bad.stderr.startswith("error: Invalid value for '--total-steps'")
    assert bad.stderr.rstrip().endswith("try 'metabonk train ppo --help'")
    bare = subprocess.run([str(script), "bench"], capture_output=True, text=True, timeout=120)
    assert "Usage" in bare.stdout + bare.stderr and "error:" not in bare.stderr
