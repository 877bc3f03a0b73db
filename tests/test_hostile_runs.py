"""A shared run directory is data, never authority (issue 36, item 1; item 5's `--resume`).

Each test builds the hostile run itself from one tiny real run (PPO on a copy of BonkQuest's
game folder): a run holding only `run.json` and a checkpoint that names a game folder with a
`game.py`; `env_kwargs` that start a program; a thinking wrapper that would send the user's API
key to the run's URL; wrapper paths outside the run; a model zip whose `data` entry inflates to
1.5 GiB, one with an unknown ~4 GiB entry; `frame_stack: 4000000`; a YAML alias bomb; a
tampered `run.json`. Every one is a single `error:` line with exit code 2, the canary file is
never written, the listener never called, and memory and time stay bounded.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from metabonk_gym.cli.main import app
from one_line import one_line_error
from typer.testing import CliRunner

from metabonk_gym.gamedata import bundled_game_folder
from metabonk_gym.rundir import read_model_metadata
from metabonk_gym.training.errors import CheckpointError
from metabonk_gym.training.ppo import train_ppo
from metabonk_gym.training.runtrust import SharedRunError, check_run_options

GBA = "MetaBonk/GBA-v0"
FAST = {
    "n_envs": 1,
    "n_steps": 32,
    "batch_size": 32,
    "n_epochs": 1,
    "features_dim": 32,
    "max_episode_steps": 20,
    "checkpoint_every": 0,
    "video_every": 0,
    "total_steps": 32,
}
SHORT = ["--episodes", "1", "--max-steps", "5"]
#: A YAML "billion laughs": ten short lines that expand to 9 ** 10 (~3.5e9) items.
BOMB = "a: &a [1,1,1,1,1,1,1,1,1]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefghi", "bcdefghij")
)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run directory, its game folder): PPO for 32 steps on a copy of BonkQuest's data."""
    root = tmp_path_factory.mktemp("trained")
    game = root / "Game"
    game.mkdir()
    source = bundled_game_folder("BonkQuest")
    for name in ("data.json", "scenario.json", "metadata.json", "metabonk.json", "rom.gba"):
        shutil.copy(source / name, game / name)
    run = root / "run"
    train_ppo(GBA, run, overrides={**FAST, "env_kwargs": {"integration": str(game)}})
    return run, game


