"""Megabonk learns offline (issue 27): demonstrations recorded from the game's own input
snapshot against a real realtime `bonklink-sim` (real TCP on loopback) whose keyboard is played by
a scripted person, a Box-action IDM and its labels, BC and the world model on Box actions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from metabonk_gym.agents.record import record
from metabonk_gym.bonklink.actions import snapshot_to_action
from metabonk_gym.bonklink.sim import BonkLinkSim
from metabonk_gym.experts.base import AgentError

pytestmark = pytest.mark.net

MEGABONK = "MetaBonk/Megabonk-v0"
FRAMES = {"obs_type": "rgb", "downscale": 2, "policy": "MultiInputPolicy"}


class LoggedSim:
    """A realtime sim with a scripted human whose every tick's input is logged."""

    def __init__(self, seed: int = 3, **kwargs: Any) -> None:
        self.sim = BonkLinkSim(port=0, human="scripted", seed=seed, input_snapshot=True, **kwargs)
        assert self.sim.player is not None
        self.played: list[np.ndarray] = []
        player, act = self.sim.player, self.sim.player.act

        def logged(game: Any) -> Any:
            action = act(game)
            self.played.append(snapshot_to_action(game.snapshot_of(action), "box"))
            return action

        player.act = logged  # type: ignore[method-assign]
        self.port = self.sim.start()

    def stop(self) -> None:
        self.sim.stop()


@pytest.fixture
def human_sim() -> Iterator[LoggedSim]:
    sim = LoggedSim(speed=4.0, jpeg_hz=15)
    try:
        yield sim
    finally:
        sim.stop()


def _contains(haystack: np.ndarray, needle: np.ndarray) -> bool:
    """`needle` (n, d) occurs as consecutive rows of `haystack`."""
    n = len(needle)
    return any(
        np.allclose(haystack[i : i + n], needle, atol=1e-6) for i in range(len(haystack) - n + 1)
    )


def test_record_human_at_the_game_stores_what_was_played(human_sim: LoggedSim, tmp_path: Path):
    import minari

    result = record(
        MEGABONK,
        "human",
        "test/mb-human-v0",
        episodes=2,
        overrides={**FRAMES, "base_port": human_sim.port, "max_episode_steps": 40, "frameskip": 1},
        video_dir=tmp_path / "videos",
    )
    assert result.saved_episodes == 2 and result.saved_steps == 80
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == [
        "episode_0000.mp4",
        "episode_0001.mp4",
    ]
    played = np.asarray(human_sim.played)
    dataset = minari.load_dataset("test/mb-human-v0")
    moving = 0
    for episode in dataset.iterate_episodes():
        actions = np.asarray(episode.actions, np.float32)
        assert actions.shape == (40, 10)
        # the env sent nothing: every recorded action is the scripted person's, tick for tick
        assert _contains(played, actions)
        moving += int((np.hypot(actions[:, 0], actions[:, 1]) > 0.5).sum())
    assert moving > 0  # not all neutral


def test_human_steps_merge_the_ticks_they_span(human_sim: LoggedSim):
    import minari

    record(
        MEGABONK,
        "human",
        "test/mb-human4-v0",
        episodes=1,
        overrides={**FRAMES, "base_port": human_sim.port, "max_episode_steps": 30},
    )
    from metabonk_gym.bonklink.actions import merge_box_actions

    played = np.asarray(human_sim.played)
    actions = np.asarray(next(minari.load_dataset("test/mb-human4-v0").iterate_episodes()).actions)
    merged = [merge_box_actions(list(played[i : i + 4])) for i in range(len(played) - 3)]
    # each recorded step is 4 of the person's ticks, merged
    assert all(any(np.allclose(a, m, atol=1e-5) for m in merged) for a in actions)


