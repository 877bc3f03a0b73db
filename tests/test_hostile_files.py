"""Hostile files on the new surfaces (issue 26, item 5): video datasets, frame folders, IDM and
world-model metadata. Every size a file states is bounded and checked against the data before
anything of that size is allocated or decoded; each case is one line naming the file."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from one_line import one_line_error as _error
from typer.testing import CliRunner

from metabonk_gym.errors import ModelFileError
from metabonk_gym.learned.model import IdmNet, save_model_files
from metabonk_gym.training.errors import VideoDatasetError, VideoError
from metabonk_gym.video.dataset import VideoDataset
from metabonk_gym.video.decode import open_video
from metabonk_gym.video.idm import Idm
from metabonk_gym.worldmodel.files import WorldModelError, load_world_model, save_weights
from metabonk_gym.worldmodel.model import ModelConfig, WorldModel

QUEST = "MetaBonk/BonkQuest-v0"
runner = CliRunner()


# ------------------------------------------------------------------ frame folders
def _png_header(width: int, height: int) -> bytes:
    """A PNG that states `width` x `height` in its header, with one tiny (truncated) IDAT: what
    a decompression bomb looks like before it is decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\0" * 1024)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_a_png_bomb_in_a_frame_folder_is_refused_from_its_header(tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    (frames / "frame_00001.png").write_bytes(_png_header(15900, 10600))
    with pytest.raises(VideoError) as caught:
        open_video(frames)
    assert str(caught.value) == (
        f"{frames / 'frame_00001.png'}: frames of 15900x10600 pixels; at most 16777216 pixels a "
        "frame are read (crop or scale the video down first)"
    )


def test_a_png_bomb_later_in_the_folder_is_refused_too(tmp_path: Path) -> None:
    from PIL import Image

    frames = tmp_path / "frames"
    frames.mkdir()
    Image.new("RGB", (240, 160)).save(frames / "frame_00001.png")
    (frames / "frame_00002.png").write_bytes(_png_header(15900, 10600))
    source = open_video(frames)
    with pytest.raises(VideoError, match="frame_00002.png: frames of 15900x10600 pixels"):
        list(source.reader)


# ------------------------------------------------------------------ video datasets
def _dataset(folder: Path, **index: object) -> Path:
    """A one-video dataset of 2 black 160x240 frames, its index changed by `index`."""
    (folder / "videos").mkdir(parents=True)
    frames = np.zeros((2, 160, 240, 3), np.uint8)
    np.savez_compressed(folder / "videos" / "0000_0000.npz", frames=frames)
    entry = {"source": "x.mp4", "length": 2, "chunks": ["videos/0000_0000.npz"]}
    base = {
        "format": "metabonk-video-dataset",
        "version": 1,
        "env_id": QUEST,
        "game": "BonkQuest",
        "step_rate": 15.0,
        "frameskip": 4,
        "screen": [160, 240],
        "videos": [entry],
    }
    (folder / "index.json").write_text(json.dumps({**base, **index}))
    return folder


def test_a_sound_dataset_reads_back(tmp_path: Path) -> None:
    frames = VideoDataset(_dataset(tmp_path / "ok")).frames(0)
    assert frames.shape == (2, 160, 240, 3) and frames.dtype == np.uint8


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (
            {"screen": [200000, 200000]},
            "screen must be [height, width] of 1..4096 pixels, not [200000, 200000]",
        ),
        ({"screen": "big"}, "screen must be [height, width] of 1..4096 pixels, not 'big'"),
        ({"frameskip": 1e9}, "frameskip must be a whole number in 1..1000, not 1000000000.0"),
        (
            {"videos": [{"length": 10**12, "chunks": []}]},
            "video 0 length must be a whole number in 0..10000000, not 1000000000000",
        ),
        (
            {"videos": [{"length": 2, "chunks": ["../../etc/passwd"]}]},
            "video 0 chunks must be names videos/NAME.npz, not ['../../etc/passwd']",
        ),
    ],
)
def test_an_index_that_sizes_arrays_without_bound_is_refused(
    tmp_path: Path, index: dict[str, object], message: str
) -> None:
    folder = _dataset(tmp_path / "ds", **index)
    line = _error(["label", str(folder), "--idm", str(tmp_path / "idm"), "--out", "me/x-v0"])
    assert line == (
        f"error: {folder / 'index.json'}: {message}; make the dataset again with video to-dataset"
    )


