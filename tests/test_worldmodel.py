"""World models (issue 17): a tiny model trained for real through `metabonk train world-model` on
recorded Minari datasets, its run directory, checkpoints and `--resume`, the `world-model`
predictor of `TemporalStrip` (shapes, action conditioning, uncertainty), `metabonk dream`, the
benchmark, and bad input (a model for another game or frame shape, broken files)."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from metabonk_gym.cli.main import app
from metabonk_gym.wrappers.predictors import make_predictor
from metabonk_gym.wrappers.temporal_strip import TemporalStrip
from typer.testing import CliRunner

from metabonk_gym.agents.record import record
from metabonk_gym.training.errors import DatasetError
from metabonk_gym.worldmodel.data import dataset_episodes
from metabonk_gym.worldmodel.files import WorldModelError, load_world_model
from metabonk_gym.worldmodel.predictor import WorldModelPredictor

QUEST = "MetaBonk/BonkQuest-v0"
ARENA = "MetaBonk/BonkArena-v0"
SMALL_ENV = {"obs_type": "grayscale", "downscale": 8}  # 20 x 30 x 1 frames
TRAIN_FLAGS = [
    "--width", "8", "--crop", "0", "--batch-size", "8", "--threads", "1",
    "--eval-every", "100", "--checkpoint-every", "100",
]  # fmt: skip
runner = CliRunner()


def _record(env_id: str, name: str, episodes: int, steps: int) -> str:
    dataset_id = f"test/{name}-{uuid.uuid4().hex[:8]}-v0"
    result = record(
        env_id,
        "random",
        dataset_id,
        episodes=episodes,
        overrides={**SMALL_ENV, "max_episode_steps": steps},
    )
    assert result.saved_episodes == episodes
    return dataset_id


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Two BonkQuest datasets, one BonkArena dataset and a model trained 300 steps via the CLI."""
    with pytest.MonkeyPatch.context() as mp:
        # the same folder as conftest's per-test `_isolated_minari`
        mp.setenv("MINARI_DATASETS_PATH", str(tmp_path_factory.getbasetemp() / "minari"))
        quest = [_record(QUEST, "wm-quest", 3, 60), _record(QUEST, "wm-quest", 2, 60)]
        arena = _record(ARENA, "wm-arena", 1, 20)
        run = tmp_path_factory.mktemp("wm") / "run"
        result = runner.invoke(
            app,
            [
                "train",
                "world-model",
                *quest,
                "--out",
                str(run),
                "--steps",
                "300",
                *TRAIN_FLAGS,
                "--json",
            ],
        )
        assert result.exit_code == 0, result.output
        yield {"quest": quest, "arena": arena, "run": run, "output": result.output}


def test_training_writes_the_run_directory(trained: dict) -> None:
    run: Path = trained["run"]
    assert (run / "config.yaml").is_file() and (run / "tensorboard").is_dir()
    steps = sorted(p.name for p in (run / "checkpoints").glob("step_*.pt"))
    assert steps == ["step_000000100.pt", "step_000000200.pt", "step_000000300.pt"]
    meta = json.loads((run / "model.json").read_text())
    assert meta["kind"] == "metabonk-world-model" and meta["game"] == "BonkQuest"
    assert meta["env_id"].endswith("BonkQuest-v0") and meta["obs_shape"] == [20, 30, 1]
    assert meta["action_space"] == {"type": "Discrete", "n": 6} and meta["steps"] == 300
    assert meta["source"] == {"datasets": trained["quest"]}
    state = json.loads((run / "run.json").read_text())
    assert state["status"] == "finished" and state["num_timesteps"] == 300
    # weights only: a plain state_dict of tensors, readable without unpickling code
    weights = torch.load(run / "model.pt", weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in weights.values())
    # trained for real: the output layer left zero (the `copy` predictor) and held-out scores exist
    assert float(weights["head.weight"].abs().sum()) > 0
    figures = meta["figures"]
    assert figures["heldout_episodes"] >= 1
    assert figures["psnr_t1"] > figures["copy_psnr_t1"], "it learned something `copy` cannot"


