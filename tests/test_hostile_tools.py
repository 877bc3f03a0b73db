"""Files the tools read, made hostile (issue 36, item 3): a GGUF whose counts the file cannot
hold, a decision log of gigabytes or of lines that are not objects, a RAM session that names a
FIFO or holds arrays of the wrong shape. Each is one line and exit code 2 (or skipped where a
log may hold junk), in bounded memory and time."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from one_line import one_line_error as _error


# ------------------------------------------------------------------ GGUF
def gguf_bomb(path: Path) -> Path:
    """49 bytes: a GGUF v3 header, one metadata key whose array claims 2^61 u32 values."""
    data = struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
    data += struct.pack("<IIQ", 9, 4, 1 << 61)
    assert len(data) == 49
    path.write_bytes(data)
    return path


def test_a_gguf_claiming_2_61_values_is_refused_in_one_line(tmp_path: Path) -> None:
    bomb = gguf_bomb(tmp_path / "bomb.gguf")
    assert _error(["think", "check", str(bomb)]) == (
        f"error: {bomb} is a broken GGUF model (metadata key k: an array of "
        "2305843009213693952 values does not fit in the file); download or write it again"
    )


def test_a_gguf_bomb_costs_no_memory(tmp_path: Path) -> None:
    """The trial's `think check` passed 4 GB on it (gguf's reader sized its lists from the
    claim). In a child capped at 1.5 GiB of address space, the check refuses it from the
    header with a few MB more than the imports took."""
    bomb = gguf_bomb(tmp_path / "bomb.gguf")
    script = (
        "import resource, sys\n"
        "from metabonk_gym.think.models import BadModelFileError, check_gguf\n"
        "import gguf\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 29, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    check_gguf(sys.argv[1])\n"
        "except BadModelFileError as exc:\n"
        "    print(exc)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(bomb)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    message, grown_mb = done.stdout.strip().splitlines()
    assert "does not fit in the file" in message
    assert int(grown_mb) < 64


@pytest.mark.parametrize(
    "change, problem",
    [
        (lambda d: d[:40], "metadata key k: the file ends inside it"),
        (lambda d: d[:24] + struct.pack("<Q", 1 << 60) + d[32:], "a string of"),
        (lambda d: d[:8] + struct.pack("<Q", 1 << 40) + d[16:], "tensors do not fit"),
    ],
)
def test_other_counts_past_the_file_are_refused(tmp_path: Path, change, problem: str) -> None:
    from metabonk_gym.think.models import gguf_layout_problem

    sound = struct.pack("<4sIQQ", b"GGUF", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
    sound += struct.pack("<IIQ", 9, 4, 2) + bytes(8)
    path = tmp_path / "m.gguf"
    path.write_bytes(sound)
    assert gguf_layout_problem(path) is None
    path.write_bytes(change(sound))
    assert problem in str(gguf_layout_problem(path))


# ------------------------------------------------------------------ decision logs
DIRECTIVE = {
    "goal": "key",
    "reasoning": "",
    "action": "collect",
    "target": {"x": 1, "y": 2},
    "duration_frames": 60,
    "confidence": 1.0,
    "source": "oracle",
}


def decision_log(folder: Path, junk: bytes = b"", hole: int = 0) -> Path:
    """A decision log of one game with two calls, `junk` lines between them and a `hole` of
    that many zero bytes (a sparse region: one endless line) before the second."""
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"type": "meta", "run": "r", "game": "BonkQuest", "system_prompt": "You play."}

    def call(i: int) -> bytes:
        record = {"type": "call", "run": "r", "id": i, "user": f"room {i}", "directive": DIRECTIVE}
        return json.dumps(record).encode() + b"\n"

    path = folder / "decisions.jsonl"
    with open(path, "wb") as handle:
        handle.write(json.dumps(meta).encode() + b"\n" + call(1) + junk)
        if hole:
            handle.seek(hole, 1)
            handle.write(b"\n")
        handle.write(call(2))
    return folder


def test_lines_that_are_not_objects_are_skipped(tmp_path: Path) -> None:
    """Issue 36 item 5: `[1]`, `5` or a string on a line ended `think pairs` in a traceback
    (the reader called `.get` on every line); an id that is a list made the key unhashable."""
    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    junk = b'[1, 2]\n5\n"call"\nnull\n{"type": "call", "run": "r", "id": [1], "directive": 3}\n'
    log = decision_log(tmp_path / "log", junk)
    result = CliRunner().invoke(app, ["think", "pairs", str(log), "--show", "0"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "2 pairs of BonkQuest"


def test_think_pairs_streams_a_log_with_a_huge_line(tmp_path: Path) -> None:
    """The trial's 3 GiB log took `think pairs` to 6 GB (read whole, then split). A 512 MiB
    sparse hole (one endless line) now costs a bounded line buffer; the calls around it count."""
    log = decision_log(tmp_path / "log", hole=512 << 20)
    script = (
        "import resource, sys\n"
        "from metabonk_gym.think.finetune import load_pairs\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "game, pairs = load_pairs([sys.argv[1]])\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(game, len(pairs), grown // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(log)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    game, n, grown_mb = done.stdout.split()
    assert (game, n) == ("BonkQuest", "2")
    assert int(grown_mb) < 64, f"{grown_mb} MB"


# ------------------------------------------------------------------ think finetune / pairs
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--steps", "0"], "--steps must be a whole number in [1, 10000000], not 0"),
        (["--steps", "-5"], "--steps must be a whole number in [1, 10000000], not -5"),
        (["--max-minutes", "-1"], "--max-minutes must be a number in [0, 525600], not -1.0"),
        (["--rank", "0"], "--rank must be a whole number in [1, 4096], not 0"),
        (["--batch-size", "0"], "--batch-size must be a whole number in [1, 4096], not 0"),
        (["--quant", "q3"], "--quant must be one of q8_0, f16, f32, not 'q3'"),
        (["--device", "gpu9"], "--device must be cpu or cuda (cuda:N for one GPU), not 'gpu9'"),
    ],
)
def test_finetune_options_are_checked_before_anything(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    """`--steps 0` wrote an untrained model, `--max-minutes -1` meant no limit, and a bad rank
    or quant failed in a traceback after the base model had loaded."""
    log = decision_log(tmp_path / "log")
    out = tmp_path / "out"
    assert _error(["think", "finetune", str(log), "--out", str(out), *flags]) == f"error: {message}"
    assert not out.exists()


def test_finetune_never_writes_into_a_folder_of_other_files(tmp_path: Path) -> None:
    log = decision_log(tmp_path / "log")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my notes")
    (out / "checkpoint.pt").write_bytes(b"my weights")
    assert _error(["think", "finetune", str(log), "--out", str(out), "--steps", "1"]) == (
        f"error: --out {out} already holds files (README.md, checkpoint.pt) and is not a "
        "fine-tune run; choose a new or empty folder"
    )
    assert (out / "README.md").read_text() == "my notes"
    assert (out / "checkpoint.pt").read_bytes() == b"my weights"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "checkpoint.pt"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["think", "pairs", "LOG", "--show", "-3"],
            "--show must be a whole number in [0, 1000000], not -3",
        ),
        (
            ["think", "examples", "MetaBonk/BonkQuest-v0", "--count", "-1"],
            "--count must be a whole number in [1, 64], not -1",
        ),
    ],
)
def test_negative_counts_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    log = decision_log(tmp_path / "log")
    args = [str(log) if a == "LOG" else a for a in args]
    assert _error(args) == f"error: {message}"


# ------------------------------------------------------------------ calibration cache
@pytest.mark.llm
@pytest.mark.parametrize(
    "tamper, problem",
    [
        ({"p50_s": -1.0, "p95_s": -1.0}, "p50_s -1.0"),
        ({"cold_s": 1e12}, "cold_s 1000000000000.0"),
        ({"p50_s": 5.0, "p95_s": 0.1}, "p50_s 5.0 above p95_s 0.1"),
        ({"calls": -3}, "calls -3"),
        ({"p95_s": "fast"}, "p95_s 'fast'"),
    ],
)
def test_impossible_cached_latencies_are_measured_again(
    make_env, tmp_path: Path, tamper: dict, problem: str
) -> None:
    """The trial's negative or absurd values in think-latency.json were used as measurements
    (a deadline of 1 s from a p50 of -1 s, a cooldown from 10^12 s)."""
    from metabonk_gym.think.calibrate import calibrated_timing
    from metabonk_gym.think.engines import LlamaCppEngine
    from metabonk_gym.think.games import adapter_for
    from metabonk_gym.think.prompts import PromptBuilder
    from metabonk_gym.think.testing import write_tiny_llama

    env = make_env("MetaBonk/BonkQuest-v0")
    builder = PromptBuilder.for_env(env, adapter_for(env), None, profile="choice")
    engine = LlamaCppEngine(write_tiny_llama(tmp_path / "tiny.gguf"), n_ctx=4096)
    try:
        _, measured, cached = calibrated_timing(engine, builder, 4, cache_home=tmp_path)
        assert not cached
        path = tmp_path / "metabonk" / "think-latency.json"
        cache = json.loads(path.read_text())
        (key,) = cache
        cache[key].update(tamper)
        path.write_text(json.dumps(cache))
        with pytest.warns(UserWarning, match=f"states {problem}, which no measurement gives"):
            _, again, cached = calibrated_timing(engine, builder, 4, cache_home=tmp_path)
    finally:
        engine.close()
    assert not cached and 0 < again.p50_s <= again.p95_s
    assert json.loads(path.read_text())[key]["p50_s"] == again.p50_s  # rewritten


# ------------------------------------------------------------------ RAM search sessions
@pytest.fixture
def game_folder(tmp_path: Path) -> Path:
    from metabonk_gym.gamedata import bundled_game_folder
    from metabonk_gym.integrate import new_game_folder

    return new_game_folder(bundled_game_folder("BonkQuest") / "rom.gba", tmp_path / "Mine")


@pytest.fixture
def session(game_folder: Path) -> Path:
    """A real session: started after 30 frames, filtered once (`increased`)."""
    from metabonk_gym.integrate import RamSearch, parse_filter

    search = RamSearch.start(game_folder, inputs="wait 30")
    search.filter(parse_filter("increased"), inputs="wait 30")
    return search.path


def _rewrite_arrays(session: Path, change) -> None:
    """Apply `change(arrays)` to the session's arrays file, kept under its name."""
    import numpy as np

    meta = json.loads((session / "session.json").read_text())
    path = session / meta["arrays"]
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    change(arrays)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def test_a_session_naming_a_fifo_is_refused_not_waited_on(game_folder: Path, session: Path) -> None:
    """`ram list` blocked forever opening a FIFO the session.json named as its arrays."""
    import os

    meta = json.loads((session / "session.json").read_text())
    fifo = session / "arrays-00000000000000ff.npz"
    os.mkfifo(fifo)
    meta["arrays"] = fifo.name
    (session / "session.json").write_text(json.dumps(meta))
    metabonk = Path(sys.executable).parent / "metabonk"
    done = subprocess.run(
        [str(metabonk), "ram", "list", str(game_folder)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        f"error: the session at {session} is damaged ({fifo} is not a regular file): start a "
        "new search with metabonk ram search start"
    )


@pytest.mark.parametrize("name", ["../../outside.npz", "/etc/passwd", "arrays.npz", 5])
def test_an_arrays_name_that_is_not_the_sessions_is_refused(
    game_folder: Path, session: Path, name: object
) -> None:
    meta = json.loads((session / "session.json").read_text())
    meta["arrays"] = name
    (session / "session.json").write_text(json.dumps(meta))
    assert _error(["ram", "list", str(game_folder)]) == (
        f"error: the session at {session} is damaged (arrays {name!r}): start a new search "
        "with metabonk ram search start"
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.update(snap_0=a["snap_0"][:10]), "snap_0 is |u1 (10,), not |u1 (294912,)"),
        (
            lambda a: a.update(mask_0=a["mask_0"].astype("<i8")),
            "mask_0 is <i8 (36864,), not |u1 (36864,)",
        ),
        (lambda a: a.update(extra=a["snap_0"]), "extra.npy is not a session array"),
        (lambda a: a.pop("mask_0"), "lacks the session array mask_0"),
    ],
)
def test_tampered_session_arrays_are_one_line(
    game_folder: Path, session: Path, change, message: str
) -> None:
    """A tampered session gave wrong candidates with exit code 0 (arrays were trusted once
    their zip sizes passed): every array's dtype and shape is checked from its header."""
    _rewrite_arrays(session, change)
    line = _error(["ram", "list", str(game_folder)])
    assert message in line, line