def test_record_human_without_input_snapshot_is_one_line():
    # a person plays, but the plugin's EnableInputSnapshot is off: no HINP trailer
    sim = BonkLinkSim(port=0, seed=1, speed=4.0, human="scripted")
    port = sim.start()
    try:
        with pytest.raises(AgentError, match="EnableInputSnapshot") as info:
            record(
                MEGABONK,
                "human",
                "test/mb-none-v0",
                episodes=1,
                overrides={"base_port": port, "max_episode_steps": 10},
            )
        assert "\n" not in str(info.value)
    finally:
        sim.stop()


def test_a_dropped_recording_keeps_the_finished_episodes():
    import minari

    # big raw frames fill the socket buffers fast: a client that stalls for longer than the
    # game's send timeout is dropped by the game (the sim's own `_send_packet` path)
    sim = LoggedSim(
        seed=5, speed=4.0, jpeg_hz=60, frame_format="raw_rgb", send_timeout=1.0, look="detailed"
    )
    calls = {"n": 0}

    def stall() -> bool:  # a slow client: the 5th step of the second episode waits 4 s
        calls["n"] += 1
        if calls["n"] == 31 + 5:
            import time

            time.sleep(4.0)
        return False

    try:
        with pytest.raises(AgentError) as info:
            record(
                MEGABONK,
                "human",
                "test/mb-dropped-v0",
                episodes=3,
                overrides={**FRAMES, "base_port": sim.port, "max_episode_steps": 30},
                stop=stall,
            )
        dropped = sim.sim.stats.dropped_clients
    finally:
        sim.stop()
    message = str(info.value)
    assert dropped >= 1
    assert "\n" not in message
    found = re.search(r"ended the connection in episode (\d+) after \d+ steps", message)
    assert found is not None, message  # episode 1 unless the loaded machine stalled it sooner
    lost = int(found.group(1))
    assert "kept in dataset test/mb-dropped-v0" in message
    dataset = minari.load_dataset("test/mb-dropped-v0")
    episodes = list(dataset.iterate_episodes())
    # the finished episodes are kept whole; the dropped one up to the drop, marked truncated
    assert lost + 1 >= len(episodes) >= lost
    for episode in episodes[:lost]:
        assert len(episode.actions) == 30 and not episode.truncations[:-1].any()
    if len(episodes) > lost:
        assert len(episodes[lost].actions) < 30 and episodes[lost].truncations[-1]
    assert f"{len(episodes)} episode(s)" in message
    played = np.asarray(sim.played)
    from metabonk_gym.bonklink.actions import merge_box_actions

    merged = [merge_box_actions(list(played[i : i + 4])) for i in range(len(played) - 3)]
    for episode in episodes:
        assert all(any(np.allclose(a, m, atol=1e-5) for m in merged) for a in episode.actions)


