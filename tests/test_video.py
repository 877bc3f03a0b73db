"""Learning from video (issue 16): real mp4 files written here with imageio and decoded back with
imageio-ffmpeg, frame folders, crops, the look-alike check, the IDM, labelling, the learned
reward, the CLI end to end, and bad input with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import imageio.v2 as imageio
import numpy as np
import pytest
from typer.testing import CliRunner

import metabonk_gym  # noqa: F401
from metabonk_gym.agents.record import record
from metabonk_gym.errors import ModelFileError
from metabonk_gym.training.errors import DatasetError, VideoDatasetError, VideoError
from metabonk_gym.training.video import write_mp4
from metabonk_gym.video.dataset import VideoDataset, to_dataset
from metabonk_gym.video.idm import Idm, train_idm
from metabonk_gym.video.label import label

QUEST = "MetaBonk/BonkQuest-v0"
ARENA = "MetaBonk/BonkArena-v0"
FULL = {"obs_type": "rgb", "downscale": 1}


def play_frames(env_id: str, steps: int = 24, seed: int = 0) -> np.ndarray:
    """Full-size frames of random play."""
    env = gym.make(env_id, **FULL)
    try:
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        frames = [obs]
        for _ in range(steps):
            obs, _, term, trunc, _ = env.step(env.action_space.sample())
            frames.append(obs)
            if term or trunc:
                break
        return np.stack(frames)
    finally:
        env.close()


@pytest.fixture(scope="module")
def quest_frames() -> np.ndarray:
    return play_frames(QUEST)


@pytest.fixture(scope="module")
def quest_dataset(tmp_path_factory) -> str:
    """A Minari dataset of the scripted expert (with 30% random actions) in full-size frames."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINARI_DATASETS_PATH", str(tmp_path_factory.getbasetemp() / "minari"))
        record(QUEST, "scripted", "test/quest-video-v0", episodes=4, noise=0.3, overrides=FULL)
    return "test/quest-video-v0"