def _rewrite_zip(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite a model zip's `data` entry: `change` edits the parsed JSON in place."""
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(entries["data"])
    change(data)
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, blob in entries.items():
            archive.writestr(name, blob)


def shared(
    trained: tuple[Path, Path], where: Path, change: Callable[[dict[str, Any]], None]
) -> Path:
    """A copy of the trained run whose `config.yaml` and model zip's config `change` edits."""
    run = where / "shared-run"
    shutil.copytree(trained[0], run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    change(config)
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    _rewrite_zip(run / "model.zip", lambda data: change(data["metabonk"]["config"]))
    return run


def _commands(run: Path, out: Path) -> dict[str, list[str]]:
    return {
        "eval": ["eval", GBA, str(run), *SHORT],
        "zip": ["eval", GBA, str(run / "model.zip"), *SHORT],
        "play": ["play", GBA, "--agent", str(run), "--no-window", *SHORT],
        "record": ["record", GBA, "--dataset", "metabonk/shared-v0", "--agent", str(run), *SHORT],
        "ladder": ["ladder", GBA, "--agents", f"random,{run}", "--out", str(out), "--no-video"]
        + SHORT,
        "resume": ["train", "ppo", GBA, "--run-dir", str(run), "--resume", "--total-steps", "64"],
    }


# ------------------------------------------------------------------ game folder
@pytest.mark.parametrize("layout", ["sb3", "rllib"])
@pytest.mark.parametrize("command", ["eval", "play", "record", "ladder"])
def test_a_run_of_only_run_json_and_a_checkpoint_is_checked_for_game_code(
    trained: tuple[Path, Path], tmp_path: Path, layout: str, command: str
) -> None:
    """The trial's run held `run.json` and `checkpoints/step_N.zip` (or RLlib's
    `step_N/model.zip`) only: the game-folder check found no `config.yaml` or `model.zip` to
    read, and the folder's `game.py` ran."""
    game = tmp_path / "Foreign"
    shutil.copytree(trained[1], game)
    marker = tmp_path / "game-py-ran.txt"
    (game / "game.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    )
    run = tmp_path / "run"
    checkpoint = (
        run
        / "checkpoints"
        / ("step_000000032.zip" if layout == "sb3" else "step_000000032/model.zip")
    )
    checkpoint.parent.mkdir(parents=True)
    shutil.copy(trained[0] / "model.zip", checkpoint)
    _rewrite_zip(
        checkpoint,
        lambda data: data["metabonk"]["config"]["env_kwargs"].update(integration=str(game)),
    )
    (run / "run.json").write_text(json.dumps({"env_id": GBA, "algo": "ppo", "status": "stopped"}))
    line = one_line_error(_commands(run, tmp_path / "ladder")[command])
    assert f"names the game folder {game}, whose game.py is Python code" in line
    assert str(checkpoint) in line
    assert not marker.exists() and not (tmp_path / "ladder").exists()


# ------------------------------------------------------------------ programs, URLs, paths
@pytest.fixture
def canary(tmp_path: Path) -> tuple[Path, Path]:
    """(a program that writes a marker when it runs, the marker)."""
    marker = tmp_path / "program-ran.txt"
    program = tmp_path / "skyemu"
    program.write_text(f"#!/bin/sh\necho ran > {marker}\nsleep 30\n")
    program.chmod(0o755)
    return program, marker


@pytest.mark.parametrize("command", ["eval", "zip", "play", "record", "ladder", "resume"])
def test_env_kwargs_that_name_a_program_are_refused(
    trained: tuple[Path, Path], tmp_path: Path, canary: tuple[Path, Path], command: str
) -> None:
    program, marker = canary

    def change(config: dict[str, Any]) -> None:
        config["env_kwargs"].update(backend="skyemu", skyemu_binary=str(program))

    run = shared(trained, tmp_path, change)
    line = one_line_error(_commands(run, tmp_path / "ladder")[command])
    assert "sets env_kwargs.skyemu_binary; a shared run may set only data options" in line
    assert "--env-kwarg skyemu_binary=VALUE" in line
    time.sleep(0.2)
    assert not marker.exists(), "the run's program ran"


@pytest.mark.parametrize("key", ["skyemu_url", "host", "rom", "no_such_option"])
def test_only_allow_listed_env_kwargs_pass_and_the_users_own_replace_them(
    trained: tuple[Path, Path], tmp_path: Path, key: str
) -> None:
    run = shared(trained, tmp_path, lambda config: config["env_kwargs"].update({key: "x"}))
    with pytest.raises(SharedRunError, match=f"sets env_kwargs.{key};"):
        check_run_options(run)
    check_run_options(run, given_env_kwargs={"integration": str(trained[1])})
    check_run_options(trained[0])  # the run as trained: integration, nothing else


class _Listener(http.server.BaseHTTPRequestHandler):
    calls: list[dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        type(self).calls.append(dict(self.headers))
        self.send_response(500)
        self.end_headers()

    do_GET = do_POST  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """(URL of a loopback HTTP server, the headers of every request it got)."""
    _Listener.calls = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Listener)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", _Listener.calls
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("command", ["eval", "resume"])
@pytest.mark.parametrize("with_url", [True, False], ids=["base_url", "default_url"])
def test_a_thinking_wrapper_of_a_run_never_gets_the_users_api_key(
    trained: tuple[Path, Path],
    tmp_path: Path,
    listener: tuple[str, list[dict[str, str]]],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    with_url: bool,
) -> None:
    url, calls = listener
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai")
    monkeypatch.setenv("METABONK_API_KEY", "sk-canary-metabonk")
    # a stack the model fits (no directive in the observation), so before the change the
    # episode ran and the listener got "Bearer sk-canary-metabonk" on eval and on --resume
    think: dict[str, Any] = {
        "name": "pause_to_think",
        "engine": "openai",
        "directive_in_obs": False,
        "timeout_s": 1.0,
    }
    if with_url:
        think["base_url"] = url
    run = shared(trained, tmp_path, lambda config: config.update(wrappers=[think]))
    line = one_line_error(_commands(run, tmp_path / "ladder")[command])
    field = "base_url" if with_url else "engine"
    assert f"wrappers.pause_to_think.{field} to " in line
    assert "may not name a server (your METABONK_API_KEY / OPENAI_API_KEY would go to it)" in line
    time.sleep(0.2)
    assert calls == [], "the run's server was called"


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "PauseToThink", "engine": "openai"},
        {"name": "pause_to_think", "options": {"engine": "openai"}},
    ],
    ids=["class_name", "options_entry"],
)
def test_a_wrapper_spelled_another_way_is_checked_the_same(
    trained: tuple[Path, Path], tmp_path: Path, spec: dict[str, Any]
) -> None:
    run = shared(trained, tmp_path, lambda config: config.update(wrappers=[spec]))
    with pytest.raises(SharedRunError, match="pause_to_think.engine to 'openai'"):
        check_run_options(run)


