"""`metabonk think finetune --resume` reads its run dir as every trainer's (`RunDir`, issue 37).

The run.json of a resumed fine-tune is checked before the base model loads (a minute on a CPU):
a run another process is training now, a file that is not a fine-tune's run.json, or a stored
config that is not a fine-tune's or out of range is one `error:` line, and the folder is left
as it was. Before, a non-JSON run.json or an unknown config key ended in a traceback and a
live run was trained twice at once (both writing the same checkpoint).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from one_line import one_line_error as _error
from test_hostile_tools import decision_log

pytestmark = pytest.mark.llm("real-model")  # the default GGUF's header is checked first


def _run(out: Path, state: Any) -> bytes:
    """`out/run.json` holding `state` (bytes as given, else JSON); its bytes."""
    out.mkdir()
    data = state if isinstance(state, bytes) else json.dumps(state).encode()
    (out / "run.json").write_bytes(data)
    return data


def _finetune_state(**fields: Any) -> dict[str, Any]:
    state = {"format": "metabonk-finetune-v1", "game": "BonkQuest", "config": {"steps": 3}}
    return {**state, "status": "done", "step": 3, **fields}


def test_a_resume_refuses_a_run_another_process_is_training(tmp_path: Path) -> None:
    log = decision_log(tmp_path / "log")
    out = tmp_path / "run"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        state = _finetune_state(status="running", pid=other.pid, host=socket.gethostname())
        before = _run(out, state)
        args = ["think", "finetune", str(log), "--out", str(out), "--resume", "--steps", "4"]
        assert _error(args) == (
            f"error: {out} is being trained right now by process {other.pid} (run.json); stop "
            "it first (Ctrl-C or `kill` saves a checkpoint), then --resume"
        )
        assert (out / "run.json").read_bytes() == before
        assert sorted(p.name for p in out.iterdir()) == ["run.json"]
    finally:
        other.kill()
        other.wait(timeout=60)


@pytest.mark.parametrize(
    "state, message",
    [
        (b"{not json", "is not a fine-tune run's run.json (format 'None', not"),
        ({"env_id": "x", "algo": "ppo", "status": "finished"}, "(format 'None', not"),
        ({"format": "metabonk-finetune-v0"}, "(format 'metabonk-finetune-v0', not"),
        (_finetune_state(config={"steps": 3, "hook": "x"}), "its config is not a fine-tune's"),
        (_finetune_state(config=[3]), "its config is not a fine-tune's"),
        (_finetune_state(config={"threads": 10**9}), "--threads must be a whole number"),
        (_finetune_state(pid="me"), "field 'pid' must be int or null"),
    ],
)
def test_a_resume_reads_run_json_with_its_checks(tmp_path: Path, state: Any, message: str) -> None:
    log = decision_log(tmp_path / "log")
    out = tmp_path / "run"
    before = _run(out, state)
    args = ["think", "finetune", str(log), "--out", str(out), "--resume", "--steps", "4"]
    assert message in _error(args)
    assert (out / "run.json").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["run.json"]
