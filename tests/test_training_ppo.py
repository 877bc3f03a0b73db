"""PPO end to end on BonkQuest: real TensorBoard files, checkpoints that resume, Ctrl-C, bad input."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from stable_baselines3.common.callbacks import BaseCallback
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from metabonk_gym.rundir import RunDir, read_model_metadata
from metabonk_gym.training.errors import CheckpointError, ConfigError, RunDirError
from metabonk_gym.training.ppo import train_ppo

QUEST = "MetaBonk/BonkQuest-v0"
#: A tiny, fast config: 2 envs, 20x30 frames, short episodes so that some finish.
FAST = {
    "n_envs": 2,
    "n_steps": 32,
    "batch_size": 32,
    "n_epochs": 1,
    "downscale": 8,
    "frame_stack": 2,
    "features_dim": 32,
    "max_episode_steps": 40,
    "checkpoint_every": 64,
    "video_every": 0,
}


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


class InterruptAt(BaseCallback):
    """Raises KeyboardInterrupt at a step count, as Ctrl-C would."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.steps:
            raise KeyboardInterrupt
        return True


def test_ppo_logs_checkpoints_videos_and_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = train_ppo(
        QUEST,
        run_dir,
        overrides={**FAST, "total_steps": 128, "video_every": 64, "video_length": 12},
    )
    assert first.num_timesteps == 128 and not first.interrupted and first.episodes >= 2
    run = RunDir(run_dir)
    assert (run_dir / "model.zip").is_file() and (run_dir / "config.yaml").is_file()
    assert [step for step, _ in run.list_checkpoints()] == [64, 128]
    meta = read_model_metadata(run_dir / "model.zip")
    assert (
        meta["env_id"] == QUEST
        and meta["config"]["downscale"] == 8
        and meta["num_timesteps"] == 128
    )

    tags = scalars(run_dir / "tensorboard")
    for tag in (
        "train/loss",
        "episode/return_mean",
        "episode/win_rate",
        "game/rooms_visited",
        "game/hp",
        "reward_terms/novelty",
        "rollout/ep_rew_mean",
    ):
        assert tag in tags, tag
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"images": 0})
    acc.Reload()
    assert "video/episode" in acc.Tags()["images"]
    assert acc.Images("video/episode")[0].encoded_image_string[:6] == b"GIF89a"
    assert sorted(p.name for p in (run_dir / "videos").glob("*.mp4"))

    second = train_ppo(QUEST, run_dir, resume=True, overrides={"total_steps": 192})
    assert second.num_timesteps == 192
    assert (
        len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 2
    )  # same run folder
    # one curve across both sessions: the step count continues, nothing is logged twice
    # (sorted: TensorBoard reads the two event files in file-name order, which has the pid in it)
    steps = [s for s, _ in scalars(run_dir / "tensorboard")["time/fps"]]
    assert sorted(steps) == [64, 128, 192]
    assert run.list_checkpoints()[-1][0] == 192
    assert RunDir(run_dir).read_state()["status"] == "finished"


def test_ctrl_c_saves_a_checkpoint_and_resume_continues(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = train_ppo(
        QUEST,
        run_dir,
        overrides={**FAST, "total_steps": 1000, "checkpoint_every": 0},
        callbacks=[InterruptAt(40)],
    )
    assert result.interrupted and 40 <= result.num_timesteps < 100
    checkpoints = RunDir(run_dir).list_checkpoints()
    assert [s for s, _ in checkpoints] == [result.num_timesteps]
    assert RunDir(run_dir).read_state()["status"] == "interrupted"
    resumed = train_ppo(QUEST, run_dir, resume=True, overrides={"total_steps": 96})
    assert 96 <= resumed.num_timesteps < 96 + 64 and not resumed.interrupted  # whole rollouts


def test_bad_input_leaves_the_run_dir_untouched(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train_ppo(QUEST, run_dir, overrides={**FAST, "total_steps": 64})
    before = snapshot(run_dir)

    with pytest.raises(RunDirError, match="already holds a run; pass --resume"):
        train_ppo(QUEST, run_dir, overrides={**FAST, "total_steps": 64})
    with pytest.raises(ConfigError, match="cannot change n_envs"):
        train_ppo(QUEST, run_dir, resume=True, overrides={"n_envs": 4, "total_steps": 128})
    with pytest.raises(RunDirError, match="already has 64 steps"):
        train_ppo(QUEST, run_dir, resume=True)
    with pytest.raises(RunDirError, match="is a run on MetaBonk/BonkQuest-v0"):
        train_ppo("MetaBonk/BonkArena-v0", run_dir, resume=True, overrides={"total_steps": 128})
    assert snapshot(run_dir) == before

    # a corrupt newest checkpoint: a clear error that names the one to fall back to
    newest = run_dir / "checkpoints" / "step_000000064.zip"
    older = run_dir / "checkpoints" / "step_000000000.zip"
    older.write_bytes((run_dir / "model.zip").read_bytes())
    (run_dir / "model.zip").unlink()
    newest.write_bytes(newest.read_bytes()[: len(newest.read_bytes()) // 2])
    with pytest.raises(
        CheckpointError, match="step_000000064.zip.*(corrupt|truncated).*step_000000000.zip"
    ):
        train_ppo(QUEST, run_dir, resume=True, overrides={"total_steps": 128})
    with zipfile.ZipFile(older) as archive:
        assert "data" in archive.namelist()


def test_bad_config_fails_before_creating_anything(tmp_path: Path) -> None:
    run_dir = tmp_path / "new"
    with pytest.raises(ConfigError, match="did you mean 'n_steps'"):
        train_ppo(QUEST, run_dir, overrides={"n_step": 8})
    with pytest.raises(ConfigError, match="unknown env id 'MetaBonk/Nope-v0'"):
        train_ppo("MetaBonk/Nope-v0", run_dir, overrides=FAST)
    from metabonk_gym.errors import RewardSpecError, UnknownStateError

    with pytest.raises(RewardSpecError, match="unknown reward 'fast'"):
        train_ppo(QUEST, run_dir, overrides={**FAST, "reward": "fast"})
    with pytest.raises(UnknownStateError, match="room9"):
        train_ppo(QUEST, run_dir, overrides={**FAST, "state": "room9"})
    with pytest.raises(CheckpointError, match="model file not found"):
        train_ppo(QUEST, run_dir, overrides=FAST, init_from=tmp_path / "nope.zip")
    assert not run_dir.exists()
