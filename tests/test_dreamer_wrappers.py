"""`train dreamer` with a `wrappers:` stack (issue 22): a tiny run for real through the CLI with
`--config`, whose `config.yaml` records the stack; sheeprl's MLP encodes the stack's keys beside
the frame; `--resume`, `eval` and `evaluate_dreamer` rebuild the same stack, and another stack is a
one-line error that writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import sheeprl  # noqa: E402,F401  (the world extra; CI installs it: a missing one fails)
import torch
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

QUEST = "MetaBonk/BonkQuest-v0"
TINY = [
    "--downscale", "4", "--learning-starts", "32", "--batch-size", "2", "--sequence-length", "8",
    "--replay-ratio", "0.1", "--checkpoint-every", "50", "--log-every", "50",
    "--env-kwarg", "max_episode_steps=40",
]  # fmt: skip
STACK = "wrappers:\n  - tile_tokens\n  - {name: button_history, n: 2}\n"
runner = CliRunner()


@pytest.fixture(scope="module")
def wrapped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dreamer_wrappers")
    (folder / "stack.yaml").write_text(STACK)
    run = folder / "run"
    result = runner.invoke(
        app,
        ["train", "dreamer", QUEST, "--out", str(run), "--steps", "100", *TINY]
        + ["--config", str(folder / "stack.yaml")],
    )
    assert result.exit_code == 0, result.output
    return run


def _mlp_inputs(checkpoint: Path) -> int:
    state = torch.load(checkpoint, weights_only=True)
    return int(state["world_model"]["encoder.mlp_encoder.model._model.0.weight"].shape[1])


def test_the_stack_is_recorded_and_reaches_dreamers_mlp(wrapped_run: Path) -> None:
    from metabonk_gym.training.wrapstack import apply_wrappers, run_wrappers

    assert run_wrappers(wrapped_run) == [
        {"name": "tile_tokens"},
        {"name": "button_history", "n": 2},
    ]
    checkpoints = sorted(p.name for p in (wrapped_run / "sheeprl" / "checkpoint").iterdir())
    assert checkpoints == ["ckpt_100_0.ckpt", "ckpt_50_0.ckpt"]
    # every key of the stack but the frame: tiles, sprite_map, classes (20 x 30 each), sprites
    # (64 x 9) and buttons, flattened side by side
    env = apply_wrappers(gym.make(QUEST, downscale=4), run_wrappers(wrapped_run))
    try:
        sizes = {k: int(np.prod(s.shape)) for k, s in env.observation_space.spaces.items()}
    finally:
        env.close()
    assert sizes["tiles"] == 600 and sizes["sprites"] == 64 * 9
    expected = sum(n for k, n in sizes.items() if k != "pixels")
    assert _mlp_inputs(wrapped_run / "sheeprl" / "checkpoint" / "ckpt_100_0.ckpt") == expected


def test_resume_keeps_the_stack_and_another_stack_is_refused(
    wrapped_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    shutil.copytree(wrapped_run, run)
    result = runner.invoke(
        app, ["train", "dreamer", QUEST, "--out", str(run), "--resume", "--steps", "150"]
    )
    assert result.exit_code == 0, result.output
    assert (run / "sheeprl" / "checkpoint" / "ckpt_150_0.ckpt").is_file()
    assert _mlp_inputs(run / "sheeprl" / "checkpoint" / "ckpt_150_0.ckpt") == _mlp_inputs(
        wrapped_run / "sheeprl" / "checkpoint" / "ckpt_100_0.ckpt"
    )
    other = tmp_path / "other.yaml"
    other.write_text("wrappers: [tile_tokens]\n")
    before = sorted(p.name for p in (run / "sheeprl" / "checkpoint").iterdir())
    refused = runner.invoke(
        app,
        ["train", "dreamer", QUEST, "--out", str(run), "--resume", "--steps", "200"]
        + ["--config", str(other)],
    )
    assert refused.exit_code == 2, refused.output
    assert "was trained with wrappers tile_tokens() > button_history(n=2)" in refused.output
    assert sorted(p.name for p in (run / "sheeprl" / "checkpoint").iterdir()) == before


def test_eval_rebuilds_the_stack(wrapped_run: Path, tmp_path: Path) -> None:
    from metabonk_gym.agents.episode import episode_config
    from metabonk_gym.training.errors import ConfigError
    from metabonk_gym.worldmodel.dreamer import DreamerPolicy, evaluate_dreamer

    result = evaluate_dreamer(wrapped_run, episodes=1, max_steps=12)
    assert result["mean_length"] == 12 and result["checkpoint_steps"] == 100
    policy = DreamerPolicy(wrapped_run)
    assert policy.keys is not None and policy.keys.vectors == [
        "buttons",
        "classes",
        "sprite_map",
        "sprites",
        "tiles",
    ]
    with pytest.raises(ConfigError, match="trained with wrappers"):
        policy(np.zeros((40, 60, 3), np.uint8))  # a bare frame: not the stack it learned on
    report = tmp_path / "report.json"
    cli = runner.invoke(
        app,
        ["eval", QUEST, str(wrapped_run), "--episodes", "1", "--max-steps", "10"]
        + ["--out", str(report)],
    )
    assert cli.exit_code == 0, cli.output
    assert json.loads(report.read_text())["episodes"][0]["length"] == 10
    with pytest.raises(ConfigError, match="was trained with wrappers"):
        episode_config(QUEST, str(wrapped_run), overrides={"wrappers": ["tile_tokens"]})


def test_bad_stacks_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text("wrappers: [tile_token]\n")
    result = runner.invoke(
        app, ["train", "dreamer", QUEST, "--out", str(tmp_path / "a"), "--config", str(typo)]
    )
    assert result.exit_code == 2 and "did you mean 'tile_tokens'" in result.output
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("sizes: S\n")
    result = runner.invoke(
        app, ["train", "dreamer", QUEST, "--out", str(tmp_path / "b"), "--config", str(unknown)]
    )
    assert result.exit_code == 2 and "unknown key(s) sizes" in result.output
    value = tmp_path / "value.yaml"  # an option value the wrapper refuses
    value.write_text("wrappers: [{name: tile_tokens, source: nope}]\n")
    result = runner.invoke(
        app, ["train", "dreamer", QUEST, "--out", str(tmp_path / "c"), "--config", str(value)]
    )
    assert result.exit_code == 2 and "wrapper tile_tokens(source='nope') failed" in result.output
    assert not any((tmp_path / name).exists() for name in "abc")


def test_dreamer_keys_scale_every_key_into_0_1() -> None:
    from metabonk_gym.worldmodel.dreamer_env import DreamerKeys

    space = gym.spaces.Dict(
        {
            "pixels": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
            "tiles": gym.spaces.Box(0, 2**31 - 1, (2, 2), np.int32),
            "pos": gym.spaces.Box(-10, 10, (2,), np.int32),
        }
    )
    keys = DreamerKeys(space)
    out = keys(
        {
            "pixels": np.ones((8, 8, 3), np.uint8),
            "tiles": np.array([[0, 2**31 - 1], [2**30, 7]], np.int32),
            "pos": np.array([-10, 5], np.int32),
        }
    )
    assert out["rgb"].shape == (8, 8, 3) and out["tiles"].dtype == np.float32
    assert out["tiles"][[0, 1]].tolist() == [0.0, 1.0] and out["pos"].tolist() == [0.0, 0.75]
    assert all(keys.space[k].contains(out[k]) for k in ("tiles", "pos"))
    with pytest.raises(ValueError, match="frame under 'pixels'"):
        DreamerKeys(gym.spaces.Dict({"tiles": space["tiles"]}))
    with pytest.raises(ValueError, match="which Dreamer cannot read"):
        DreamerKeys(gym.spaces.Dict({"pixels": space["pixels"], "text": gym.spaces.Text(8)}))