@pytest.mark.parametrize(
    ("wrapper", "option"),
    [
        ("memory", "path"),
        ("pause_to_think", "log_dir"),
        ("pause_to_think", "model_path"),
        ("temporal_strip", "model"),
        ("temporal_strip", "predictor_kwargs.path"),
    ],
)
def test_wrapper_paths_outside_the_run_are_refused(
    trained: tuple[Path, Path], tmp_path: Path, wrapper: str, option: str
) -> None:
    outside = tmp_path / "outside"
    spec: dict[str, Any] = {"name": wrapper, option: str(outside / "file")}
    if option == "predictor_kwargs.path":
        spec = {"name": wrapper, "predictor": "learned", "predictor_kwargs": {"path": spec[option]}}
    if wrapper == "pause_to_think":
        spec["engine"] = "oracle"
    run = shared(trained, tmp_path, lambda config: config.update(wrappers=[spec]))
    line = one_line_error(_commands(run, tmp_path / "ladder")["eval"])
    assert f"wrappers.{wrapper}.{option} to {outside / 'file'}, outside the run's folder" in line
    assert not outside.exists()


def test_a_symlink_out_of_the_run_counts_as_outside(
    trained: tuple[Path, Path], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained[0], run)
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "logs").mkdir()
    (run / "link").symlink_to(outside)
    config = yaml.safe_load((run / "config.yaml").read_text())
    for target, inside in ((run / "logs" / "memory.db", True), (run / "link" / "memory.db", False)):
        config["wrappers"] = [{"name": "memory", "path": str(target)}]
        (run / "config.yaml").write_text(yaml.safe_dump(config))
        if inside:
            check_run_options(run)
        else:
            with pytest.raises(SharedRunError, match="outside the run's folder"):
                check_run_options(run)
    check_run_options(run, given_wrappers=True)  # a stack the user spelled out is theirs


@pytest.mark.parametrize("command", ["eval", "ladder"])
def test_a_stack_the_users_config_file_spells_out_is_theirs(
    trained: tuple[Path, Path], tmp_path: Path, command: str
) -> None:
    """A run whose thinking wrapper logs outside it is refused; the same stack in the user's
    own `--config` file is the user's: `eval` and `ladder` (which ignored the file's
    `wrappers:` and refused it) play it, and the log goes where the user's file says."""
    log = tmp_path / "outside" / "log"
    spec = {"name": "pause_to_think", "engine": "first", "directive_in_obs": False}
    spec["log_dir"] = str(log)
    run = shared(trained, tmp_path, lambda config: config.update(wrappers=[spec]))
    args = {
        "eval": ["eval", GBA, str(run), *SHORT],
        "ladder": ["ladder", GBA, "--agents", str(run), "--out", str(tmp_path / "ladder")]
        + ["--no-video", *SHORT],
    }[command]
    assert "outside the run's folder" in one_line_error(args)
    assert not log.exists()
    stack = tmp_path / "stack.yaml"
    stack.write_text(yaml.safe_dump({"wrappers": [spec]}))
    result = CliRunner().invoke(app, [*args, "--config", str(stack)])
    assert result.exit_code == 0, result.output
    assert (log / "decisions.jsonl").is_file()


