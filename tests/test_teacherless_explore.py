"""`metabonk bench teacherless --method explore` and `bench learning explore-quest|explore-arena`:
Go-Explore then the backward curriculum within one wall-clock budget a seed, on a real public
game (HatWizard, no game code), scored beside random with the archive's replay; the budget holds
across re-runs; bad learning.yaml keys and bad options give one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

import metabonk_gym  # noqa: F401  (registers the ids)
from metabonk_gym.bench import teacherless as bench
from metabonk_gym.bench.learning_spec import LearningSpec, load_spec
from metabonk_gym.bench.teacherless_explore import explore_settings, robust_settings
from metabonk_gym.errors import MetabonkError
from metabonk_gym.training.backward import check_pixels_only
from metabonk_gym.training.config import resolve_config

runner = CliRunner()

SMALL_SPEC = {
    "metric": "won",
    "state": "level1",
    "episodes": 2,
    "max_steps": 400,
    "target": {"at-least": 0.5},
    "worst": {"at-least": 0.25},
    "rules": ["repeat:2"],
    "explore": {"n_envs": 1, "game_seeds": [0, 3]},
    "explore_share": 0.5,
    "robustify": {
        "every": 20,
        "uniform_share": 0.5,
        "overrides": {"n_envs": 1, "n_steps": 64, "batch_size": 32},
    },
}


@pytest.mark.slow
def test_explore_method_explores_robustifies_scores_and_keeps_its_budget(
    tmp_path: Path, monkeypatch
) -> None:
    data, _ = load_spec("MetaBonk/HatWizard-v0")
    monkeypatch.setattr(
        bench, "load_spec", lambda env_id: (data, LearningSpec.from_mapping(SMALL_SPEC))
    )
    args = ("MetaBonk/HatWizard-v0", tmp_path)
    figures = bench.teacherless(*args, seeds=1, minutes=0.5, method="explore", log=lambda _: None)
    seed = figures["seeds"][0]
    where = tmp_path / "HatWizard"
    assert seed["explore_frames"] > 0 and seed["explore_won"]  # HatWizard's 1-1 falls in seconds
    assert seed["variants"] == 1 and (where / "explore-seed0-g3" / "archive.npz").is_file()
    run_state = json.loads((where / "robust-seed0" / "run.json").read_text())
    assert run_state["explore_also"] == [str((where / "explore-seed0-g3").resolve())]
    assert seed["replay"] == 1.0  # the won path, replayed from the archive's start, wins
    assert seed["env_steps"] > 0 and (where / "robust-seed0" / "model.zip").is_file()
    assert seed["reached_step"] <= seed["demo_steps"]
    assert seed["wall_minutes"] <= 0.5 + 0.3  # the budget (PPO stops at its next step)
    assert figures["worst_target"] == "won >= 0.25" and figures["method"] == "explore"
    assert json.loads((where / "figures-explore.json").read_text())["seeds"] == [seed]
    ladder = json.dumps(json.loads((where / "ladder.json").read_text()))
    assert "robust-seed0" in ladder and "archive.npz" in ladder
    again = bench.teacherless(*args, seeds=1, minutes=0.5, method="explore", log=lambda _: None)
    assert again["seeds"][0]["env_steps"] == seed["env_steps"]  # the budget was spent: no more
    rescored = bench.teacherless(*args, seeds=1, train=False, method="explore", log=print)
    assert rescored["median"] == figures["median"]
    record = bench.figure_records(rescored)[0]
    assert record["id"] == "hatwizard-explore" and "replayed 1.00" in record["text"]
    assert "--method explore" in rescored["command"]


@pytest.mark.parametrize(
    ("section", "given", "message"),
    [
        ("explore", {"seed": 1}, "unknown or set here: \\['seed'\\]"),
        ("explore", {"colour": 1}, "unknown or set here: \\['colour'\\]"),
        ("robustify", {"total_steps": 5}, "the bench sets total_steps"),
        ("robustify", {"stride": 5}, "\\['stride'\\]"),
    ],
)
def test_bad_method_keys_name_the_key(section: str, given: dict, message: str) -> None:
    spec = LearningSpec(**{section: given})  # type: ignore[arg-type]
    make = explore_settings if section == "explore" else robust_settings
    with pytest.raises(MetabonkError, match=message):
        make(spec, 0, 1.0) if section == "explore" else make(spec, 0)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"target": {"at-least": 1}, "worst": {"most": 1}}, "worst must be"),
        ({"target": {"at-least": 1}, "explore_share": 0}, "explore_share"),
        ({"target": {"at-least": 1}, "explore": [1]}, "explore must be a mapping"),
    ],
)
def test_a_bad_method_spec_names_the_problem(spec: dict, message: str) -> None:
    with pytest.raises(MetabonkError, match=message):
        LearningSpec.from_mapping(spec)


@pytest.mark.parametrize(
    ("explore", "robustify", "message"),
    [
        ({"game_seeds": [0, 1]}, {}, "uniform_share"),
        ({"game_seeds": "0"}, {"uniform_share": 1}, "list of ints"),
        ({"game_seeds": []}, {"uniform_share": 1}, "list of ints"),
        ({"repeat_prob": 2.0}, {}, "repeat_prob"),
        ({}, {"threshold": 0}, "threshold"),
    ],
)
def test_method_settings_that_do_not_fit_are_refused_before_anything_runs(
    explore: dict, robustify: dict, message: str
) -> None:
    from metabonk_gym.bench.teacherless_explore import check_spec

    spec = LearningSpec(target={"at-least": 1}, explore=explore, robustify=robustify)
    with pytest.raises(MetabonkError, match=message):
        check_spec(spec)


@pytest.mark.parametrize("game", ["BonkQuest", "BonkArena"])
def test_the_explore_parts_are_declared_as_data(game: str) -> None:
    data, spec = load_spec(f"MetaBonk/{game}-v0")
    assert spec.metric == "won" and spec.state == "start" and spec.rules
    assert explore_settings(spec, 1, 60.0).seed == 1  # every key is an ExploreSettings field
    overrides = robust_settings(spec, 1).overrides
    assert overrides["seed"] == 1
    check_pixels_only(resolve_config(f"MetaBonk/{game}-v0", overrides=overrides))  # pixels only
    assert spec.episodes == {"BonkQuest": 50, "BonkArena": 30}[game]  # the learning figures' seeds


def test_cli_refuses_an_unknown_method_and_a_tiny_budget_in_one_line(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path)]
    result = runner.invoke(
        app, ["bench", "teacherless", "MetaBonk/HatWizard-v0", "--method", "x", *out]
    )
    assert result.exit_code == 2 and "unknown method 'x'" in result.output
    assert not any(tmp_path.iterdir())  # nothing written
    result = runner.invoke(app, ["bench", "learning", "explore-quest", "--minutes", "0", *out])
    assert result.exit_code == 2 and "--minutes" in result.output


def test_a_phase_clock_saves_its_minutes_as_they_pass(tmp_path: Path, monkeypatch) -> None:
    import time

    from metabonk_gym.bench import teacherless_explore as method

    path = tmp_path / "budget-seed0.json"
    path.write_text(json.dumps({"explore_minutes": 2.0, "robust_minutes": 1.0, "explored": {}}))
    clock = method.PhaseClock(path, "robust_minutes")
    clock.tick()  # within SAVE_EVERY_S of the start: nothing written yet
    assert json.loads(path.read_text())["robust_minutes"] == 1.0
    monkeypatch.setattr(method, "SAVE_EVERY_S", 0.0)
    time.sleep(0.05)
    clock.tick()  # a bench killed after this keeps the minutes it had spent
    saved = json.loads(path.read_text())
    assert 1.0 < saved["robust_minutes"] < 1.1 and saved["explore_minutes"] == 2.0
    assert clock.save(env_steps=7)["env_steps"] == 7