def test_a_deeply_nested_index_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "index.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(VideoDatasetError, match=r"index.json cannot be read \(corrupt\?\)"):
        VideoDataset(folder)


def test_a_non_utf8_index_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "index.json").write_bytes(b'{"format": "\xff\xfe"}')
    with pytest.raises(VideoDatasetError, match=r"index.json cannot be read \(corrupt\?\)"):
        VideoDataset(folder)


def test_a_chunk_whose_header_disagrees_with_the_index_is_never_decompressed(
    tmp_path: Path,
) -> None:
    folder = _dataset(tmp_path / "ds")
    # 4096 frames of 1x1: a header the index's 160x240 screen does not allow
    np.savez_compressed(
        folder / "videos" / "0000_0000.npz", frames=np.zeros((4096, 1, 1, 3), np.uint8)
    )
    with pytest.raises(VideoDatasetError) as caught:
        VideoDataset(folder).frames(0)
    assert str(caught.value) == (
        f"{folder / 'videos' / '0000_0000.npz'} holds frames (4096, 1, 1, 3) uint8; the index "
        "says n x 160 x 240 x 3 uint8: the dataset is corrupt"
    )


# ------------------------------------------------------------------ IDM metadata
def _idm(folder: Path, **meta: object) -> Path:
    net = IdmNet(4, 3, 9, width=8)
    base = {
        "kind": "idm",
        "game": "BonkQuest",
        "env_id": "BonkQuest-v0",
        "obs": {"obs_type": "rgb", "downscale": 2, "shape": [80, 120, 3]},
        "action_space": {"type": "Discrete", "n": 9},
        "window": 1,
        "width": 8,
    }
    save_model_files(folder / "idm", net, {**base, **meta})
    return folder


def test_a_sound_idm_loads(tmp_path: Path) -> None:
    assert Idm(_idm(tmp_path / "idm")).action_n == 9


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"width": 8000}, "width must be a whole number in 2..512, not 8000"),
        ({"window": 100000}, "window must be a whole number in 0..16, not 100000"),
        ({"window": -3}, "window must be a whole number in 0..16, not -3"),
        (
            {"action_space": {"type": "Discrete", "n": 1e12}},
            "action_space.n must be a whole number in 1..4096, not 1000000000000.0",
        ),
        (
            {"obs": {"obs_type": "rgb", "downscale": 2, "shape": [80, 120, 300]}},
            "obs.shape.2 must be a whole number in 1..3, not 300",
        ),
    ],
)
def test_idm_sizes_are_bounded_before_the_net_is_built(
    tmp_path: Path, meta: dict[str, object], message: str
) -> None:
    folder = _idm(tmp_path / "idm", **meta)
    with pytest.raises(ModelFileError) as caught:
        Idm(folder)
    assert str(caught.value) == (
        f"{folder / 'idm.json'}: {message} (the net is built from it before its weights are read)"
    )