# ---------------------------------------------------------------------- IDM, label, BC, world model
@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Scripted demonstrations with frames and videos, and a lockstep game for BC/dream."""
    root = tmp_path_factory.getbasetemp()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINARI_DATASETS_PATH", str(root / "minari"))
        human = LoggedSim(seed=7, speed=6.0, jpeg_hz=15)
        try:
            record(
                MEGABONK,
                "human",
                "test/mb-demos-v0",
                episodes=3,
                overrides={**FRAMES, "base_port": human.port, "max_episode_steps": 40},
                video_dir=root / "mb-videos",
            )
        finally:
            human.stop()
        game = BonkLinkSim(port=0, mode="lockstep", seed=2, jpeg_hz=15)
        port = game.start()
        try:
            yield {"dataset": "test/mb-demos-v0", "videos": root / "mb-videos", "port": port}
        finally:
            game.stop()


@pytest.fixture(scope="module")
def box_idm(demos: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    from metabonk_gym.video.idm import train_idm

    out = tmp_path_factory.mktemp("mb-idm")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINARI_DATASETS_PATH", str(tmp_path_factory.getbasetemp() / "minari"))
        train_idm([demos["dataset"]], out, epochs=2, width=8)
    return out


def test_box_idm_weighs_rare_button_presses(
    demos: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import json

    import minari

    from metabonk_gym.video.idm import train_idm

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(Path(demos["videos"]).parent / "minari"))
    train_idm(
        [demos["dataset"]],
        tmp_path / "idm",
        epochs=1,
        width=8,
        val_fraction=0.0,
        balance_buttons=True,
    )
    weights = json.loads((tmp_path / "idm" / "idm.json").read_text())["press_weights"]
    actions = np.concatenate(
        [np.asarray(e.actions) for e in minari.load_dataset(demos["dataset"]).iterate_episodes()]
    )
    # the weights are the training episodes' own: a button's unpressed over pressed steps
    for name, column in (("fire", 4), ("ability", 5)):
        pressed = int((actions[:, column] > 0).sum())
        if pressed:
            expected = min(20.0, max(1.0, (len(actions) - pressed) / pressed))
            assert weights[name] == pytest.approx(expected), (name, weights)
        else:
            assert name not in weights


def test_box_idm_trains_with_per_part_figures(box_idm: Path):
    import json

    meta = json.loads((box_idm / "idm.json").read_text())
    assert meta["game"] == "Megabonk" and meta["action_space"]["type"] == "Box"
    assert [p[0] for p in meta["action_space"]["parts"]][:2] == ["move", "aim"]
    figures = meta["metrics"]
    assert figures["move"]["moving_steps"] > 0
    assert 0.0 <= figures["direction_within_22_5"] <= 1.0
    assert 0.0 <= figures["fire"]["accuracy"] <= 1.0 and "button_accuracy" in figures


def test_box_idm_labels_videos_with_box_actions_and_confidence(
    demos: dict[str, Any], box_idm: Path, tmp_path: Path
):
    import minari

    from metabonk_gym.video.dataset import to_dataset
    from metabonk_gym.video.label import label

    videos = sorted(demos["videos"].glob("*.mp4"))
    vds = to_dataset(videos, MEGABONK, tmp_path / "vds", check=False)
    assert vds.index["step_rate"] == 15.0  # the game's 60 ticks/s over frameskip 4
    result = label(vds, box_idm, "test/mb-labelled-v0", obs_type="rgb", downscale=2)
    assert result.episodes == 3 and result.steps == 120
    episode = next(minari.load_dataset("test/mb-labelled-v0").iterate_episodes())
    actions = np.asarray(episode.actions)
    assert actions.shape == (40, 10) and actions.dtype == np.float32
    assert set(np.unique(actions[:, 4:8])) <= {-1.0, 1.0}  # buttons are binary heads
    confidence = np.asarray(episode.infos["idm_confidence"])[1:]
    assert ((confidence >= 0.5) & (confidence <= 1.0)).all()


def test_a_box_idm_with_motion_reads_the_scroll_and_labels_videos(
    demos: dict[str, Any], box_idm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import json

    import minari

    from metabonk_gym.video.dataset import to_dataset
    from metabonk_gym.video.idm import Idm, train_idm
    from metabonk_gym.video.label import label

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(Path(demos["videos"]).parent / "minari"))
    out = tmp_path / "idm"
    train_idm([demos["dataset"]], out, epochs=1, width=8, val_fraction=0.0, motion=True)
    assert json.loads((out / "idm.json").read_text())["motion"] is True
    idm = Idm(out)
    assert idm.net.shift is not None and tuple(idm.net.shift.weight_logits.shape) == (45, 80)
    assert Idm(box_idm).net.shift is None  # a model without it loads as it was trained
    vds = to_dataset(sorted(demos["videos"].glob("*.mp4")), MEGABONK, tmp_path / "vds", check=False)
    result = label(vds, out, "test/mb-motion-labelled-v0", obs_type="rgb", downscale=2)
    assert result.steps == 120
    episode = next(minari.load_dataset("test/mb-motion-labelled-v0").iterate_episodes())
    assert np.asarray(episode.actions).shape == (40, 10)


def test_bc_and_world_model_run_on_box_actions(demos: dict[str, Any], box_idm: Path, tmp_path):
    import gymnasium as gym
    from metabonk_gym.wrappers import TemporalStrip

    from metabonk_gym.training.bc import train_bc
    from metabonk_gym.video.label import relabel_dataset
    from metabonk_gym.worldmodel.data import dataset_episodes
    from metabonk_gym.worldmodel.dream import dream
    from metabonk_gym.worldmodel.train import train_world_model

    relabel_dataset(demos["dataset"], box_idm, "test/mb-relabelled-v0", state_only=True)
    result = train_bc(
        MEGABONK,
        "test/mb-relabelled-v0",
        tmp_path / "bc",
        overrides={"bc_epochs": 2, "base_port": demos["port"], "n_envs": 1},
    )
    assert (tmp_path / "bc" / "model.zip").exists() and result.extra["action_error"] >= 0.0

    episodes, facts = dataset_episodes([demos["dataset"]])
    assert facts.action_box and facts.n_actions == 10
    train_world_model(episodes, facts, tmp_path / "wm", steps=4, batch_size=2, eval_every=4)
    env = gym.make(MEGABONK, port=demos["port"], obs_type="rgb", downscale=2, frameskip=4)
    strip = TemporalStrip(env, past=1, future=2, predictor="world-model", model=tmp_path / "wm")
    try:
        strip.reset()
        obs, *_ = strip.step(strip.action_space.sample())
        assert obs["strip"].shape == (4, 45, 80, 3)
    finally:
        strip.close()
    dreamt = dream(
        tmp_path / "wm", steps=4, env_kwargs={"port": demos["port"], "send_actions": True}
    )
    assert dreamt["steps"] == 4 and np.asarray(dreamt["actions"]).shape == (4, 10)


def test_a_box_idm_is_refused_for_another_game_and_a_gba_idm_for_megabonk(
    demos: dict[str, Any], box_idm: Path, tmp_path: Path
):
    from metabonk_gym.errors import ModelFileError
    from metabonk_gym.training.video import write_mp4
    from metabonk_gym.video.dataset import to_dataset
    from metabonk_gym.video.idm import train_idm
    from metabonk_gym.video.label import label, relabel_dataset

    quest = "MetaBonk/BonkQuest-v0"
    record(quest, "scripted", "test/quest-few-v0", episodes=1, overrides={"obs_type": "rgb",
           "downscale": 1, "max_episode_steps": 12})  # fmt: skip
    # a video of another game, labelled by the Megabonk IDM
    frames = np.zeros((6, 160, 240, 3), np.uint8)
    video = write_mp4(tmp_path / "quest.mp4", frames, fps=15)
    quest_videos = to_dataset([video], quest, tmp_path / "qv", check=False)
    with pytest.raises(ModelFileError, match="trained on Megabonk.*of BonkQuest") as info:
        label(quest_videos, box_idm, "test/wrong-v0")
    assert "\n" not in str(info.value)
    # a GBA IDM for Megabonk
    gba_idm = tmp_path / "gba-idm"
    train_idm(["test/quest-few-v0"], gba_idm, epochs=1, width=4, val_fraction=0.0)
    megabonk_videos = to_dataset(
        sorted(demos["videos"].glob("*.mp4"))[:1], MEGABONK, tmp_path / "mv", check=False
    )
    with pytest.raises(ModelFileError, match="trained on BonkQuest.*of Megabonk") as info:
        label(megabonk_videos, gba_idm, "test/wrong2-v0")
    assert "\n" not in str(info.value)
    with pytest.raises(ModelFileError, match="trained on BonkQuest.*of Megabonk"):
        relabel_dataset(demos["dataset"], gba_idm, "test/wrong3-v0")


# ---------------------------------------------------------------------- the CLI and the figures
def test_cli_records_the_person_at_the_game(human_sim: LoggedSim, tmp_path: Path):
    import minari
    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(
        app,
        [
            "record", MEGABONK, "--agent", "human", "--episodes", "1", "--max-steps", "12",
            "--dataset", "test/mb-cli-v0", "--obs-type", "rgb", "--set", "policy=MultiInputPolicy",
            "--set", f"base_port={human_sim.port}", "--video", str(tmp_path / "v"),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (tmp_path / "v" / "episode_0000.mp4").exists()
    episode = next(minari.load_dataset("test/mb-cli-v0").iterate_episodes())
    assert np.asarray(episode.actions).shape == (12, 10)


def test_bench_video_megabonk_runs_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import json

    from metabonk_gym.cli.main import app
    from typer.testing import CliRunner

    # a relative --work folder: Minari's staging path is made from it (a relative one broke
    # Minari's writes), so the bench resolves it
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "figures.json"
    result = CliRunner().invoke(
        app,
        [
            "bench", "video", "--game", MEGABONK, "--seeds", "2", "--episodes", "3",
            "--episode-steps", "16", "--epochs", "1", "--bc-epochs", "1", "--eval-episodes", "1",
            "--eval-steps", "8", "--wm-steps", "2", "--out", str(out), "--jobs", "2",
            "--bc-seeds", "2", "--work", "work",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert len(figures["per_seed"]) == 2
    for key in (
        "move_within_22_5",
        "button_accuracy",
        "fire_accuracy",
        "bc_survival_ratio",
        "random_survival",
        "teacher_survival",
        "world_model_psnr_t3",
    ):
        summary = figures[key]
        assert len(summary["values"]) == 2 and summary["worst"] <= summary["median"]
    # the eval cap (8 steps of 4 ticks): every policy's survival is within it
    assert 0 < figures["teacher_survival"]["median"] <= 8 * 4 / 60 + 1e-6
    assert figures["flow_psnr_t1"]["median"] > 0 and figures["copy_psnr_t2"]["median"] > 0
    # the IDM pools the whole screen's mean and decays its rate; each policy's episodes listed;
    # the two seeds ran at once in child processes
    assert (figures["pool"], figures["lr_schedule"], figures["jobs"]) == ("max+mean", "cosine", 2)
    # the IDM weighs rare buttons' presses up by default (else it never labels the ability)
    assert figures["balance_buttons"] is True
    # and reads the screen's sub-pixel scroll (the camera follows the player) by default
    assert figures["motion"] is True
    assert [row["seed"] for row in figures["per_seed"]] == [0, 1]
    for row in figures["per_seed"]:
        # two clones of each label source, one episode each; random plays once
        assert {k: len(v) for k, v in row["survival_per_episode"].items()} == {
            "idm": 2,
            "true": 2,
            "random": 1,
        }
        assert {k: len(v) for k, v in row["bc_clone_survival"].items()} == {
            "idm": 2,
            "true": 2,
            "random": 1,
        }
    assert figures["bc_seeds"] == 2
    for seed in (0, 1):  # the work folder keeps what each seed made
        assert (tmp_path / "work" / f"idm-s{seed}" / "idm.json").is_file()
        assert (tmp_path / "work" / f"bc-true-s{seed}-c1" / "model.zip").is_file()
        assert (tmp_path / "work" / "minari" / "bench" / f"mb-demos-s{seed}-v0").is_dir()


def test_idm_pool_and_schedule_are_checked(tmp_path: Path):
    from metabonk_gym.training.errors import DatasetError
    from metabonk_gym.video.idm import train_idm

    for kwargs, flag in (({"pool": "avg"}, "--pool"), ({"lr_schedule": "step"}, "--lr-schedule")):
        with pytest.raises(DatasetError, match=flag) as info:
            train_idm(["test/none-v0"], tmp_path / "idm", **kwargs)
        assert "\n" not in str(info.value)


def _playing(seed: int = 5) -> Any:
    from metabonk_gym.bonklink.codec import Action
    from metabonk_gym.bonklink.game import ArenaGame

    game = ArenaGame(seed=seed)
    game.tick(Action(interact=True))
    return game


def test_detailed_look_shows_the_input_the_plain_look_hides():
    """The IDM can only learn what the frames show: with the detailed look a step's move (even a
    sub-pixel one), the character's heading, holding fire (and its own shots) and the ability
    show on screen; the plain look (the default) shows none of the heading, the fire pose or
    a sub-pixel move."""
    from metabonk_gym.bonklink.codec import Action
    from metabonk_gym.bonklink.render import FrameRenderer

    plain, detailed = FrameRenderer(), FrameRenderer(look="detailed")

    def frames(action: Action, ticks: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        game = _playing()
        before = detailed.render(game).copy()
        before_plain = plain.render(game).copy()
        for _ in range(ticks):
            game.tick(action)
        return before, detailed.render(game).copy(), before_plain - plain.render(game)

    # one tick of a slow move: 0.05 world units, 0.4 pixels: only a sub-pixel scroll shows it
    before, after, plain_change = frames(Action(move_x=0.5))
    assert np.abs(after.astype(int) - before).mean() > 0.5
    assert not plain_change.any()
    # the heading: running right and running left draw the character differently
    _, right, _ = frames(Action(move_x=1.0))
    _, left, _ = frames(Action(move_x=-1.0))
    centre = (slice(70, 110), slice(140, 180))
    assert not np.array_equal(right[centre], left[centre])
    # holding fire: the attack pose (an orange flash by the character) and a white shot
    _, idle, _ = frames(Action(aim_x=1.0), ticks=10)
    _, firing, _ = frames(Action(aim_x=1.0, fire=True), ticks=10)  # the shot clear of the flash
    flash = (firing == (255, 160, 30)).all(-1)
    assert flash.sum() >= 25 and not (idle == (255, 160, 30)).all(-1).any()
    assert (firing == (255, 255, 255)).all(-1).sum() >= 25  # the player's own shot: 5x5 white
    # the ability goes off: its ring
    _, still, _ = frames(Action())
    _, ring, _ = frames(Action(ability=True))
    assert (ring != still).any(-1).sum() > 100
    with pytest.raises(ValueError, match="look must be one of"):
        FrameRenderer(look="fancy")  # type: ignore[arg-type]


def test_the_scripted_person_outlives_random_play():
    """The teacher the clones copy plays well enough that survival tells play apart: over 90
    game seconds it outlives a policy pressing random inputs (the bench's cap is longer)."""
    from metabonk_gym.bonklink.codec import Action
    from metabonk_gym.bonklink.game import GAMEPLAY, LEVEL_UP
    from metabonk_gym.bonklink.player import survival_times

    def random_survival(seed: int, seconds: float) -> float:
        game, rng = _playing(seed), np.random.default_rng(seed)
        action = Action()
        while game.menu in (GAMEPLAY, LEVEL_UP) and game.game_time < seconds:
            if game.ticks % 4 == 0:  # a new random input every env step (frameskip 4)
                v, b = rng.uniform(-1, 1, 4), rng.random(2) < 0.5
                action = Action(*v.tolist(), fire=bool(b[0]), ability=bool(b[1]))
            game.tick(Action(interact=True) if game.menu == LEVEL_UP else action)
        return game.game_time

    teacher = survival_times(100, 3, 90.0)
    randomly = [random_survival(100 + i, 90.0) for i in range(3)]
    assert min(teacher) == 90.0, teacher
    assert float(np.mean(randomly)) < 75.0, randomly


def test_a_rare_button_never_predicted_shows_in_its_recall():
    from metabonk_gym.video.boxactions import BoxLayout

    layout = BoxLayout((("move", "stick", (0, 1)), ("ability", "button", (2,))))
    true = np.zeros((100, 3), np.float32)
    true[:, 2] = -1.0
    true[:2, 2] = 1.0  # pressed on 2% of the steps
    never = true.copy()
    never[:, 2] = -1.0
    figures = layout.metrics(never, true)["ability"]
    assert figures["accuracy"] == 0.98 and figures["recall"] == 0.0
    assert layout.metrics(true, true)["ability"]["recall"] == 1.0
