"""`AgentSpec.parse`: every form of an agent read once into a typed object, bad ones refused in
one line, and the parsed object accepted wherever the text is."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from metabonk_gym.agents.episode import episode_config
from metabonk_gym.agents.registry import agent_env_overrides, check_agent_spec
from metabonk_gym.agents.spec import AgentSpec
from metabonk_gym.experts.base import AgentError
from metabonk_gym.rundir import model_metadata

QUEST = "MetaBonk/BonkQuest-v0"


def model_zip(folder: Path) -> Path:
    """A metabonk model zip's two entries that are read before any weights."""
    path = folder / "model.zip"
    config = {"obs_type": "grayscale", "downscale": 2, "frame_stack": 4}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", json.dumps({"metabonk": model_metadata(QUEST, "ppo", config)}))
        archive.writestr("policy.pth", b"")
    return path


def test_each_form_is_read_into_its_kind() -> None:
    assert [AgentSpec.parse(t).kind for t in ("random", "scripted", "human", "think")] == [
        "random",
        "scripted",
        "human",
        "think",
    ]
    think = AgentSpec.parse("think:http://127.0.0.1:9")
    assert think.kind == "think" and think.think == {"base_url": "http://127.0.0.1:9"}
    assert AgentSpec.parse("think:first").think == {"engine": "first"}
    assert AgentSpec.parse("repeat:3").action == 3
    oracle = AgentSpec.parse("oracle")
    assert oracle.text == "think:oracle" and str(oracle) == "think:oracle"
    assert not AgentSpec.parse("scripted").acts_on_observations
    assert AgentSpec.parse("random").acts_on_observations


def test_a_model_zip_and_its_run_directory_are_runs(tmp_path: Path) -> None:
    path = model_zip(tmp_path)
    spec = AgentSpec.parse(str(path))
    assert spec.kind == "run" and spec.is_model and not spec.is_dreamer
    assert spec.weights == str(path) and spec.acts_on_observations
    assert spec.describe()["env_id"] == QUEST and spec.describe()["agent"] == str(path)
    assert agent_env_overrides(spec) == agent_env_overrides(str(path))
    assert agent_env_overrides(spec) == {"obs_type": "grayscale", "downscale": 2}
    by_text = episode_config(QUEST, str(path))
    assert episode_config(QUEST, spec) == by_text and by_text.frame_stack == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("missing/model.zip", "model file not found"),
        ("repeat:x", "write repeat:N"),
        ("think:", "names no strategist"),
        ("replay:", "names nothing"),
        ("no-such-agent", "unknown agent 'no-such-agent'"),
    ],
)
def test_bad_specs_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(AgentError, match=message):
        AgentSpec.parse(text)


def test_a_folder_that_is_no_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="not a metabonk run directory"):
        check_agent_spec(str(tmp_path))