def test_tensorboard_has_losses_scores_and_real_vs_imagined_strips(trained: dict) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(trained["run"] / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    assert {"world_model/mse", "world_model/psnr_t1", "world_model/copy_psnr_t3"} <= scalars
    images = events.Images("world_model/real_vs_imagined")
    assert [i.step for i in images] == [100, 200, 300]
    mse = [e.value for e in events.Scalars("world_model/mse")]
    assert np.mean(mse[-50:]) < np.mean(mse[:10]), "the loss went down"


def test_resume_continues_from_the_newest_checkpoint(trained: dict, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    before = torch.load(run / "checkpoints" / "step_000000300.pt", weights_only=True)
    assert set(before) == {"model", "optimizer"}
    # no dataset named: the run's config.yaml says where its episodes came from
    result = runner.invoke(
        app, ["train", "world-model", "--out", str(run), "--resume", "--steps", "400", *TRAIN_FLAGS]
    )
    assert result.exit_code == 0, result.output
    assert "resuming" in result.output and "step 300" in result.output
    assert (run / "checkpoints" / "step_000000400.pt").is_file()
    assert json.loads((run / "model.json").read_text())["steps"] == 400
    after = torch.load(run / "model.pt", weights_only=True)
    assert not torch.equal(after["head.weight"], before["model"]["head.weight"])
    model, _ = load_world_model(run)
    assert model.config.n_actions == 6


def test_a_new_run_refuses_a_used_directory_and_resume_needs_a_run(
    trained: dict, tmp_path: Path
) -> None:
    result = runner.invoke(
        app,
        ["train", "world-model", *trained["quest"], "--out", str(trained["run"]), "--steps", "1"],
    )
    assert result.exit_code == 2 and "already holds a run" in result.output
    missing = tmp_path / "nothing"
    result = runner.invoke(app, ["train", "world-model", "--out", str(missing), "--resume"])
    assert result.exit_code == 2 and "does not exist" in result.output
    result = runner.invoke(app, ["train", "world-model", "--out", str(missing)])
    assert result.exit_code == 2 and "name Minari datasets" in result.output
    assert not missing.exists()


def test_datasets_of_different_games_do_not_mix(trained: dict) -> None:
    with pytest.raises(DatasetError, match=r"does not match .*train one model per game"):
        dataset_episodes([trained["quest"][0], trained["arena"]])


def _world_model_strip(make_env, model: Path) -> TemporalStrip:
    """A BonkQuest env (the model's frames) with 2 past and 3 world-model-predicted frames."""
    return TemporalStrip(
        make_env(QUEST, **SMALL_ENV), past=2, future=3, predictor="world-model", model=model
    )


def test_strip_predicts_with_the_world_model_conditioned_on_planned_actions(
    trained: dict, make_env
) -> None:
    env = _world_model_strip(make_env, trained["run"])
    obs, _ = env.reset(seed=3)
    assert obs["strip"].shape == (6, 20, 30, 1) and obs["strip"].dtype == np.uint8
    for action in (4, 4, 2, 2, 5):
        obs, _, _, _, info = env.step(action)
    predictor = env.predictor
    assert isinstance(predictor, WorldModelPredictor)
    assert len(info["predicted_uncertainty"]) == 3 and min(info["predicted_uncertainty"]) > 0
    assert predictor.uncertainty_map is not None and predictor.uncertainty_map.shape == (3, 20, 30)
    # no plan in info: the last action, repeated
    assert predictor.planned(3).tolist() == [5, 5, 5]
    # a plan in the step's info is used (its last action held)
    predictor.observe_action(5, {"planned_actions": [1, 3]})
    assert predictor.planned(3).tolist() == [1, 3, 3]
    # different planned actions, different predicted frames (the present is the same)
    outs = {}
    for action in range(6):
        predictor.set_plan([action] * 3)
        outs[action] = predictor.predict(3).astype(np.int32)
        assert outs[action].shape == (3, 20, 30, 1)
    differences = [int(np.abs(outs[0] - outs[a]).sum()) for a in range(1, 6)]
    assert max(differences) > 0, differences
    predictor.set_plan([9])
    with pytest.raises(WorldModelError, match="outside the model's 0..5"):
        predictor.predict(1)


def test_a_model_for_another_game_or_frame_shape_is_refused(trained: dict, make_env) -> None:
    with pytest.raises(WorldModelError, match="world model of BonkQuest .* not of BonkArena"):
        TemporalStrip(make_env(ARENA, **SMALL_ENV), predictor="world-model", model=trained["run"])
    with pytest.raises(
        WorldModelError, match=r"trained on \(20, 30, 1\) frames, these are \(40, 60, 3\)"
    ):
        TemporalStrip(
            make_env(QUEST, obs_type="rgb", downscale=4),
            predictor="world-model",
            model=trained["run"],
        )
    with pytest.raises(WorldModelError, match="needs a model"):
        make_predictor("world-model")


def test_broken_or_foreign_model_files_give_clear_errors(trained: dict, tmp_path: Path) -> None:
    with pytest.raises(WorldModelError, match="world model not found"):
        load_world_model(tmp_path / "missing")
    lone = tmp_path / "lone.pt"
    shutil.copy(trained["run"] / "model.pt", lone)
    with pytest.raises(WorldModelError, match="no metadata file lone.json"):
        load_world_model(lone)
    # a file that would need unpickling code is refused, never executed
    evil = tmp_path / "evil" / "model.pt"
    evil.parent.mkdir()
    torch.save({"x": gym.spaces.Discrete(3)}, evil)
    shutil.copy(trained["run"] / "model.json", evil.with_suffix(".json"))
    with pytest.raises(WorldModelError, match="corrupt or not a weights file"):
        load_world_model(evil)
    # weights that do not match their metadata's shape
    meta = json.loads((trained["run"] / "model.json").read_text())
    meta["config"]["width"] = 16
    odd = tmp_path / "odd" / "model.pt"
    odd.parent.mkdir()
    shutil.copy(trained["run"] / "model.pt", odd)
    odd.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(WorldModelError, match="does not match its metadata"):
        load_world_model(odd)


def test_dream_renders_real_and_imagined_side_by_side(trained: dict, tmp_path: Path) -> None:
    video = tmp_path / "dream.mp4"
    result = runner.invoke(
        app,
        [
            "dream",
            str(trained["run"]),
            "--video",
            str(video),
            "--steps",
            "8",
            "--plan",
            "RIGHT*4,LEFT*4",
        ],
    )
    assert result.exit_code == 0, result.output
    assert video.stat().st_size > 1000
    import imageio.v3 as iio

    frames = iio.imread(video)
    assert frames.shape[0] == 8 and frames.shape[2] > 3 * frames.shape[1] // 2  # three panels wide
    bad = runner.invoke(app, ["dream", str(trained["run"]), "--plan", "JUMP*3"])
    assert bad.exit_code == 2 and "no action presses JUMP" in bad.output


def test_bench_world_model_scores_copy_flow_and_the_model(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = runner.invoke(
        app,
        [
            "bench", "world-model", QUEST, "--train-episodes", "2", "--heldout-episodes", "1",
            "--episode-steps", "25", "--train-steps", "20", "--crop", "0", "--width", "4",
            "--obs-type", "grayscale", "--downscale", "8", "--out", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    for name in ("copy", "flow", "world-model", "world-model-last", "world-model-random"):
        for k in (1, 2, 3):
            assert np.isfinite(figures[f"BonkQuest_{name}_psnr_t{k}"])
            assert -1 <= figures[f"BonkQuest_{name}_ssim_t{k}"] <= 1
    # 26 frames: presents t = 2..22 have their context and three real frames after them
    assert figures["BonkQuest_train_steps"] == 20 and figures["BonkQuest_frames"] == 21
    # the headline figures say what the per-horizon PSNRs say
    for k in (1, 2, 3):
        gap = figures[f"BonkQuest_world_model_vs_flow_db_t{k}"]
        wm, flow = figures[f"BonkQuest_world-model_psnr_t{k}"], figures[f"BonkQuest_flow_psnr_t{k}"]
        assert gap == pytest.approx(wm - flow)
    above = all(figures[f"BonkQuest_world_model_vs_flow_db_t{k}"] > 0 for k in (1, 2, 3))
    assert figures["BonkQuest_world_model_above_flow_every_horizon"] is above


def test_the_think_agent_gives_its_follower_plan_to_the_world_model(
    trained: dict, make_env
) -> None:
    """The directive follower's next moves (A* on BonkQuest) condition the predicted frames."""
    from metabonk_gym.think.agent import make_think_agent, share_plan

    env = _world_model_strip(make_env, trained["run"])
    agent = make_think_agent(env, model_path="oracle")
    obs, info = env.reset(seed=0)
    predictor = env.predictor
    walks = 0
    for _ in range(40):
        action = agent.act(obs, info)
        plan = agent.follower.plan
        assert plan and all(0 <= a < 6 for a in plan)
        assert predictor.plan == plan  # handed over before the step
        obs, _, terminated, truncated, info = env.step(action)
        assert predictor.plan == plan  # and used for the frames this step predicts
        assert predictor.planned(3).tolist() == [plan[min(i, len(plan) - 1)] for i in range(3)]
        walks += len(plan) == 3 and action != 0
        if terminated or truncated:
            break
    assert walks > 0, "the follower walked an A* path and planned three moves"
    # a step whose info has no plan and no plan was set: the last action, repeated
    env.step(2)
    assert predictor.planned(3).tolist() == [2, 2, 2]
    assert share_plan(env, [1]) == 1 and share_plan(env.unwrapped, [1]) == 0
    agent.close()


def test_dream_under_a_model_policy(trained: dict, tmp_path: Path) -> None:
    """`metabonk dream --agent MODEL.zip`: a BC model trained on the world model's frames acts
    on the imagined frames; its actions are the ones dreamed."""
    from metabonk_gym.training.bc import train_bc
    from metabonk_gym.worldmodel.dream import dream, model_policy

    overrides = {**SMALL_ENV, "frame_stack": 2, "features_dim": 32, "bc_epochs": 2}
    train_bc(QUEST, trained["quest"][0], tmp_path / "bc", overrides=overrides)
    model = tmp_path / "bc" / "model.zip"
    policy = model_policy(model, (20, 30, 1), 6)
    shown: list[np.ndarray] = []

    def watched(frame: np.ndarray) -> int:
        shown.append(frame)
        return policy(frame)

    result = dream(trained["run"], steps=9, policy=watched, real=False)
    assert result["steps"] == 9 and len(shown) == 3  # one decision per imagined chunk of 3
    again = model_policy(model, (20, 30, 1), 6)
    assert result["actions"] == [again(f) for f in shown for _ in range(3)]
    out = runner.invoke(
        app, ["dream", str(trained["run"]), "--agent", str(model), "--steps", "6", "--no-real"]
    )
    assert out.exit_code == 0, out.output
    # the BC run directory as the agent (issue 22): the same model, found by agents.runs
    run_dir = runner.invoke(
        app,
        ["dream", str(trained["run"]), "--agent", str(tmp_path / "bc"), "--steps", "6"]
        + ["--no-real"],
    )
    assert run_dir.exit_code == 0, run_dir.output
    both = runner.invoke(
        app, ["dream", str(trained["run"]), "--agent", str(model), "--plan", "RIGHT*3"]
    )
    assert both.exit_code == 2 and "not both" in both.output
    with pytest.raises(WorldModelError, match="expects observations of shape"):
        model_policy(model, (40, 60, 1), 6)  # a model of other frames
