"""A shared Dreamer run directory is data, never code (issue 26, item 5): `train dreamer --resume`
builds sheeprl's config from metabonk's own checked options, so a `_target_` planted in
`DIR/sheeprl/config.yaml` (which hydra would call) or in `DIR/config.yaml` runs nothing, and a
checkpoint whose tensors do not fit the model is one line, exit code 2."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
import yaml
from one_line import one_line_error as _error
from typer.testing import CliRunner

from metabonk_gym.rundir import RunDir
from metabonk_gym.training.config import config_to_yaml
from metabonk_gym.training.errors import RunDirError
from metabonk_gym.worldmodel.dreamer import DREAMER_DEFAULTS, RESUME_KEYS, dreamer_overrides

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


class _Payload:
    """Unpickling this creates the marker folder: proof that code from the directory ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return (os.mkdir, (str(self.marker),))


def _shared_run(folder: Path, marker: Path, dreamer: dict[str, object] | None = None) -> Path:
    """A run directory as someone could share it: metabonk's config.yaml, a checkpoint that
    loads with weights_only=True, and sheeprl's config.yaml with a `_target_` that unpickles
    `payload.bin` from the same directory (the trial's exploit)."""
    import sheeprl  # noqa: F401  (the world extra; missing, the test fails: never a skip)
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    run = RunDir(folder)
    folder.mkdir()
    opts = {**DREAMER_DEFAULTS, "total_steps": 200, **(dreamer or {})}
    run.write_config(config_to_yaml({"env_id": QUEST, "algo": "dreamer_v3", "dreamer": opts}))
    run.write_state(env_id=QUEST, algo="dreamer_v3", status="finished", pid=None)
    checkpoints = folder / "sheeprl" / "checkpoint"
    checkpoints.mkdir(parents=True)
    state: dict[str, object] = {key: {"state": {}, "param_groups": []} for key in RESUME_KEYS}
    for net in ("world_model", "actor", "critic", "target_critic"):  # tensors of another shape
        state[net] = {"encoder.weight": torch.zeros(3, 3)}
    torch.save(state, checkpoints / "ckpt_100_0.ckpt")
    (folder / "sheeprl" / "payload.bin").write_bytes(pickle.dumps(_Payload(marker)))
    safe = {**DREAMER_DEFAULTS, "total_steps": 200}
    with initialize_config_module("sheeprl.configs", version_base="1.3"):
        cfg = compose("config", overrides=dreamer_overrides(QUEST, folder, safe))
    planted = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(planted, dict)
    planted["fabric"]["callbacks"] = [
        {
            "_target_": "torch.load",
            "f": str(folder / "sheeprl" / "payload.bin"),
            "weights_only": False,
        }
    ]
    (folder / "sheeprl" / "config.yaml").write_text(yaml.safe_dump(planted))
    return folder


def test_a_target_in_sheeprls_config_of_a_shared_run_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "payload-ran"
    run = _shared_run(tmp_path / "run", marker)
    args = ["train", "dreamer", QUEST, "--out", str(run), "--resume", "--steps", "300"]
    line = _error(args, progress=True)
    assert not marker.exists(), "the run directory's payload was unpickled"
    assert line.startswith(
        f"error: {run / 'sheeprl' / 'checkpoint' / 'ckpt_100_0.ckpt'} does not fit the model of "
        "this run's config.yaml ("
    )
    assert line.endswith("); start a new run")


@pytest.mark.parametrize(
    ("dreamer", "message"),
    [
        (
            {"env_kwargs": {"x._target_": "torch.load"}},
            "Dreamer env_kwargs key 'x._target_' refused: a name of letters, digits and _ "
            "(no dots, no leading _: hydra would read `_target_` as code to call)",
        ),
        (
            {"env_kwargs": {"_target_": "os.system"}},
            "Dreamer env_kwargs key '_target_' refused",
        ),
        (
            {"env_kwargs": {"obs_type": "{_target_:torch.load,f:payload.bin}"}},
            "Dreamer env_kwargs obs_type='{_target_:torch.load,f:payload.bin}' refused: only "
            "numbers, true/false and plain text",
        ),
        (
            {"accelerator": "{_target_:torch.load,f:payload.bin}"},
            "unknown Dreamer accelerator '{_target_:torch.load,f:payload.bin}'; choose one of "
            "cpu, gpu, cuda, mps, auto",
        ),
        ({"total_steps": "1e9"}, "Dreamer total_steps must be a whole number in 1..10000000000"),
        ({"replay_ratio": float("nan")}, "Dreamer replay_ratio must be a number in (0, 1024]"),
    ],
)
def test_a_run_directorys_config_yaml_reaches_hydra_only_as_checked_data(
    tmp_path: Path, dreamer: dict[str, object], message: str
) -> None:
    with pytest.raises(RunDirError) as caught:
        dreamer_overrides(QUEST, tmp_path, {**DREAMER_DEFAULTS, **dreamer})
    assert str(caught.value).startswith(message)


def test_plain_env_kwargs_still_pass_quoted(tmp_path: Path) -> None:
    overrides = dreamer_overrides(
        QUEST, tmp_path, {"env_kwargs": {"obs_type": "rgb", "max_episode_steps": 60}}
    )
    assert "+env.wrapper.obs_type='rgb'" in overrides
    assert "+env.wrapper.max_episode_steps=60" in overrides


def test_a_planted_config_yaml_is_refused_on_resume_before_sheeprl_runs(tmp_path: Path) -> None:
    marker = tmp_path / "payload-ran"
    run = _shared_run(tmp_path / "run", marker, {"env_kwargs": {"x._target_": "torch.load"}})
    line = _error(["train", "dreamer", QUEST, "--out", str(run), "--resume"])
    # the shared-run check (issue 36) refuses the key before Dreamer's own check sees it
    assert "sets dreamer.env_kwargs.x._target_" in line and "refused" in line
    assert not marker.exists()
    assert not (run / "tensorboard").exists()


def test_a_checkpoint_without_what_resuming_reads_is_one_line(tmp_path: Path) -> None:
    run = _shared_run(tmp_path / "run", tmp_path / "payload-ran")
    checkpoint = run / "sheeprl" / "checkpoint" / "ckpt_100_0.ckpt"
    torch.save({"world_model": {"w": torch.zeros(1)}, "actor": {"w": torch.zeros(1)}}, checkpoint)
    line = _error(["train", "dreamer", QUEST, "--out", str(run), "--resume"])
    assert line == (
        f"error: {checkpoint} is not a DreamerV3 checkpoint of sheeprl (no critic, "
        "target_critic, world_optimizer, actor_optimizer)"
    )


def test_negative_steps_are_refused_before_the_run_directory_exists(tmp_path: Path) -> None:
    import sheeprl  # noqa: F401  (the world extra; missing, the test fails: never a skip)

    out = tmp_path / "run"
    line = _error(["train", "dreamer", QUEST, "--out", str(out), "--steps", "-1"])
    assert line == "error: Dreamer total_steps must be a whole number in 1..10000000000, not -1"
    assert not out.exists()