def test_a_tampered_undo_entry_is_one_line(game_folder: Path, session: Path) -> None:
    import numpy as np

    _rewrite_arrays(
        session, lambda a: a.update(undoinfo_0=np.array('{"snapshots": 99, "steps": 0}'))
    )
    assert "an undo entry is damaged" in _error(["ram", "undo", str(game_folder)])


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("backend", "bogus", "backend 'bogus' (embedded or skyemu)"),
        ("labels", [], "labels (1 to 64)"),
        ("undo", 7, "undo 7"),
        ("steps", "x", "steps"),
    ],
)
def test_tampered_session_fields_are_one_line(
    game_folder: Path, session: Path, field: str, value: object, said: str
) -> None:
    meta = json.loads((session / "session.json").read_text())
    meta[field] = value
    (session / "session.json").write_text(json.dumps(meta))
    assert _error(["ram", "list", str(game_folder)]) == (
        f"error: the session at {session} is damaged ({said}): start a new search with "
        "metabonk ram search start"
    )


# ------------------------------------------------------------------ tiles label
GROUPS = {"charblock": 0, "groups": {"0": {"tiles": [1, 2], "onto": 3, "blocked": 0, "seen": 3}}}


@pytest.mark.parametrize(
    "groups, tiles, problem",
    [
        ({"charblock": 0, "groups": {"0": {"tiles": "x"}}}, None, "group 0: tiles must be a list"),
        ({"charblock": 0, "groups": []}, None, "groups must be an object"),
        ({"groups": {}}, None, "charblock must be 0-3"),
        ([1, 2], None, "charblock must be 0-3"),
        (GROUPS, {"classes": ["wall"]}, "classes must map tile numbers to class names"),
        (GROUPS, {"classes": {}, "walk_votes": {"wall": "many"}}, "walk_votes must map"),
    ],
)
def test_tiles_label_checks_the_json_it_reads(
    game_folder: Path, groups: object, tiles: object, problem: str
) -> None:
    """`tiles label` trusted tile_groups.json and tiles.json once they parsed: a changed file
    ended in a KeyError or TypeError traceback."""
    (game_folder / "tile_groups.json").write_text(json.dumps(groups))
    if tiles is not None:
        (game_folder / "tiles.json").write_text(json.dumps(tiles))
    before = (game_folder / "tiles.json").read_text() if tiles is not None else None
    line = _error(["tiles", "label", str(game_folder), "0=wall"])
    assert line.startswith("error: ") and "is damaged or not metabonk's (" in line
    assert problem in line
    if before is not None:
        assert (game_folder / "tiles.json").read_text() == before


def test_tiles_label_still_labels(game_folder: Path) -> None:
    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    (game_folder / "tile_groups.json").write_text(json.dumps(GROUPS))
    result = CliRunner().invoke(app, ["tiles", "label", str(game_folder), "0=floor"])
    assert result.exit_code == 0, result.output
    written = json.loads((game_folder / "tiles.json").read_text())
    assert written["classes"] == {"1": "floor", "2": "floor"} and written["walkable"] == {
        "floor": True
    }
