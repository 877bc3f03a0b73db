"""Hostile input on the command line (issue 26, item 5): the error printer prints text literally
(no rich markup read from messages or paths), output paths that cannot be written are one line
and exit code 2, and numbers out of range are refused before any work or file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from metabonk_gym.cli.errors import path_error
from one_line import one_line_error as _error
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


# ------------------------------------------------------------------ markup in messages
def test_a_closing_tag_in_a_message_prints_as_it_is() -> None:
    # rich read "[/x]" as a closing tag and died with MarkupError (a traceback)
    line = _error(["memory", "show", "run[/x]"])
    assert line.startswith("error: no memory database at run[/x]: give a run folder")


def test_brackets_in_a_file_name_are_kept(tmp_path: Path) -> None:
    # "[red]" vanished as a style: the message named "clip final.mp4"
    video = f"{tmp_path}/clip[red] final[/b].mp4"
    out = tmp_path / "out"
    line = _error(["video", "to-dataset", video, "--env", QUEST, "--out", str(out), "--no-check"])
    assert line == f"error: video not found: {video}"
    assert not out.exists()


def test_every_console_of_the_cli_is_plain() -> None:
    """Only `plain_console()` (markup off) builds a rich Console in cli/: a new
    `Console()` would read user text as markup again."""
    offenders = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                plain = any(
                    k.arg == "markup" and getattr(k.value, "value", None) is False
                    for k in node.keywords
                )
                if name == "Console" and not plain:
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


# ------------------------------------------------------------------ output paths
def test_an_output_under_proc_is_one_line(tmp_path: Path) -> None:
    line = _error(["video", "to-dataset", str(tmp_path), "--env", QUEST, "--out", "/proc/mb/x"])
    assert line == (
        "error: cannot write or read /proc/mb: No such file or directory; choose another path"
    )


def test_a_file_where_a_folder_is_expected_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = blocker / "dataset"
    line = _error(["video", "to-dataset", str(tmp_path), "--env", QUEST, "--out", str(out)])
    assert line == (
        f"error: cannot write or read {out}: a part of the path is a file, not a folder; "
        "choose another path"
    )
    assert blocker.read_text() == "not a folder"


def test_path_errors_name_the_file_asked_for_not_a_temporary_one() -> None:
    from metabonk_gym.utils import atomic_write_text

    with pytest.raises(OSError) as caught:
        atomic_write_text(Path("/proc/mb-report.json"), "{}")
    assert path_error(caught.value) == (
        "cannot write or read /proc/mb-report.json: No such file or directory; choose another path"
    )


def test_socket_errors_are_left_to_their_handlers() -> None:
    assert path_error(ConnectionRefusedError(111, "Connection refused")) is None


# ------------------------------------------------------------------ numbers
@pytest.mark.parametrize(
    ("fps", "shown"), [("inf", "inf"), ("1e-300", "1e-300"), ("nan", "nan"), ("0", "0.0")]
)
def test_video_fps_out_of_range_is_refused_before_any_file(
    tmp_path: Path, fps: str, shown: str
) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    out = tmp_path / "out"
    line = _error(
        ["video", "to-dataset", str(frames), "--env", QUEST, "--out", str(out), "--fps", fps]
    )
    assert line == f"error: --fps must be a number in [0.1, 1000], not {shown}"
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--steps", "-4"], "--steps must be a whole number in [1, 10000], not -4"),
        (["--steps", "100000000"], "--steps must be a whole number in [1, 10000], not 100000000"),
        (["--fps", "0"], "--fps must be a number in [0.1, 240], not 0.0"),
    ],
)
def test_dream_numbers_are_refused_before_the_model_is_read(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    video = tmp_path / "dream.mp4"
    line = _error(["dream", str(tmp_path / "no-model"), "--video", str(video), *flags])
    assert line == f"error: {message}"
    assert not video.exists()


def test_a_plan_count_is_capped_before_the_list_is_built() -> None:
    from metabonk_gym.worldmodel.dream import parse_plan
    from metabonk_gym.worldmodel.files import WorldModelError

    with pytest.raises(
        WorldModelError, match=r"plan item '0\*99999999999': a plan holds 1\.\.10000"
    ):
        parse_plan("0*99999999999", n_actions=4)
    with pytest.raises(WorldModelError, match="a count of at least 1"):
        parse_plan("1*-5", n_actions=4)
    assert parse_plan("1*3,0", n_actions=4) == [1, 1, 1, 0]