def test_a_deeply_nested_idm_json_is_one_line(tmp_path: Path) -> None:
    folder = _idm(tmp_path / "idm")
    (folder / "idm.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ModelFileError, match=r"idm.json cannot be read \(corrupt\?\)"):
        Idm(folder)


# ------------------------------------------------------------------ world-model metadata
def _world_model(folder: Path, **config: object) -> Path:
    cfg = ModelConfig(channels=1, n_actions=9, width=4, action_dim=4, horizon=2)
    model = WorldModel(**cfg.to_dict())
    meta = {
        "game": "BonkQuest",
        "env_id": QUEST,
        "obs_shape": [40, 60, 1],
        "action_space": {"type": "Discrete", "n": 9},
        "config": {**cfg.to_dict(), **config},
    }
    folder.mkdir()
    return save_weights(model.state_dict(), folder / "model.pt", meta)


def test_a_sound_world_model_loads(tmp_path: Path) -> None:
    model, _ = load_world_model(_world_model(tmp_path / "wm"))
    assert model.config.n_actions == 9


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"width": 700}, "config.width must be a whole number in 1..256, not 700"),
        ({"width": -8}, "config.width must be a whole number in 1..256, not -8"),
        ({"horizon": 1e9}, "config.horizon must be a whole number in 1..64, not 1000000000.0"),
        (
            {"action_dim": 10**10},
            "config.action_dim must be a whole number in 1..1024, not 10000000000",
        ),
        ({"depth": 3}, "unknown config key 'depth'; known: channels, n_actions, width"),
    ],
)
def test_world_model_sizes_are_bounded_before_the_model_is_built(
    tmp_path: Path, config: dict[str, object], message: str
) -> None:
    weights = _world_model(tmp_path / "wm", **config)
    with pytest.raises(WorldModelError) as caught:
        load_world_model(weights)
    assert str(caught.value).startswith(f"{weights.with_suffix('.json')}: {message}")


def test_a_world_model_format_that_is_not_a_number_is_one_line(tmp_path: Path) -> None:
    weights = _world_model(tmp_path / "wm")
    meta = json.loads(weights.with_suffix(".json").read_text())
    weights.with_suffix(".json").write_text(json.dumps({**meta, "format": "two"}))
    line = _error(["dream", str(weights), "--no-real"])
    assert (
        line == f"error: {weights.with_suffix('.json')}: format must be a whole number, not 'two'"
    )


def test_world_model_tensors_that_do_not_fit_the_config_are_refused_before_allocating(
    tmp_path: Path,
) -> None:
    # in bounds, but the weights are of another width: checked on the meta device first
    weights = _world_model(tmp_path / "wm", width=200)
    with pytest.raises(WorldModelError) as caught:
        load_world_model(weights)
    assert str(caught.value).startswith(f"{weights} does not match its metadata's model (")
    assert str(caught.value).endswith("the files are not one model's: train again")


def test_dream_refuses_a_bad_world_model_with_one_line(tmp_path: Path) -> None:
    weights = _world_model(tmp_path / "wm", width=700)
    line = _error(["dream", str(weights), "--no-real", "--steps", "5"])
    assert line == (
        f"error: {weights.with_suffix('.json')}: config.width must be a whole number in 1..256, "
        "not 700"
    )


def test_weights_only_checkpoints_stay_weights_only(tmp_path: Path) -> None:
    """The shape check reads the file with weights_only=True like before: a pickled object in
    the weights file is refused, not run."""
    weights = _world_model(tmp_path / "wm")
    torch.save({"model": {"x": torch.zeros(1)}, "evil": object()}, weights)
    with pytest.raises(WorldModelError, match="is corrupt or not a weights file"):
        load_world_model(weights)


def test_a_truncated_mp4_is_refused_not_kept_short(tmp_path: Path) -> None:
    """The trial's half-truncated mp4 became 24 of 60 steps with no warning."""
    import imageio.v2 as imageio

    whole = tmp_path / "clip.mp4"
    writer = imageio.get_writer(
        whole, format="ffmpeg", fps=60, output_params=["-movflags", "+faststart"]
    )  # the index first, as streamed files have it: the first half still decodes
    rng = np.random.default_rng(0)
    for _ in range(60):
        writer.append_data(rng.integers(0, 255, (160, 240, 3), dtype=np.uint8))
    writer.close()
    assert len(list(open_video(whole).reader)) == 60
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(VideoError) as caught:
        list(open_video(cut).reader)
    assert str(caught.value).startswith(f"video {cut} ends after ")
    assert str(caught.value).endswith(
        " of the 60 frames its header states (truncated?); download or record it again"
    )
