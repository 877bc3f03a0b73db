"""`metabonk list`, `play --record`, `curriculum --swarm` and `bench env` end to end through
typer's CliRunner over the real app, on tiny budgets."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import gymnasium as gym
import minari
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

import metabonk_gym
from metabonk_gym.gba.integration import Integration
from metabonk_gym.rundir import RunDir

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def table_rows(output: str) -> dict[str, list[str]]:
    """The rows of a rich table by their first cell; a cell wrapped over lines is joined back."""
    rows: dict[str, list[list[str]]] = {}
    key = ""
    for line in output.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if cells[0]:
            key = cells[0]
            rows[key] = [[] for _ in cells]
        for parts, cell in zip(rows[key], cells):
            if cell:
                parts.append(cell)
    return {k: [" ".join(parts) for parts in cells] for k, cells in rows.items()}


def test_list_shows_every_env_with_its_states_and_info() -> None:
    result = invoke("list")  # CliRunner's terminal is 80 columns wide
    assert result.exit_code == 0, result.output
    rows = table_rows(result.output)
    assert list(rows) == list(metabonk_gym.ENV_IDS), "every id, whole (never folded mid-id)"
    for game in ("BonkQuest", "BonkArena"):
        _, name, states, info = rows[f"MetaBonk/{game}-v0"]
        integration = Integration.bundled(game)
        assert name == game
        assert states.split(", ") == integration.state_names()
        assert info.split(", ") == integration.info_names
    assert "room5" in rows[QUEST][2] and "wave5" in rows["MetaBonk/BonkArena-v0"][2]
    assert rows["MetaBonk/GBA-v0"][2:] == ["", ""]


def test_play_random_records_a_minari_dataset() -> None:
    dataset = f"test/play-{uuid.uuid4().hex[:8]}-v0"
    result = invoke(
        "play",
        QUEST,
        "--agent",
        "random",
        "--episodes",
        "2",
        "--seed",
        "3",
        "--max-steps",
        "7",
        "--no-window",
        "--record",
        dataset,
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("time limit") == 2
    ds = minari.load_dataset(dataset)
    assert ds.total_episodes == 2 and ds.total_steps == 14
    assert ds.spec.action_space == gym.spaces.Discrete(6)
    assert ds.spec.env_spec.id == QUEST and ds.spec.env_spec.kwargs["state"] == "room1"
    first, second = ds.iterate_episodes()
    for episode in (first, second):
        assert len(episode.observations) == len(episode.actions) + 1 == 8
        assert episode.truncations[-1] and not episode.terminations.any()
        assert set(episode.actions.tolist()) <= set(range(6))
        assert episode.infos["room"][0] == 1 and "hp" in episode.infos
    assert first.actions.tolist() != second.actions.tolist(), "seeds 3 and 4 play differently"
    again = invoke("play", QUEST, "--agent", "random", "--no-window", "--record", dataset)
    assert again.exit_code == 2 and "already exists" in again.output
    assert minari.load_dataset(dataset).total_episodes == 2


def test_curriculum_swarm_writes_its_run_and_milestone_states(tmp_path: Path) -> None:
    run_dir = tmp_path / "swarm"
    fast = {
        "n_steps": 16,
        "batch_size": 32,
        "n_epochs": 1,
        "downscale": 8,
        "frame_stack": 2,
        "features_dim": 32,
        "max_episode_steps": 30,
        "video_every": 0,
        "checkpoint_every": 0,
    }
    result = invoke(
        "curriculum",
        QUEST,
        "--swarm",
        "--milestone",
        "player_x",  # a random walk keeps beating it
        "--total-steps",
        "64",
        "--n-envs",
        "2",
        "--run-dir",
        str(run_dir),
        "--no-progress",
        "--json",
        *[arg for key, value in fast.items() for arg in ("--set", f"{key}={value}")],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["num_timesteps"] == 64 and out["milestones"]
    state = RunDir(run_dir).read_state()
    assert state["algo"] == "curriculum" and state["status"] == "finished"
    assert state["milestones"] == out["milestones"]
    values = [m["value"] for m in state["milestones"]]
    assert values == sorted(set(values)), "each milestone beats the one before"
    files = sorted((run_dir / "swarm").glob("*.state"))
    assert sorted(Path(m["state"]) for m in state["milestones"]) == files
    assert (run_dir / "model.zip").is_file() and (run_dir / "config.yaml").is_file()
    best = state["milestones"][-1]
    env = gym.make(QUEST, state=best["state"])
    try:
        _, info = env.reset(seed=0)
        assert info["player_x"] == best["value"]
    finally:
        env.close()
    bad = invoke(
        "curriculum", QUEST, "--swarm", "--milestone", "lives", "--run-dir", str(tmp_path / "b")
    )
    assert bad.exit_code == 2 and "'lives' is not an info variable" in bad.output
    assert not (tmp_path / "b").exists()


def test_bench_env_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = invoke(
        "bench",
        "env",
        QUEST,
        "--steps",
        "50",
        "--rounds",
        "1",
        "--no-vector",
        "--no-retro-env",
        "--out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert figures["env_id"] == QUEST and figures["frameskip"] == 4
    assert figures["raw_core_fps"] > 0 and figures["env_fps"] > 0
    assert abs(figures["env_vs_raw"] - figures["env_fps"] / figures["raw_core_fps"]) < 1e-9
    assert "env_vs_raw" in result.output
    assert not any(k.startswith(("vec", "retro")) for k in figures), "both were switched off"
