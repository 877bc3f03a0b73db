"""`metabonk memory show|export|query` on a real run's memory, the memory's TensorBoard scalars
read back from the event files, and `metabonk bench memory`'s figures on a short run."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from metabonk_gym.cli.main import app
from metabonk_gym.wrappers.memory import Memory
from PIL import Image
from typer.testing import CliRunner

from metabonk_gym.bench.memory_speed import play, steps_to_win, write_cost
from metabonk_gym.games.BonkQuest.game import BonkQuestExpert
from metabonk_gym.memory import KnowledgeGraph
from metabonk_gym.memory.scalars import log_memory_scalars


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    env = Memory(gym.make("MetaBonk/BonkQuest-v0", state="start"), path=folder / "memory.lbdb")
    obs, info = env.reset(seed=3)
    expert = BonkQuestExpert(env)
    while info["room"] < 3:
        obs, _, _, _, info = env.step(expert.act(obs, info))
    env.close()
    return folder


def test_show_prints_tables_and_writes_the_map(run_dir: Path) -> None:
    result = CliRunner().invoke(app, ["memory", "show", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "areas" in result.output and "Reach the golden treasure" in result.output
    png = run_dir / "memory_map.png"
    with Image.open(png) as image:
        # three rooms of 30 x 20 tiles side by side at 4 pixels a tile, with the gaps
        assert image.size == ((3 * 32 + 2) * 4, (20 + 4) * 4)
        colours = {c for _, c in image.convert("RGB").getcolors(1 << 20) or []}
    assert (220, 40, 40) in colours and (150, 100, 40) in colours  # a locked and an open door


def test_export_loads_into_a_fresh_database(run_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "memory.cypher"
    result = CliRunner().invoke(app, ["memory", "export", str(run_dir), "--out", str(script)])
    assert result.exit_code == 0, result.output
    source = KnowledgeGraph(run_dir / "memory.lbdb", read_only=True)
    fresh = KnowledgeGraph(tmp_path / "fresh.lbdb")
    fresh.load_cypher(script)
    assert fresh.counts() == source.counts() and source.counts()["CONNECTS"] == 4
    source.close()
    fresh.close()


def test_query_prints_rows_as_json(run_dir: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["memory", "query", str(run_dir), "MATCH (e:Event {kind: 'talked'}) RETURN e.note AS note"],
    )
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in result.output.splitlines()]
    assert row["note"].startswith("key_chest=")


def test_tensorboard_scalars(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    infos = [{"memory": {"areas": 2, "quests_done": 0}}, {"memory": {"areas": 4, "quests_done": 1}}]
    log_memory_scalars(writer, infos, step=10)
    log_memory_scalars(writer, [{}, {"think": {}}], step=20)  # no memory: nothing logged
    writer.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    areas = events.Scalars("memory/areas")
    assert [(e.step, e.value) for e in areas] == [(10, 3.0)]
    assert events.Scalars("memory/quests_done")[0].value == 0.5


def test_bench_figures() -> None:
    cost = write_cost(episodes=1)
    assert cost["write_steps"] > 100 and cost["areas"] == 5 and cost["rows_written"] > 0
    assert 0 < cost["memory_ms_p50"] <= cost["memory_ms_max"]
    assert (
        cost["query_nearest_unopened_chest_ms_p95"] >= cost["query_nearest_unopened_chest_ms_p50"]
    )
    worth = steps_to_win(seeds=1, first_seed=3, think_every=(0,))
    assert worth["no_memory_wins"] == worth["memory_wins"] == 1
    assert worth["memory_second_attempt_wins"] == 1
    ratio = worth["memory_mean_steps"] / worth["no_memory_mean_steps"]
    assert worth["memory_steps_vs_no_memory"] == pytest.approx(ratio)


def test_memory_keeps_a_strategist_asked_every_few_steps_from_looping(tmp_path: Path) -> None:
    # Asked every 10 steps, the screen-only strategist forgets that it talked to the sage and
    # walks back to him again and again on seed 3; with memory it opens the chest he named.
    (alone,) = play([3], False, None, max_steps=600, think_every=10)
    (remembering,) = play([3], True, tmp_path / "memory.lbdb", max_steps=600, think_every=10)
    assert not alone["won"] and alone["steps"] == 600
    assert remembering["won"] and remembering["steps"] < 300