# ------------------------------------------------------------------ sizes and numbers
def _write_bomb_zip(
    path: Path, base: Path, name: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`base`'s entries plus `name` inflating to `size` zero bytes, written in seconds: the
    deflate block of one zero chunk is computed once and repeated (zipfile still computes the
    real CRC, so the zip is whole)."""
    import zlib

    chunk = bytes(64 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(chunk) + packer.flush(zlib.Z_FULL_FLUSH)

    class Repeat:
        def compress(self, data: bytes) -> bytes:
            assert data == chunk[: len(data)]
            if len(data) == len(chunk):
                return block
            small = zlib.compressobj(9, zlib.DEFLATED, -15)
            return small.compress(data) + small.flush(zlib.Z_FULL_FLUSH)

        def flush(self) -> bytes:
            return b"\x03\x00"  # an empty final block

    with zipfile.ZipFile(base) as archive:
        entries = {n: archive.read(n) for n in archive.namelist() if n != name}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry, blob in entries.items():
            archive.writestr(entry, blob)
        monkeypatch.setattr(zipfile, "_get_compressor", lambda *a, **k: Repeat())
        with archive.open(name, "w", force_zip64=True) as member:
            left = size
            while left:
                member.write(chunk[: min(left, len(chunk))])
                left -= min(left, len(chunk))
        monkeypatch.undo()


def _peak_growth_mb(setup: str, code: str) -> tuple[str, float]:
    """Run `setup` then `code` in a fresh Python; (its output, how far `code` raised the
    process's peak resident memory above what `setup`, the imports, left, in MB)."""
    rss = "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss"
    probe = f"import resource\n{setup}\nbase = {rss}\n{code}\nprint('GROWTH', {rss} - base)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out, _, growth = done.stdout.rpartition("GROWTH ")
    return out, int(growth) / 1024


def test_a_model_zip_whose_data_entry_inflates_to_gigabytes_is_refused_in_bounded_memory(
    trained: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trial's 2.6 MB model.zip whose `data` entry inflates to 1.5 GiB was read whole (4.9
    GB resident): now refused from the zip's directory, before inflating anything."""
    bomb = tmp_path / "model.zip"
    _write_bomb_zip(bomb, trained[0] / "model.zip", "data", 3 << 29, monkeypatch)
    assert bomb.stat().st_size < 4 << 20
    setup = "from metabonk_gym.rundir import read_model_metadata"
    code = f"try:\n    read_model_metadata({str(bomb)!r})\nexcept Exception as exc:\n    print(exc)"
    out, growth = _peak_growth_mb(setup, code)
    assert "entry 'data' inflates to 1610612736 bytes (at most 16777216)" in out
    assert growth < 50, f"reading the zip took {growth:.0f} MB more"
    line = one_line_error(["eval", GBA, str(bomb), *SHORT])
    assert "entry 'data' inflates to 1610612736 bytes" in line


def test_an_unknown_four_gigabyte_entry_is_refused_at_once(
    trained: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trial's unknown 4 GiB entry was CRC-checked for 100 s, then the model was accepted."""
    bomb = tmp_path / "model.zip"
    _write_bomb_zip(bomb, trained[0] / "model.zip", "notes.bin", (4 << 30) - 2, monkeypatch)
    start = time.monotonic()
    with pytest.raises(CheckpointError, match=r"entry 'notes.bin' inflates to 4294967294 bytes"):
        read_model_metadata(bomb)
    assert time.monotonic() - start < 5


def test_a_frame_stack_of_four_million_is_refused(
    trained: tuple[Path, Path], tmp_path: Path
) -> None:
    """`frame_stack: 4000000` in a zip's config grew `eval` past 6 GB."""
    run = shared(trained, tmp_path, lambda config: config.update(frame_stack=4_000_000))
    for target in (run, run / "model.zip"):
        line = one_line_error(["eval", GBA, str(target), *SHORT])
        assert "config key 'frame_stack' must be <= 64, not 4000000" in line


def test_a_huge_n_steps_in_the_zips_own_data_is_not_allocated(
    trained: tuple[Path, Path], tmp_path: Path
) -> None:
    """Loading rebuilt the rollout buffer from the file's own `n_steps`: 10^9 steps of frames
    failed to allocate. The checked config's value is used instead, and the model plays."""
    model = tmp_path / "model.zip"
    shutil.copy(trained[0] / "model.zip", model)
    _rewrite_zip(model, lambda data: data.update(n_steps=10**9, batch_size=10**9))
    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["eval", GBA, str(model), *SHORT])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "frame_size",
            [4_000_000, 160],
            "env_kwargs.frame_size to 4000000; a number there must be at most 4096",
        ),
        ("reward", "x" * 5000, "env_kwargs.reward to a 5000-character text"),
        ("menu_clicks", [[0.5, 0.5]] * 5000, "env_kwargs.menu_clicks to 5000 items"),
    ],
)
def test_numbers_and_lengths_read_from_a_run_are_capped(
    trained: tuple[Path, Path], tmp_path: Path, key: str, value: Any, message: str
) -> None:
    run = shared(trained, tmp_path, lambda config: config["env_kwargs"].update({key: value}))
    line = one_line_error(["eval", GBA, str(run), *SHORT])
    assert message in line


