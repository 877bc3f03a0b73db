"""TemporalStrip and the frame predictors (copy, linear, flow, learned), the learned predictor's
training, model files and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from metabonk_gym.wrappers import (
    CopyPredictor,
    FlowPredictor,
    LearnedPredictor,
    LinearPredictor,
    TemporalStrip,
    make_predictor,
    strip_image,
)

from metabonk_gym.errors import WeightsFileError


def _check(env) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env, skip_render_check=True, skip_close_check=True)


def _scene(t: int, velocity: tuple[int, int] = (2, 3)) -> np.ndarray:
    """A textured still background with an 8x8 sprite moving `velocity` pixels per frame."""
    rng = np.random.default_rng(0)
    frame = (rng.integers(0, 4, (48, 64, 1)) * 40 + np.array([10, 20, 30])).astype(np.uint8)
    y, x = 10 + velocity[0] * t, 6 + velocity[1] * t
    frame[y : y + 8, x : x + 8] = (250, 200, 0)
    frame[y + 3, x + 2 : x + 6] = (0, 0, 255)
    return frame


def test_strip_shape_order_and_reset(make_env) -> None:
    env = TemporalStrip(make_env("MetaBonk/BonkQuest-v0", downscale=2), past=3, future=2)
    obs, _ = env.reset(seed=0)
    strip = obs["strip"]
    assert strip.shape == (6, 80, 120, 3) and obs in env.observation_space
    assert all((strip[i] == obs["pixels"]).all() for i in range(6))  # past repeated, copy future
    frames = [obs["pixels"]]
    for action in (4, 4, 4, 2):
        obs, *_ = env.step(action)
        frames.append(obs["pixels"])
    strip = obs["strip"]
    assert (strip[3] == obs["pixels"]).all()  # the present at index `past`
    assert all((strip[i] == frames[-4 + i]).all() for i in range(3))  # oldest first
    obs, _ = env.reset(seed=0)
    assert all((obs["strip"][i] == obs["pixels"]).all() for i in range(4))
    image = env.image(columns=3)
    assert image.ndim == 3 and image.shape[2] == 3
    _check(env)


def test_strip_with_flow_predictor_in_vector_envs() -> None:
    from functools import partial

    import metabonk_gym

    envs = metabonk_gym.make_vec(
        "MetaBonk/BonkQuest-v0",
        2,
        wrappers=[partial(TemporalStrip, past=1, future=2, predictor="flow")],
        downscale=4,
    )
    try:
        obs, _ = envs.reset(seed=0)
        assert obs["strip"].shape == (2, 4, 40, 60, 3)
        obs, *_ = envs.step(np.array([4, 2]))
        assert obs["strip"].shape == (2, 4, 40, 60, 3)
    finally:
        envs.close()


def test_copy_and_linear() -> None:
    copy, linear = CopyPredictor(), LinearPredictor()
    with pytest.raises(RuntimeError, match="update"):
        copy.predict(1)
    for v in (100, 90):
        frame = np.full((4, 4, 3), v, np.uint8)
        copy.update(frame)
        linear.update(frame)
    assert (copy.predict(2) == 90).all()
    assert linear.predict(3)[:, 0, 0, 0].tolist() == [80, 70, 60]


def test_flow_moves_a_sprite_rigidly() -> None:
    flow = FlowPredictor()
    for t in range(6):
        flow.update(_scene(t))
    pred = flow.predict(3)
    for k in range(3):
        real = _scene(6 + k)
        assert (pred[k] == real).mean() > 0.995
        assert (pred[k] == real).mean() > (_scene(5) == real).mean()  # better than copy


def test_flow_leaves_a_still_scene_alone() -> None:
    flow = FlowPredictor()
    for _ in range(3):
        flow.update(_scene(0))
    assert (flow.predict(2) == _scene(0)).all()


def test_learned_predictor_starts_as_copy_and_round_trips(tmp_path) -> None:
    from metabonk_gym.wrappers.predictor_net import TinyPredictor, load_model, save_model

    path = save_model(TinyPredictor(width=4), tmp_path / "p.pt", {"note": 1})
    model = load_model(path)
    learned = LearnedPredictor(model=model)
    for t in range(3):
        learned.update(_scene(t))
    assert (learned.predict(2) == _scene(2)).all()  # zero-initialised output layer
    assert isinstance(make_predictor("learned", path=path), LearnedPredictor)


def test_learned_predictor_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="metabonk train predictor"):
        LearnedPredictor()
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        LearnedPredictor(path=tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(WeightsFileError) as caught:
        LearnedPredictor(path=tmp_path / "junk.pt")
    assert str(caught.value).startswith(
        f"{tmp_path / 'junk.pt'} is not a predictor written by metabonk train predictor ("
    )
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="unknown predictor"):
        make_predictor("magic")


def test_train_predictor_learns_motion(tmp_path) -> None:
    from metabonk_gym.training.predictor import train_predictor

    episodes = [np.stack([_scene(t, (1, 2)) for t in range(14)]) for _ in range(2)]
    result = train_predictor(
        tmp_path / "m.pt",
        env_ids=("Synthetic",),
        frames=episodes,
        validation=episodes[:1],
        iterations=60,
        time_limit_s=60,
        batch_size=4,
        crop=32,
        width=8,
        threads=1,
    )
    assert (tmp_path / "m.pt").is_file() and result["iterations"] >= 1
    assert result["Synthetic_psnr_vs_copy_db"] > 0  # it learned something beyond copying


def test_strip_image_layout() -> None:
    strip = np.zeros((5, 10, 12, 3), np.uint8)
    image = strip_image(strip, past=2, border=1, labels=False)
    assert image.shape == (12, 5 * 14, 3)
    assert tuple(image[0, 2 * 14]) == (60, 220, 60)  # the present is framed green
    assert tuple(image[0, 3 * 14]) == (255, 150, 0)  # predictions orange
