"""Numbers out of range on the new surfaces (issue 26, item 5): each is one `error:` line with
exit code 2 before any work, and leaves no folder behind. NaN and infinity count as out of range
(they pass most comparisons unnoticed), and so does a number written as text in a file."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from metabonk_gym.rewards.function import terms_from_scenario
from one_line import one_line_error as _error
from typer.testing import CliRunner

from metabonk_gym.errors import BadNumberError, RewardSpecError
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.tune import PBTSpec
from metabonk_gym.utils import check_number

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--batch-size", "0"], "--batch-size must be a whole number in [1, 4096], not 0"),
        (["--epochs", "-3"], "--epochs must be a whole number in [1, 100000], not -3"),
        (["--val-fraction", "1.5"], "--val-fraction must be a number in [0, 0.9], not 1.5"),
        (["--lr", "nan"], "--lr must be a number in (0, 10], not nan"),
        (["--window", "100000"], "--window must be a whole number in [0, 16], not 100000"),
        (["--downscale", "3"], "--downscale must be 1, 2, 4 or 8, not 3"),
        (["--obs-type", "purple"], "--obs-type must be rgb or grayscale, not 'purple'"),
    ],
)
def test_train_idm_numbers(tmp_path: Path, flags: list[str], message: str) -> None:
    out = tmp_path / "idm"
    line = _error(["train", "idm", "me/none-v0", "--out", str(out), *flags])
    assert line == f"error: {message}"
    assert not out.exists()  # the trial's --batch-size 0 left a tensorboard folder


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--pairs", "0"], "--pairs must be a whole number in [1, 10000000], not 0"),
        (["--epochs", "-1"], "--epochs must be a whole number in [1, 100000], not -1"),
        (["--obs-type", "purple"], "--obs-type must be rgb or grayscale, not 'purple'"),
    ],
)
def test_train_reward_numbers(tmp_path: Path, flags: list[str], message: str) -> None:
    out = tmp_path / "reward"
    line = _error(["train", "reward", str(tmp_path), "--out", str(out), *flags])
    assert line == f"error: {message}"
    assert not out.exists()


def test_video_max_steps_below_two(tmp_path: Path) -> None:
    out = tmp_path / "out"
    line = _error(
        ["video", "to-dataset", str(tmp_path), "--env", QUEST, "--out", str(out)]
        + ["--max-steps", "-5"]
    )
    assert line == "error: --max-steps must be a whole number in [2, 10000000], not -5"
    assert not out.exists()


def test_eval_max_steps_below_one() -> None:
    line = _error(["eval", QUEST, "random", "--episodes", "1", "--max-steps", "-5"])
    assert line == "error: config key 'max_episode_steps' must be >= 1, not -5 [flags]"


def test_train_ppo_with_a_hundred_thousand_envs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    line = _error(["train", "ppo", QUEST, "--run-dir", str(run), "--n-envs", "100000"])
    assert line == (
        "error: config key 'n_envs' must be <= 255 (each env runs in a process), not 100000 [flags]"
    )
    assert not run.exists()


@pytest.mark.parametrize(
    ("kwarg", "message"),
    [
        ("frameskip=banana", "frameskip must be an int >= 1, not 'banana'"),
        ("obs_type=purple", "obs_type must be 'rgb', 'grayscale' or 'state', not 'purple'"),
    ],
)
def test_env_kwargs_of_the_wrong_kind(tmp_path: Path, kwarg: str, message: str) -> None:
    run = tmp_path / "run"
    line = _error(["train", "ppo", QUEST, "--run-dir", str(run), "--env-kwarg", kwarg])
    assert line == f"error: {message}"
    assert not run.exists()


def test_bonklink_sim_port_out_of_range() -> None:
    line = _error(["bonklink-sim", "--port", "99999"])
    assert line == "error: --port must be a whole number in [0, 65535], not 99999"


def test_a_think_server_that_is_not_http() -> None:
    # every call used to fall back to the default action and the command exited 0
    line = _error(
        ["eval", QUEST, "think", "--episodes", "1", "--max-steps", "3"]
        + ["--server", "ftp://127.0.0.1:1/"]
    )
    assert line == (
        "error: base_url 'ftp://127.0.0.1:1/' is not an http:// or https:// URL of an "
        "OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1)"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"population_size": "four"}, "population_size must be a whole number in [2, 256]"),
        (
            {"population_size": 100_000_000},
            "population_size must be a whole number in [2, 256], not 100000000",
        ),
        ({"quantile_fraction": 7}, "quantile_fraction must be a number in [0, 0.5], not 7"),
        (
            {"resample_probability": -1},
            "resample_probability must be a number in [0, 1], not -1",
        ),
        (
            {"mutations": {"learning_rate": [math.nan, 1e-3]}},
            "mutations.learning_rate must be a number in",
        ),
    ],
)
def test_pbt_file_numbers(tmp_path: Path, data: dict[str, object], message: str) -> None:
    path = tmp_path / "pbt.json"
    path.write_text(json.dumps(data))  # json writes NaN as NaN, and reads it back
    with pytest.raises(ConfigError) as caught:
        PBTSpec.load(path)
    assert str(caught.value).startswith(message)
    assert str(caught.value).endswith(f"[{path}]")


def test_a_pbt_file_error_holding_brackets_prints_through_the_cli(tmp_path: Path) -> None:
    # the trial's PBT file error with an absolute path died in the markup printer
    path = tmp_path / "pbt[" / "x].json"  # the path holds "[/x]"
    path.parent.mkdir()
    path.write_text(json.dumps({"population_size": "four"}))
    line = _error(["tune", "pbt", QUEST, "--pbt", str(path), "--run-dir", str(tmp_path / "r")])
    assert line == (
        f"error: population_size must be a whole number in [2, 256], not 'four' [{path}]"
    )


@pytest.mark.parametrize("weight", ["NaN", "Infinity", '"abc"'])
def test_a_scenario_reward_that_is_not_a_finite_number(tmp_path: Path, weight: str) -> None:
    scenario = json.loads(f'{{"reward": {{"variables": {{"score": {{"reward": {weight}}}}}}}}}')
    with pytest.raises(RewardSpecError, match=r"'score'"):
        terms_from_scenario(scenario)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (0.5, 0.5)],
)
def test_check_number_passes_numbers_in_range(value: float, expected: float) -> None:
    assert check_number("x", value, 0, 10) == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "4", True, None, 11, -1])
def test_check_number_refuses_the_rest(value: object) -> None:
    with pytest.raises(BadNumberError, match=r"^x must be a number in \[0, 10\], not "):
        check_number("x", value, 0, 10)