# ------------------------------------------------------------------ YAML alias bombs
def test_a_yaml_alias_bomb_in_a_runs_config_is_refused_at_once(
    trained: tuple[Path, Path], tmp_path: Path
) -> None:
    """A 700-byte bomb inside `env_kwargs` hung the game-folder check (~10^9 nodes walked)."""
    run = tmp_path / "run"
    shutil.copytree(trained[0], run)
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(
        BOMB + text.replace("env_kwargs:\n", "env_kwargs:\n  lol: *j\n")
    )
    assert len(BOMB) < 700
    code = "import sys; from metabonk_gym.cli.main import app; app(sys.argv[1:])"
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, "eval", GBA, str(run), *SHORT],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - start < 60
    assert done.returncode == 2, done.stdout + done.stderr
    assert "YAML aliases expand this document past 100000 nodes" in done.stdout + done.stderr


def test_a_yaml_alias_bomb_in_a_config_file_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "bomb.yaml"
    config.write_text(BOMB + "env_kwargs: {lol: *j}\n")
    run = tmp_path / "run"
    line = one_line_error(
        ["train", "ppo", "MetaBonk/BonkQuest-v0", "--run-dir", str(run), "--config", str(config)]
    )
    assert "bomb.yaml: YAML aliases expand this document past 100000 nodes" in line
    assert not run.exists()
    line = one_line_error(["eval", "MetaBonk/BonkQuest-v0", "random", "--config", str(config)])
    assert "YAML aliases expand" in line


def test_a_recursive_yaml_alias_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "loop.yaml"
    config.write_text("env_kwargs: &x {self: *x}\n")
    line = one_line_error(["eval", "MetaBonk/BonkQuest-v0", "random", "--config", str(config)])
    assert "a YAML alias refers to itself" in line


# ------------------------------------------------------------------ run.json
@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            {"status": "running", "pid": 1 << 70, "host": os.uname().nodename},
            "field 'pid' is out of range",
        ),
        ({"env_id": 5}, "field 'env_id' must be str, not 5"),
        ({"status": ["running"]}, "field 'status' must be str"),
    ],
)
def test_resume_checks_run_json_fields(
    trained: tuple[Path, Path], tmp_path: Path, state: dict[str, Any], message: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained[0], run)
    before = {**json.loads((run / "run.json").read_text()), **state}
    (run / "run.json").write_text(json.dumps(before))
    line = one_line_error(_commands(run, tmp_path)["resume"])
    assert message in line and "restore run.json from a backup or delete it" in line
    assert json.loads((run / "run.json").read_text()) == before  # nothing rewritten


def test_a_huge_run_json_is_refused_before_reading(
    trained: tuple[Path, Path], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained[0], run)
    with (run / "run.json").open("r+b") as file:
        file.truncate(3 << 30)  # sparse: 3 GiB on paper, nothing on disk
    line = one_line_error(_commands(run, tmp_path)["resume"])
    assert "run.json is 3221225472 bytes; a run's run.json is at most 1048576" in line


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            {"milestones": [{"value": 3, "state": "/etc/passwd"}]},
            "is not in the run's swarm/ folder",
        ),
        ({"milestones": [{"value": "3", "state": "swarm/x.state"}]}, "a milestone needs a whole"),
        ({"stages": [1, 2]}, "field 'stages' must list mappings"),
    ],
)
def test_a_swarm_resume_reads_only_its_own_milestone_states(
    tmp_path: Path, state: dict[str, Any], message: str
) -> None:
    """`curriculum --swarm --resume` starts every env from the last milestone's state file:
    one named anywhere on the machine, or an entry of the wrong shape (a traceback before), is
    refused."""
    from metabonk_gym.rundir import RunDir
    from metabonk_gym.training.errors import RunDirError

    (tmp_path / "run.json").write_text(json.dumps(state))
    with pytest.raises(RunDirError, match=message):
        RunDir(tmp_path).read_state()
    inside = {"milestones": [{"value": 3, "state": str(tmp_path / "swarm" / "rooms_0003.state")}]}
    (tmp_path / "run.json").write_text(json.dumps(inside))
    assert RunDir(tmp_path).read_state() == inside
