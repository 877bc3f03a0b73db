"""`metabonk bench tiles`, `metabonk bench predictors` and the predictor trainer, end to end on
short runs (the figures themselves come from the full benchmark, never from tests)."""

from __future__ import annotations

import json

from metabonk_gym.cli.main import app
from typer.testing import CliRunner

runner = CliRunner()


def test_bench_tiles(tmp_path) -> None:
    out = tmp_path / "tiles.json"
    result = runner.invoke(app, ["bench", "tiles", "--steps", "60", "--out", str(out)])
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert figures["vram_vs_env_step"] > 0 and figures["pixels_vs_env_step"] > 0
    assert figures["steps"] == 40


def test_train_then_bench_predictors(tmp_path) -> None:
    model = tmp_path / "predictor.pt"
    result = runner.invoke(
        app,
        [
            "train-predictor",
            "--out",
            str(model),
            "--env",
            "MetaBonk/BonkQuest-v0",
            "--episodes",
            "1",
            "--steps",
            "12",
            "--iterations",
            "3",
            "--batch-size",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert model.is_file()
    out = tmp_path / "pred.json"
    result = runner.invoke(
        app,
        [
            "bench",
            "predictors",
            "MetaBonk/BonkQuest-v0",
            "--episodes",
            "1",
            "--steps",
            "12",
            "--model",
            str(model),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    for name in ("linear", "flow", "learned"):
        assert f"BonkQuest_{name}_psnr_vs_copy_db_t1" in figures
        assert f"BonkQuest_{name}_cost_vs_env_step" in figures
    assert figures["BonkQuest_best"] in ("linear", "flow", "learned")


def test_train_predictor_is_mounted_under_train() -> None:
    result = runner.invoke(app, ["train", "predictor", "--help"])
    assert result.exit_code == 0 and "--time-limit" in result.output