@pytest.fixture(scope="module")
def quest_idm(quest_dataset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("idm")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINARI_DATASETS_PATH", str(tmp_path_factory.getbasetemp() / "minari"))
        train_idm([quest_dataset], out, epochs=2, width=8)
    return out


# ---------------------------------------------------------------------- decoding
def test_mp4_at_60_fps_is_resampled_to_the_step_rate(tmp_path, quest_frames):
    video = write_mp4(tmp_path / "q60.mp4", np.repeat(quest_frames, 4, axis=0), fps=60)
    dataset = to_dataset([video], QUEST, tmp_path / "ds")
    entry = dataset.videos[0]
    assert entry["fps"] == 60 and entry["length"] == len(quest_frames)
    frames = dataset.frames(0)
    assert frames.shape == quest_frames.shape
    # H.264 is lossy, but each step's frame is the right one: far closer than its neighbours
    err = np.abs(frames.astype(int) - quest_frames).mean(axis=(1, 2, 3))
    assert err.max() < 8
    assert entry["looks_like_game"] is True and entry["similarity"] > 0.8
    index = json.loads((tmp_path / "ds" / "index.json").read_text())
    assert index["game"] == "BonkQuest" and index["step_rate"] == 15.0
    assert index["videos"][0]["source"] == str(video)


def test_frame_folder_at_twice_the_size_scales_bit_exact(tmp_path, quest_frames):
    folder = tmp_path / "frames"
    folder.mkdir()
    for i, frame in enumerate(quest_frames):
        imageio.imwrite(folder / f"f{i:04d}.png", frame.repeat(2, axis=0).repeat(2, axis=1))
    dataset = to_dataset([folder], QUEST, tmp_path / "ds", fps=15)
    assert np.array_equal(dataset.frames(0), quest_frames)


def test_crop_cuts_the_game_window_out(tmp_path, quest_frames):
    folder = tmp_path / "window"
    folder.mkdir()
    for i, frame in enumerate(quest_frames[:6]):
        canvas = np.full((200, 320, 3), 30, np.uint8)
        canvas[20:180, 40:280] = frame
        imageio.imwrite(folder / f"f{i:04d}.png", canvas)
    with pytest.raises(VideoError, match=r"320x200 .*pass --crop"):
        to_dataset([folder], QUEST, tmp_path / "nocrop")
    assert not (tmp_path / "nocrop").exists()
    dataset = to_dataset([folder], QUEST, tmp_path / "ds", crop="40,20,240,160")
    assert np.array_equal(dataset.frames(0), quest_frames[:6])


def test_a_video_that_is_not_the_game_is_reported(tmp_path):
    rng = np.random.default_rng(0)
    noise = write_mp4(tmp_path / "noise.mp4", rng.integers(0, 256, (8, 160, 240, 3), np.uint8), 15)
    dataset = to_dataset([noise], QUEST, tmp_path / "ds")
    assert dataset.videos[0]["looks_like_game"] is False


def test_bad_videos_give_one_line_errors(tmp_path):
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(VideoError, match="is empty"):
        to_dataset([empty], QUEST, tmp_path / "a")
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(np.random.default_rng(0).bytes(5000))
    with pytest.raises(VideoError, match="cannot be decoded") as info:
        to_dataset([corrupt], QUEST, tmp_path / "b")
    assert "\n" not in str(info.value)
    square = write_mp4(tmp_path / "square.mp4", np.zeros((4, 240, 320, 3), np.uint8), 15)
    with pytest.raises(VideoError, match=r"320x240 \(aspect 1.33\).*240x160"):
        to_dataset([square], QUEST, tmp_path / "c")
    with pytest.raises(VideoError, match="not found"):
        to_dataset([tmp_path / "missing.mp4"], QUEST, tmp_path / "d")
    with pytest.raises(VideoError, match="--crop"):
        to_dataset([square], QUEST, tmp_path / "e", crop="0,0,240")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(VideoDatasetError, match="not empty"):
        to_dataset([square], QUEST, tmp_path / "full")
    for name in "abcde":
        assert not (tmp_path / name).exists()  # nothing half-written is left


def test_a_frame_folder_with_mixed_sizes_is_refused(tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    imageio.imwrite(folder / "a.png", np.zeros((160, 240, 3), np.uint8))
    imageio.imwrite(folder / "b.png", np.zeros((80, 120, 3), np.uint8))
    with pytest.raises(VideoError, match="every frame of a folder must have one size"):
        to_dataset([folder], QUEST, tmp_path / "ds")
    with pytest.raises(VideoDatasetError, match="not a video dataset"):
        VideoDataset(tmp_path)


# ---------------------------------------------------------------------- IDM and labels
def test_idm_files_are_a_state_dict_and_json(quest_idm):
    meta = json.loads((quest_idm / "idm.json").read_text())
    assert meta["game"] == "BonkQuest" and meta["env_id"] == QUEST
    assert meta["action_space"] == {"type": "Discrete", "n": 6}
    assert meta["obs"] == {"obs_type": "rgb", "downscale": 2, "shape": [80, 120, 3]}
    assert meta["metrics"]["accuracy"] is not None and len(meta["metrics"]["confusion"]) == 6
    assert "per_button" in meta["metrics"] and "accuracy_noop" in meta["metrics"]
    assert (quest_idm / "tensorboard").is_dir()
    idm = Idm(quest_idm)
    probs = idm.probabilities(play_frames(QUEST, 5))
    assert probs.shape[1] == 6 and np.allclose(probs.sum(1), 1.0, atol=1e-5)


def test_labelled_dataset_keeps_every_step_with_its_confidence(tmp_path, quest_idm, quest_frames):
    video = write_mp4(tmp_path / "q.mp4", quest_frames, fps=15)
    videos = to_dataset([video], QUEST, tmp_path / "ds")
    result = label(videos, quest_idm, "test/quest-labelled-v0", threshold=0.99)
    assert result.steps == len(quest_frames) - 1 and result.frames_per_s > 0
    from metabonk_gym.training.datasets import load_dataset

    episode = next(load_dataset("test/quest-labelled-v0").iterate_episodes())
    assert len(episode.actions) == len(quest_frames) - 1  # low confidence: flagged, not dropped
    assert episode.infos["low_confidence"][1:].sum() == result.low_confidence_steps > 0
    assert episode.observations.shape[1:] == (20, 30, 1)  # BonkQuest's training observation
    with pytest.raises(DatasetError, match="inferred by an IDM"):
        train_idm(["test/quest-labelled-v0"], tmp_path / "idm2", epochs=1)
    with pytest.raises(DatasetError, match="is a video dataset"):
        train_idm([str(tmp_path / "ds")], tmp_path / "idm3", epochs=1)


def test_an_idm_for_another_game_is_refused(tmp_path, quest_idm):
    video = write_mp4(tmp_path / "a.mp4", play_frames(ARENA, 6), fps=15)
    arena = to_dataset([video], ARENA, tmp_path / "arena", check=False)
    with pytest.raises(ModelFileError, match="trained on BonkQuest.*of BonkArena"):
        label(arena, quest_idm, "test/arena-labelled-v0")
    with pytest.raises(ModelFileError, match="not found"):
        Idm(tmp_path)


def test_an_idm_file_declaring_a_huge_frame_is_refused_before_any_allocation(tmp_path, quest_idm):
    import json
    import shutil

    hostile = tmp_path / "hostile"
    shutil.copytree(quest_idm, hostile)
    meta_path = hostile / "idm.json"
    meta = json.loads(meta_path.read_text())
    meta["motion"] = True  # a weight map of height x width floats: 4e10 of them
    meta["obs"]["shape"] = [200_000, 200_000, 1]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(ModelFileError, match=r"obs\.shape\.0 must be a whole number in 1\.\.4096"):
        Idm(hostile)


# ---------------------------------------------------------------------- learned reward
def test_learned_reward_term_scores_the_screen(tmp_path, quest_frames):
    from metabonk_gym.learned.bind import bind_learned_terms
    from metabonk_gym.learned.scorer import RewardModel
    from metabonk_gym.video.reward import train_reward_model

    video = write_mp4(tmp_path / "q.mp4", quest_frames, fps=15)
    to_dataset([video], QUEST, tmp_path / "ds", check=False)
    result = train_reward_model([tmp_path / "ds"], tmp_path / "rm", epochs=1, pairs_per_epoch=64)
    assert RewardModel(tmp_path / "rm").scores(quest_frames).shape == (len(quest_frames),)
    env = gym.make(QUEST, reward={"progress": {"type": "learned", "model": str(result.model_path)}})
    try:
        env.reset(seed=0)
        with pytest.raises(RuntimeError, match="bind_learned_terms"):
            env.step(0)
        assert bind_learned_terms(env) == 1
        env.reset(seed=0)
        terms = [env.step(4)[4]["reward_terms"]["progress"] for _ in range(3)]
        assert terms[0] == 0.0 and all(np.isfinite(terms))
    finally:
        env.close()


# ---------------------------------------------------------------------- the CLI
def test_cli_chain_end_to_end(tmp_path, quest_dataset, quest_frames):
    from metabonk_gym.cli.main import app

    runner = CliRunner()
    video = write_mp4(tmp_path / "q.mp4", quest_frames, fps=15)
    r = runner.invoke(
        app, ["video", "to-dataset", str(video), "--env", QUEST, "--out", str(tmp_path / "v")]
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        ["train", "idm", quest_dataset, "--out", str(tmp_path / "idm"), "--epochs", "1", "--json"],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        ["train", "reward", str(tmp_path / "v"), "--out", str(tmp_path / "rm"), "--epochs", "1"],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "rm" / "reward_model.pt").is_file()
    r = runner.invoke(
        app,
        [
            "label",
            str(tmp_path / "v"),
            "--idm",
            str(tmp_path / "idm"),
            "--reward-model",
            str(tmp_path / "rm"),
            "--out",
            "test/cli-labelled-v0",
        ],
    )
    assert r.exit_code == 0, r.output
    import minari

    labelled = minari.load_dataset("test/cli-labelled-v0")
    rewards = np.concatenate([e.rewards for e in labelled.iterate_episodes()])
    assert np.isfinite(rewards).all() and np.abs(rewards).sum() > 0  # the reward model's scores
    r = runner.invoke(
        app,
        [
            "train",
            "bc",
            QUEST,
            "--dataset",
            "test/cli-labelled-v0",
            "--run-dir",
            str(tmp_path / "bc"),
            "--epochs",
            "1",
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "bc" / "model.zip").is_file()
    r = runner.invoke(  # and RL on top of the clone
        app,
        [
            "train",
            "ppo",
            QUEST,
            "--init-from",
            str(tmp_path / "bc" / "model.zip"),
            "--run-dir",
            str(tmp_path / "ppo"),
            "--total-steps",
            "256",
            "--set",
            "n_envs=2",
            "--set",
            "n_steps=64",
            "--set",
            "batch_size=64",
            "--no-progress",
        ],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "ppo" / "model.zip").is_file()
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video at all")
    r = runner.invoke(
        app, ["video", "to-dataset", str(bad), "--env", QUEST, "--out", str(tmp_path / "x")]
    )
    assert r.exit_code == 2 and "cannot be decoded" in r.output


def test_record_writes_the_mp4_a_player_would_upload(tmp_path):
    from metabonk_gym.cli.main import app

    r = CliRunner().invoke(
        app,
        [
            "record",
            QUEST,
            "--dataset",
            "test/quest-rec-v0",
            "--episodes",
            "1",
            "--video",
            str(tmp_path / "mp4"),
        ],
    )
    assert r.exit_code == 0, r.output
    videos = sorted((tmp_path / "mp4").glob("*.mp4"))
    assert [v.name for v in videos] == ["episode_0000.mp4"]
    from metabonk_gym.training.datasets import load_dataset

    steps = len(next(load_dataset("test/quest-rec-v0").iterate_episodes()).actions)
    dataset = to_dataset(videos, QUEST, tmp_path / "ds")
    assert dataset.videos[0]["length"] == steps + 1 and dataset.videos[0]["looks_like_game"]


def test_bench_video_runs_small(tmp_path):
    from metabonk_gym.cli.main import app

    out = tmp_path / "figures.json"
    args = ["bench", "video", "--game", QUEST, "--episodes", "4", "--epochs", "1", "--no-bc"]
    r = CliRunner().invoke(app, [*args, "--out", str(out), "--work", str(tmp_path / "w")])
    assert r.exit_code == 0, r.output
    figures = json.loads(out.read_text())["BonkQuest"]
    assert figures["video_steps"] > 0 and 0.0 <= figures["idm_accuracy"] <= 1.0
    assert figures["label_frames_per_s"] > 0 and "idm_accuracy_not_noop" in figures
    r = CliRunner().invoke(app, ["bench", "video", "--game", "Nope-v0"])
    assert r.exit_code == 2 and "choose from" in r.output


def test_megabonk_frames_scale_to_its_screen(tmp_path):
    folder = tmp_path / "mb"
    folder.mkdir()
    frames = np.random.default_rng(1).integers(0, 256, (3, 90, 160, 3), np.uint8)
    for i, frame in enumerate(frames):
        imageio.imwrite(folder / f"{i}.png", frame.repeat(2, axis=0).repeat(2, axis=1))
    dataset = to_dataset([folder], "MetaBonk/Megabonk-v0", tmp_path / "ds")
    assert dataset.game == "Megabonk" and np.array_equal(dataset.frames(0), frames)
    # without a running game the look-alike check is skipped within a second, and says so
    assert dataset.index["check"].startswith("look-alike check skipped: MetaBonk/Megabonk-v0")
    assert "similarity" not in dataset.videos[0]
