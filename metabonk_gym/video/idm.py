"""`train_idm`: an inverse dynamics model from Minari datasets with actions; `Idm` to apply it.

The model (`metabonk_gym.learned.model.IdmNet`) sees frames t-k .. t+k+1 of an episode and predicts
the action taken between frames t and t+1. Frames are converted from each dataset's recording
(obs_type, downscale) to the IDM's with `convert_frames` (full-size RGB recordings convert to
anything). Held-out episodes (never seen in training) give the figures: per-step accuracy, per
action and per button accuracy, a confusion matrix, and accuracy apart on steps where the screen
moved and on steps where the true action was the no-op, so a model that always says no-op shows.
Augmentations: brightness/contrast jitter, pixel noise and a one-pixel shift of the whole window
(what a re-encoded video does to frames). TensorBoard: `idm/loss`, `idm/train_accuracy`,
`idm/val_accuracy`, `idm/val_accuracy_moving` per epoch.

>>> button_accuracy(np.array([1, 3]), np.array([1, 0]), ("noop", "UP", "DOWN", "UP+LEFT"))
{'UP': 0.5, 'DOWN': 1.0, 'LEFT': 0.5}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.errors import ModelFileError
from metabonk_gym.registration import env_traits, short_id
from metabonk_gym.runloop import RunLoop, seed_all
from metabonk_gym.training.datasets import dataset_env_kwargs, load_dataset
from metabonk_gym.training.envs import convert_frames
from metabonk_gym.training.errors import DatasetError
from metabonk_gym.utils import Log
from metabonk_gym.video.boxactions import BoxLayout, layout_of, press_weights
from metabonk_gym.video.envfacts import env_facts
from metabonk_gym.video.frames import Windows

IDM_NAME = "idm"
#: `train_idm`'s learning-rate schedules.
LR_SCHEDULES = ("constant", "cosine")
#: The learning rate of `IdmNet`'s motion weight map over the rest of the net's.
SHIFT_LR_SCALE = 30.0


def button_accuracy(
    predicted: np.ndarray, true: np.ndarray, names: Sequence[str]
) -> dict[str, float]:
    """Per button: the fraction of steps where predicted and true actions agree on pressing it
    (action names are buttons joined by "+")."""
    buttons: list[str] = []
    for name in names:
        for b in name.split("+"):
            if b != "noop" and b not in buttons:
                buttons.append(b)
    sets = [set(n.split("+")) for n in names]
    out = {}
    for b in buttons:
        has = np.array([b in s for s in sets])
        out[b] = float(np.mean(has[predicted] == has[true])) if len(true) else float("nan")
    return out


@dataclass
class IdmData:
    """Frames and actions of episodes for the IDM (see `load_idm_data`).

    Args:
        env_id: the env the episodes were played on.
        obs_type: the IDM's frames: "rgb" or "grayscale".
        downscale: the IDM's frames' downscale factor.
        action_n: actions of the Discrete action space (the Box's size for Box actions).
        episodes: per episode (frames (T+1, H, W, C) uint8, actions (T,) int64, or (T, D)
            float32 for Box actions).
        sources: dataset id per episode.
        layout: the parts of Box actions (`metabonk_gym.video.boxactions`); None: Discrete.
    """

    env_id: str
    obs_type: str
    downscale: int
    action_n: int
    episodes: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    layout: BoxLayout | None = None


def _action_kind(dataset_id: str, env_id: str, space: gym.Space) -> tuple[int, BoxLayout | None]:
    """(outputs, Box layout or None) of a dataset's action space, or a one-line error."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n), None
    parts = env_traits(env_id).action_parts
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and parts:
        try:
            return int(space.shape[0]), layout_of(parts, int(space.shape[0]))
        except ValueError as exc:
            raise DatasetError(f"dataset {dataset_id}: {exc}") from None
    raise DatasetError(
        f"dataset {dataset_id} has actions {space}; the IDM predicts Discrete actions, or Box "
        "actions whose parts (sticks, buttons) the env declares"
    )


def _source_obs(dataset: Any) -> tuple[str, int]:
    kwargs = dataset_env_kwargs(dataset)
    return str(kwargs.get("obs_type", "rgb")), int(kwargs.get("downscale", 1))


def load_idm_data(
    dataset_ids: Sequence[str], obs_type: str | None = None, downscale: int | None = None
) -> IdmData:
    """Episodes of Minari datasets with Discrete actions, frames converted to one obs spec.

    The IDM's obs spec defaults to the first dataset's, or RGB downscale 2 for full-size RGB
    recordings: at downscale 4 a GBA sprite's facing is lost (BonkQuest's held-out accuracy was
    0.77 there, 0.89 at 2, on the same 40 episodes), and in grayscale BonkArena's player looks
    like its enemies (held-out accuracy 0.2 in grayscale, 0.5 in RGB after 11 epochs on the
    same 5 episodes).
    """
    if not dataset_ids:
        raise DatasetError("no dataset given: pass one or more Minari dataset ids with actions")
    data: IdmData | None = None
    for dataset_id in dataset_ids:
        if Path(dataset_id).expanduser().is_dir() and (Path(dataset_id) / "index.json").exists():
            raise DatasetError(
                f"{dataset_id} is a video dataset (frames without actions); the IDM learns from "
                "Minari datasets with actions (`metabonk record ENV --agent scripted --dataset "
                "ID`), then `metabonk label` labels the video dataset"
            )
        dataset = load_dataset(dataset_id)
        env_id = str(dataset_env_kwargs(dataset).get("env_id", ""))
        if not env_id:
            raise DatasetError(f"dataset {dataset_id} does not say which env it was recorded on")
        space = dataset.spec.action_space
        n, layout = _action_kind(dataset_id, env_id, space)
        source = _source_obs(dataset)
        if source[0] == "state":
            raise DatasetError(
                f"dataset {dataset_id} holds state vectors, not frames; record it with "
                "--set obs_type=rgb --set downscale=1"
            )
        if data is None:
            target = (obs_type or source[0], downscale or source[1])
            if obs_type is None and downscale is None and source == ("rgb", 1):
                target = ("rgb", 2)
            data = IdmData(short_id(env_id), target[0], int(target[1]), n, layout=layout)
        elif short_id(env_id) != data.env_id or n != data.action_n or layout != data.layout:
            raise DatasetError(
                f"dataset {dataset_id} is of {short_id(env_id)} with {space}, the first dataset of "
                f"{data.env_id} with {data.action_n} actions; train one IDM per env"
            )
        before = len(data.episodes)
        for episode in dataset.iterate_episodes():
            infos = episode.infos or {}
            if "idm_confidence" in infos:
                raise DatasetError(
                    f"dataset {dataset_id} holds actions inferred by an IDM (`metabonk label`); "
                    "train the IDM on datasets with the true actions"
                )
            actions: np.ndarray
            if layout is None:
                actions = np.asarray(episode.actions, dtype=np.int64).reshape(-1)
            else:
                actions = np.asarray(episode.actions, dtype=np.float32).reshape(-1, n)
            if len(actions) == 0:
                continue
            observations = episode.observations
            if isinstance(observations, dict):  # Dict(pixels, state): the screen
                observations = observations["pixels"]
            frames = convert_frames(
                np.asarray(observations), source, (data.obs_type, data.downscale)
            )
            data.episodes.append((frames, actions))
            data.sources.append(dataset_id)
        if len(data.episodes) == before:
            raise DatasetError(f"dataset {dataset_id} has no steps with actions")
    assert data is not None
    return data


def _augment(batch: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Jitter brightness/contrast, add pixel noise, shift the window by up to one pixel."""
    b = batch.shape[0]
    x = batch.astype(np.float32)
    gain = rng.uniform(0.85, 1.15, (b, 1, 1, 1, 1)).astype(np.float32)
    bias = rng.uniform(-12, 12, (b, 1, 1, 1, 1)).astype(np.float32)
    x = x * gain + bias + rng.normal(0, 3.0, x.shape).astype(np.float32)
    for i in np.flatnonzero(rng.random(b) < 0.3):
        dy, dx = rng.integers(-1, 2, 2)
        x[i] = np.roll(x[i], (int(dy), int(dx)), axis=(1, 2))
    return np.clip(x, 0, 255)


@dataclass
class IdmResult:
    """Where the IDM went and its held-out figures."""

    model_path: Path
    metrics: dict[str, Any]
    train_steps: int
    val_steps: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_path": str(self.model_path),
            "train_steps": self.train_steps,
            "val_steps": self.val_steps,
            **self.metrics,
        }


def _to_torch(batch: np.ndarray) -> Any:
    import torch

    return torch.as_tensor(np.ascontiguousarray(batch.transpose(0, 1, 4, 2, 3)))


def predict_windows(
    net: Any, windows: Windows, batch_size: int = 256, raw: bool = False
) -> np.ndarray:
    """Softmax probabilities (N, n_actions) of every step's window (`raw`: the net's outputs,
    as Box actions need them)."""
    import torch

    out = []
    net.eval()
    with torch.no_grad():
        for start in range(0, len(windows), batch_size):
            rows = np.arange(start, min(start + batch_size, len(windows)))
            logits = net(_to_torch(windows.batch(rows)))
            out.append((logits if raw else torch.softmax(logits, dim=1)).numpy())
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def evaluate_predictions(
    predicted: np.ndarray,
    true: np.ndarray,
    moving: np.ndarray,
    names: Sequence[str],
    noop: int | None,
) -> dict[str, Any]:
    """Accuracy overall, on moving/static steps, on no-op/other true actions; per action and
    button; the confusion matrix (rows true, columns predicted)."""
    n = len(names)

    def acc(mask: np.ndarray) -> float | None:
        return float(np.mean(predicted[mask] == true[mask])) if mask.any() else None

    everything = np.ones(len(true), bool)
    confusion = np.zeros((n, n), np.int64)
    np.add.at(confusion, (true, predicted), 1)
    out: dict[str, Any] = {
        "accuracy": acc(everything),
        "accuracy_moving": acc(moving),
        "accuracy_static": acc(~moving),
        "moving_fraction": float(np.mean(moving)) if len(moving) else None,
        "per_action": {names[a]: acc(true == a) for a in range(n)},
        "per_button": button_accuracy(predicted, true, names),
        "confusion": confusion.tolist(),
    }
    if noop is not None:
        out["accuracy_noop"] = acc(true == noop)
        out["accuracy_not_noop"] = acc(true != noop)
        out["noop_fraction"] = float(np.mean(true == noop)) if len(true) else None
    return out


@dataclass
class IdmSplit:
    """Episodes split by `split_episodes`: training and held-out windows and their actions."""

    train: Windows
    val: Windows
    y: np.ndarray
    yv: np.ndarray | None

    @property
    def val_steps(self) -> int:
        return int(len(self.val)) if self.yv is not None else 0


def split_episodes(
    data: IdmData, window: int, val_fraction: float, rng: np.random.Generator
) -> IdmSplit:
    """Hold out a `val_fraction` of the episodes (at least one when there are two or more)."""
    order = rng.permutation(len(data.episodes))
    n_val = max(1, int(round(len(order) * val_fraction))) if len(order) >= 2 else 0
    n_val = n_val if val_fraction > 0 else 0
    train_w, val_w = Windows(window), Windows(window)
    train_y: list[np.ndarray] = []
    val_y: list[np.ndarray] = []
    for rank, e in enumerate(order):
        frames, actions = data.episodes[e]
        (val_w if rank < n_val else train_w).add(frames)
        (val_y if rank < n_val else train_y).append(actions)
    train_w.build()
    if n_val:
        val_w.build()
    return IdmSplit(
        train_w, val_w, np.concatenate(train_y), np.concatenate(val_y) if n_val else None
    )


def _check_options(window: int, pool: str, lr_schedule: str) -> None:
    from metabonk_gym.learned.model import IdmNet

    if window < 0:
        raise DatasetError(f"--window must be >= 0, not {window}")
    if pool not in IdmNet.POOLS:
        raise DatasetError(f"--pool must be one of {', '.join(IdmNet.POOLS)}, not {pool!r}")
    if lr_schedule not in LR_SCHEDULES:
        raise DatasetError(
            f"--lr-schedule must be one of {', '.join(LR_SCHEDULES)}, not {lr_schedule!r}"
        )


class IdmFit:
    """An `IdmNet` with its optimizer and learning-rate schedule: one epoch at a time, and the
    held-out figures after it.

    Args:
        net: the model.
        split: the windows it learns from and is scored on.
        layout: the parts of Box actions (None: Discrete).
        weights: per button press weights (`press_weights`) or None.
        epochs, batch_size, learning_rate, lr_schedule, augment: `train_idm`'s.
        rng: the data order's and the augmentations' generator.
    """

    def __init__(
        self,
        net: Any,
        split: IdmSplit,
        layout: BoxLayout | None,
        weights: Any,
        *,
        epochs: int,
        batch_size: int,
        learning_rate: float,
        lr_schedule: str,
        augment: bool,
        rng: np.random.Generator,
    ) -> None:
        import torch

        self.net, self.split, self.layout, self.weights = net, split, layout, weights
        self.batch_size, self.augment, self.rng = batch_size, augment, rng
        shift_params = list(net.shift.parameters()) if net.shift is not None else []
        others = [p for p in net.parameters() if all(p is not q for q in shift_params)]
        groups: list[dict[str, Any]] = [{"params": others}]
        if shift_params:  # its weight map learns only through the head: at the net's rate it
            # barely moved in 20 epochs (0.4-0.6 everywhere, the HUD still counting)
            groups.append({"params": shift_params, "lr": learning_rate * SHIFT_LR_SCALE})
        self.optimizer = torch.optim.Adam(groups, lr=learning_rate)
        total = max(1, epochs * -(-len(split.train) // batch_size))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda done: (
                0.5 * (1.0 + math.cos(math.pi * min(done, total) / total))
                if lr_schedule == "cosine"
                else 1.0
            ),
        )

    def epoch(self) -> dict[str, float]:
        """One pass over the training windows in a new order: the mean loss, and for Discrete
        actions the training accuracy."""
        import torch

        self.net.train()
        train, y = self.split.train, self.split.y
        perm = self.rng.permutation(len(train))
        loss_sum, hits, count = 0.0, 0, 0
        for start in range(0, len(perm), self.batch_size):
            rows = perm[start : start + self.batch_size]
            batch = train.batch(rows)
            x = _augment(batch, self.rng) if self.augment else batch.astype(np.float32)
            logits = self.net(_to_torch(x))
            target = torch.as_tensor(y[rows])
            if self.layout is not None:
                loss = self.layout.loss(logits, target, self.weights)
            else:
                loss = torch.nn.functional.cross_entropy(logits, target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            loss_sum += loss.item() * len(rows)
            if self.layout is None:
                hits += int((logits.argmax(1) == target).sum())
            count += len(rows)
        out = {"loss": loss_sum / max(count, 1)}
        if self.layout is None:
            out["train_accuracy"] = hits / max(count, 1)
        return out

    def held_out(self, facts: Any) -> tuple[dict[str, Any], dict[str, float], str]:
        """(figures, TensorBoard scalars, the progress line's part) on the held-out windows."""
        val, yv, layout = self.split.val, self.split.yv, self.layout
        assert yv is not None
        scalars: dict[str, float] = {}
        line = ""
        if layout is not None:
            predicted = layout.decode(predict_windows(self.net, val, raw=True))[0]
            metrics = layout.metrics(predicted, yv)
            for key in ("direction_within_22_5", "button_accuracy"):
                if metrics.get(key) is not None:
                    scalars[f"val_{key}"] = metrics[key]
                    line += f" held-out {key} {metrics[key]:.3f}"
            return metrics, scalars, line
        pred = predict_windows(self.net, val).argmax(1)
        metrics = evaluate_predictions(pred, yv, val.moving(), facts.action_names, facts.noop)
        scalars["val_accuracy"] = metrics["accuracy"]
        if metrics["accuracy_moving"] is not None:
            scalars["val_accuracy_moving"] = metrics["accuracy_moving"]
        return metrics, scalars, f" held-out {metrics['accuracy']:.3f}"


def idm_metadata(
    data: IdmData, facts: Any, split: IdmSplit, options: dict[str, Any], weights: Any
) -> dict[str, Any]:
    """The `idm.json` entries of an IDM trained on `data` with `options` (window, width, pool,
    motion, lr_schedule); `train_idm` adds its datasets, step counts and figures."""
    layout = data.layout
    return {
        "kind": "idm",
        "game": env_traits(data.env_id).game or data.env_id,
        "env_id": data.env_id,
        "obs": {
            "obs_type": data.obs_type,
            "downscale": data.downscale,
            "shape": [int(v) for v in split.train.frames.shape[1:]],
        },
        "frameskip": facts.frameskip,
        "action_space": {"type": "Discrete", "n": data.action_n}
        if layout is None
        else {"type": "Box", "shape": [data.action_n], "parts": layout.to_list()},
        "action_names": list(facts.action_names),
        "noop": facts.noop,
        **options,
        "press_weights": weights,
    }


def train_idm(
    datasets: Sequence[str],
    out: str | Path,
    *,
    window: int = 1,
    epochs: int = 15,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    val_fraction: float = 0.2,
    obs_type: str | None = None,
    downscale: int | None = None,
    width: int = 32,
    augment: bool = True,
    seed: int = 0,
    threads: int = 1,
    log: Log | None = None,
    pool: str = "max",
    lr_schedule: str = "constant",
    balance_buttons: bool = False,
    motion: bool = False,
) -> IdmResult:
    """Train an IDM on `datasets` (Minari ids with actions) into folder `out` (idm.pt, idm.json,
    tensorboard/). `window` is k: each step sees frames t-k .. t+k+1; `pool` is the net's
    (`IdmNet`: "max+mean" also reads motion of the whole screen, a scrolling camera's);
    `lr_schedule` "cosine" decays the learning rate to 0 over the run (at a constant rate the
    held-out Megabonk move figure swung between 0.40 and 0.90 from one epoch to the next, so
    the last epoch's figure was luck); `balance_buttons` weighs each rare button's presses by its
    unpressed/pressed ratio (`press_weights`: else a button pressed on 2% of steps is learned as
    never pressed, 98% accurate); `motion` also reads the screen's sub-pixel scroll between
    frames (`IdmNet`'s `motion`: a following camera's view of the player's movement)."""
    from metabonk_gym.learned.model import IdmNet, save_model_files

    _check_options(window, pool, lr_schedule)
    out = Path(out).expanduser()
    if (out / f"{IDM_NAME}.pt").exists():
        raise ModelFileError(f"{out} already holds an IDM; pick a new --out folder")
    data = load_idm_data(datasets, obs_type, downscale)
    facts = env_facts(data.env_id)
    layout = data.layout
    if layout is None and facts.action_n != data.action_n:
        raise DatasetError(
            f"the datasets have Discrete({data.action_n}) actions, {data.env_id} has "
            f"{facts.action_n}; record them again with this version of the game"
        )
    rng = seed_all(seed, threads)
    split = split_episodes(data, window, val_fraction, rng)
    frame_shape = split.train.frames.shape[1:]
    weights = press_weights(split.y, layout) if layout is not None and balance_buttons else None
    net = IdmNet(
        2 * window + 2,
        int(frame_shape[-1]),
        data.action_n,
        width=width,
        pool=pool,
        motion=motion,
        frame_size=(int(frame_shape[0]), int(frame_shape[1])),
    )
    fit = IdmFit(
        net,
        split,
        layout,
        weights,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        lr_schedule=lr_schedule,
        augment=augment,
        rng=rng,
    )
    out.mkdir(parents=True, exist_ok=True)
    metrics: dict[str, Any] = {}
    loop = RunLoop(total=epochs, tensorboard=out / "tensorboard")
    with loop:
        for epoch in loop.steps():
            scalars: dict[str, float] = fit.epoch()
            line = f"epoch {epoch}/{epochs}: loss {scalars['loss']:.3f}"
            if "train_accuracy" in scalars:
                line += f" train {scalars['train_accuracy']:.3f}"
            if split.yv is not None:
                metrics, held, part = fit.held_out(facts)
                scalars.update(held)
                line += part
            loop.report(epoch, scalars, prefix="idm/")
            if log is not None:
                log(line)
    metrics["train_seconds"] = round(loop.seconds, 2)
    options = {"window": window, "width": width, "pool": pool, "motion": motion}
    meta = idm_metadata(data, facts, split, {**options, "lr_schedule": lr_schedule}, weights)
    meta["datasets"] = list(datasets)
    meta["train_steps"] = int(len(split.train))
    meta["val_steps"] = split.val_steps
    meta["metrics"] = metrics
    path = save_model_files(out / IDM_NAME, net, meta)
    return IdmResult(path, metrics, int(len(split.train)), split.val_steps)


class Idm:
    """A trained IDM loaded from its files (weights only), checked against an env's game.

    Args:
        path: the IDM folder (`train_idm`'s `out`), or its .pt/.json path.
    """

    def __init__(self, path: str | Path) -> None:
        from metabonk_gym.learned.model import IdmNet, load_state, read_metadata

        self.meta = read_metadata(path, IDM_NAME, "idm")
        try:
            self.window = int(self.meta["window"])
            self.obs_type = str(self.meta["obs"]["obs_type"])
            self.downscale = int(self.meta["obs"]["downscale"])
            self.shape = tuple(int(v) for v in self.meta["obs"]["shape"])
            space = self.meta["action_space"]
            self.layout: BoxLayout | None = None
            if space.get("type") == "Box":
                self.action_n = int(space["shape"][0])
                self.layout = layout_of(space["parts"], self.action_n)
            else:
                self.action_n = int(space["n"])
            self.net = IdmNet(
                2 * self.window + 2,
                self.shape[-1],
                self.action_n,
                int(self.meta["width"]),
                pool=str(self.meta.get("pool", "max")),
                motion=bool(self.meta.get("motion", False)),
                frame_size=(self.shape[0], self.shape[1]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelFileError(f"IDM metadata of {path} is incomplete: {exc}") from None
        load_state(path, IDM_NAME, self.net)
        self.net.eval()

    @property
    def game(self) -> str:
        return str(self.meta["game"])

    @property
    def env_id(self) -> str:
        return str(self.meta["env_id"])

    def check_game(self, game: str, env_id: str, what: str) -> None:
        """A clear error when the IDM was made for another game or env."""
        if game != self.game:
            raise ModelFileError(
                f"the IDM was trained on {self.game} ({self.env_id}), {what} is of {game}; "
                f"train an IDM on {game} datasets (`metabonk train idm`)"
            )
        if short_id(env_id) != self.env_id:
            raise ModelFileError(
                f"the IDM was trained on {self.env_id}, {what} is of {short_id(env_id)}"
            )

    def probabilities(self, frames: np.ndarray, source: tuple[str, int] = ("rgb", 1)) -> np.ndarray:
        """(T, n_actions) action probabilities of one episode's frames (T+1, H, W, C)."""
        frames = convert_frames(np.asarray(frames), source, (self.obs_type, self.downscale))
        if tuple(frames.shape[1:]) != self.shape:
            raise ModelFileError(
                f"frames become {tuple(frames.shape[1:])}, the IDM reads {self.shape}"
            )
        windows = Windows(self.window)
        windows.add(frames)
        return predict_windows(self.net, windows.build(), raw=self.layout is not None)

    def action_space(self) -> gym.Space:
        """The action space of the actions it labels."""
        if self.layout is None:
            return gym.spaces.Discrete(self.action_n)
        return gym.spaces.Box(-1.0, 1.0, (self.action_n,), np.float32)

    def predict(
        self, frames: np.ndarray, source: tuple[str, int] = ("rgb", 1)
    ) -> tuple[np.ndarray, np.ndarray]:
        """(actions (T,) int or (T, D) float32, confidence (T,)) of one episode's frames: the
        most likely action and its probability, or for Box actions the decoded action and the
        probability of its least sure button."""
        out = self.probabilities(frames, source)
        if self.layout is not None:
            return self.layout.decode(out)
        actions = out.argmax(axis=1)
        return actions, out[np.arange(len(actions)), actions]
