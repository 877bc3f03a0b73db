"""Model zips load without unpickling anything (issue 12, item 5).

A model zip whose pickled `data` entries would run `os.system("touch MARKER")` when unpickled is
loaded by `metabonk eval`, `play --agent`, `train --init-from` and `--resume`: the marker must
never appear. A zip with a pickled entry the loader does not rebuild is refused with one line
naming `--trust-model`, and loads with it.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import pytest
from metabonk_gym.cli.main import app
from typer.testing import CliRunner

from metabonk_gym.errors import UntrustedFileError
from metabonk_gym.rundir import model_metadata, save_model
from metabonk_gym.training.config import resolve_config
from metabonk_gym.training.envs import probe_env
from metabonk_gym.training.policies import make_ppo
from metabonk_gym.training.safeload import load_policy_params, load_ppo, policy_venv

ENV = "MetaBonk/BonkQuest-v0"
SMALL = {"n_envs": 1, "n_steps": 16, "batch_size": 16, "n_epochs": 1}


class _Touch:
    """Unpickling this runs `touch PATH`: what a hostile model file can do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (f"touch {self.path}",))


def _pickled(obj: Any) -> dict[str, str]:
    return {
        ":type:": "<class 'function'>",
        ":serialized:": base64.b64encode(pickle.dumps(obj)).decode(),
    }


@pytest.fixture(scope="module")
def good_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small metabonk PPO zip, as `train ppo` writes it."""
    cfg = resolve_config(ENV, overrides=SMALL)
    obs, act, _ = probe_env(ENV, cfg)
    venv = policy_venv(obs, act, cfg.frame_stack)
    model = make_ppo(cfg, venv)
    path = tmp_path_factory.mktemp("models") / "model.zip"
    save_model(model, path, model_metadata(ENV, "ppo", cfg.to_dict()))
    venv.close()
    return path


def _rewrite(src: Path, dst: Path, change: dict[str, Any]) -> Path:
    """`src` with entries of its `data` JSON replaced (the other entries byte for byte)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            payload = zin.read(item.filename)
            if item.filename == "data":
                data = json.loads(payload)
                data.update(change)
                payload = json.dumps(data).encode()
            zout.writestr(item, payload)
    return dst


@pytest.fixture()
def evil(good_model: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A model whose every pickled entry runs `touch MARKER`, and the marker's path."""
    marker = tmp_path / "MARKER"
    data = json.loads(zipfile.ZipFile(good_model).read("data"))
    keys = [k for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v]
    assert "lr_schedule" in keys and "observation_space" in keys
    path = _rewrite(good_model, tmp_path / "evil.zip", {k: _pickled(_Touch(marker)) for k in keys})
    return path, marker


def test_the_crafted_zip_really_runs_code_when_unpickled(evil: tuple[Path, Path]) -> None:
    """The test's premise: SB3's plain load of this file runs the command."""
    from stable_baselines3.common.save_util import load_from_zip_file

    path, marker = evil
    load_from_zip_file(path, device="cpu")
    assert marker.exists()


def test_eval_of_a_hostile_zip_runs_nothing(evil: tuple[Path, Path]) -> None:
    path, marker = evil
    result = CliRunner().invoke(
        app, ["eval", ENV, str(path), "--episodes", "1", "--max-steps", "5", "--json"]
    )
    assert not marker.exists()
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["episodes"][0]["length"] == 5


def test_play_with_a_hostile_zip_runs_nothing(evil: tuple[Path, Path]) -> None:
    path, marker = evil
    result = CliRunner().invoke(
        app, ["play", ENV, "--agent", str(path), "--max-steps", "5", "--no-window"]
    )
    assert not marker.exists()
    assert result.exit_code == 0, result.output


def test_init_from_a_hostile_zip_runs_nothing(evil: tuple[Path, Path], tmp_path: Path) -> None:
    path, marker = evil
    params = load_policy_params(path, 6)
    assert "policy" in params and not marker.exists()
    cmd = ["train", "ppo", ENV, "--run-dir", str(tmp_path / "run"), "--init-from", str(path)]
    cmd += ["--total-steps", "16", "--n-envs", "1", "--video-every", "0", "--no-progress"]
    cmd += ["--set", "n_steps=16", "--set", "batch_size=16", "--set", "n_epochs=1"]
    result = CliRunner().invoke(app, cmd)
    assert not marker.exists()
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run" / "model.zip").is_file()


def test_resume_from_a_hostile_checkpoint_runs_nothing(evil: tuple[Path, Path]) -> None:
    path, marker = evil
    cfg = resolve_config(ENV, overrides=SMALL)
    obs, act, _ = probe_env(ENV, cfg)
    venv = policy_venv(obs, act, cfg.frame_stack)
    model = load_ppo(path, venv, cfg)
    venv.close()
    assert not marker.exists()
    assert model.learning_rate == cfg.learning_rate or callable(model.learning_rate)
    assert model.action_space.n == 6


def test_unknown_pickled_entry_is_refused_without_trust(good_model: Path, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    path = _rewrite(good_model, tmp_path / "odd.zip", {"extra_state": _pickled(_Touch(marker))})
    venv = policy_venv(*probe_env(ENV, resolve_config(ENV, overrides=SMALL))[:2], 4)
    with pytest.raises(UntrustedFileError, match="--trust-model"):
        load_ppo(path, venv)
    with pytest.raises(UntrustedFileError):
        load_policy_params(path, 6)
    result = CliRunner().invoke(app, ["eval", ENV, str(path), "--episodes", "1"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--trust-model" in lines[0] and "extra_state" in lines[0]
    assert not marker.exists()


def test_trust_model_loads_a_zip_with_pickled_extras(good_model: Path, tmp_path: Path) -> None:
    path = _rewrite(good_model, tmp_path / "extra.zip", {"extra_state": _pickled(41)})
    result = CliRunner().invoke(
        app,
        ["eval", ENV, str(path), "--episodes", "1", "--max-steps", "3", "--trust-model", "--json"],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["episodes"][0]["length"] == 3


def test_a_model_for_other_spaces_is_refused_clearly(good_model: Path) -> None:
    cfg = resolve_config(ENV, overrides=SMALL)
    obs, act, _ = probe_env(ENV, cfg)
    venv = policy_venv(obs, act, 2)  # another frame stack: other shapes
    with pytest.raises(Exception, match="expects observations of shape"):
        load_ppo(good_model, venv, cfg)
    venv.close()
