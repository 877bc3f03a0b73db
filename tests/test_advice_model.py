"""PPO with the real small model as the adviser (issue 22 item 2): `pause_to_think` with
`serve: true` runs one llama-server for all envs of the run, writes think scalars, and the
server ends with the run; `bench advice --adviser` refuses what is not an adviser."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from stable_baselines3.common.callbacks import BaseCallback
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import metabonk_gym  # noqa: F401  (registers the envs)
from metabonk_gym.agents.episode import episode_config
from metabonk_gym.bench.advice_learning import adviser_entry, figure_record, run_advice_bench
from metabonk_gym.errors import MetabonkError
from metabonk_gym.training.ppo import train_ppo
from metabonk_gym.training.wrapstack import run_wrappers

QUEST = "MetaBonk/BonkQuest-v0"


def llama_servers() -> list[int]:
    """Process ids of this process's children that run llama-server."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # it ended meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"llama-server" in cmdline:
            found.append(int(entry.name))
    return found


class ServersSeen(BaseCallback):
    """Records the llama-server children alive while the run steps."""

    def __init__(self) -> None:
        super().__init__()
        self.pids: set[int] = set()

    def _on_step(self) -> bool:
        if self.n_calls % 16 == 1:
            self.pids.update(llama_servers())
        return True


class PaceUntilAnswered(BaseCallback):
    """Steps at 20 a second until some env's thinker has had an answer (at most 60 s), then at
    full speed: the run is 640 steps, and while the other test worker loads both cores the
    served model's first answer can come after all of them (the fresh-clone CI saw no call
    answered)."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = False
        self.deadline = 0.0

    def _on_training_start(self) -> None:
        self.deadline = time.monotonic() + 60

    def _on_step(self) -> bool:
        if not self.answered:
            infos = self.locals.get("infos") or ()
            self.answered = any((i.get("think") or {}).get("calls", 0) > 0 for i in infos)
            if not self.answered and time.monotonic() < self.deadline:
                time.sleep(0.05)
        return True


@pytest.mark.llm("real-model", "llama-server")
@pytest.mark.net
def test_ppo_with_the_real_model_as_adviser_writes_think_scalars(tmp_path: Path) -> None:
    stack: list[dict[str, Any]] = [
        {
            "name": "pause_to_think",
            **adviser_entry("model"),  # the default model from the wheel, served
            "mode": "async",
            "follow_weight": 0.1,
            "advice_fade": [384, 576],
        }
    ]
    overrides = {
        "n_envs": 2,
        "n_steps": 32,
        "batch_size": 32,
        "n_epochs": 1,
        "features_dim": 32,
        "max_episode_steps": 320,  # long enough for answers
        "checkpoint_every": 320,
        "video_every": 0,
        "total_steps": 640,
        "wrappers": stack,
    }
    seen = ServersSeen()
    run = tmp_path / "model-advice"
    pace = PaceUntilAnswered()
    result = train_ppo(QUEST, run, overrides=overrides, callbacks=[seen, pace])
    assert pace.answered, "no think call answered or timed out within 60 s"
    assert result.num_timesteps == 640
    # one server for both envs while it trained, none left after
    assert len(seen.pids) == 1, seen.pids
    assert llama_servers() == []
    assert not any(Path(f"/proc/{pid}").exists() for pid in seen.pids)
    acc = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    found = {t: [e.value for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    assert max(found["think/calls"]) > 0
    # the model answered some calls inside the calibrated deadline: not all were fallbacks
    assert min(found["think/fallback_rate"]) < 1.0, found["think/fallback_rate"]
    assert max(found["think/latency_p50_s"]) > 0
    assert found["think/advice_scale"][-1] == 0.0
    # the run keeps the entry as written (no port): a resume starts a server of its own
    (entry,) = run_wrappers(run)
    assert entry["serve"] is True and entry["engine"] == "llama_cpp" and "base_url" not in entry


def test_bench_advice_refuses_a_bad_adviser_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(MetabonkError, match="oracle, first, random, model or model:PATH"):
        run_advice_bench(tmp_path / "out", adviser="gpt")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    with pytest.raises(MetabonkError, match="not a GGUF"):
        run_advice_bench(tmp_path / "out", adviser=f"model:{bad}")
    assert not (tmp_path / "out").exists()


def test_bench_advice_with_a_rule_adviser_from_a_riddle_room_and_shared_alone_runs(
    tmp_path: Path,
) -> None:
    small = {"seeds": 1, "total_steps": 256, "episodes": 1, "n_envs": 2, "max_steps": 40}
    first = run_advice_bench(tmp_path / "first", adviser="first", state="riddles_room2", **small)
    assert first["state"] == "riddles_room2" and first["adviser"]["engine"] == "first"
    assert first["alone"]["seeds"] == 1 and first["advice"]["seeds"] == 1
    for arm in ("alone", "advice"):  # trained and evaluated from the riddle room
        model = tmp_path / "first" / f"{arm}_seed0" / "model.zip"
        assert episode_config(QUEST, str(model)).state == "riddles_room2"
    (entry,) = run_wrappers(tmp_path / "first" / "advice_seed0")
    assert entry["engine"] == "first" and entry["advice_fade"] == [128, 230]
    # a second adviser against the same alone runs: only its advice arm is trained
    second = run_advice_bench(
        tmp_path / "random",
        adviser="random",
        state="riddles_room2",
        alone_from=tmp_path / "first",
        **small,
    )
    assert sorted(p.name for p in (tmp_path / "random").iterdir()) == [
        "advice.json",
        "advice_seed0",
    ]
    assert second["alone"] == first["alone"] and second["adviser"]["engine"] == "random"
    record = figure_record(second, "random")
    assert record["id"] == "riddles-room2-random-advice" and "alone: rooms" in record["text"]
    with pytest.raises(MetabonkError, match="holds no scored alone runs"):
        run_advice_bench(tmp_path / "x", alone_from=tmp_path / "random", **small)
