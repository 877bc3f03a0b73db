"""`train_dagger`: distil a game's scripted teacher into a policy with DAgger (Ross et al. 2011).

Behavioural cloning of demonstrations compounds its errors over a long game: the clone drifts into
states the teacher never visited and does not know how to leave them. DAgger fixes that: run the
learned policy, label every state it visits with the teacher's action, add those samples to the
data and retrain. Round 0 records the teacher itself with random steps mixed in (DART), later
rounds run the policy. The teacher is the game folder's `Teacher` (an expert that decides only
from what a frame shows, so a pixel policy can match it) or else its `Expert`.

The `imitation` library has DAgger, but cannot be installed beside stable-retro (see
`metabonk_gym.training.bc`), so the loop is written here over SB3's policy API. The result is a PPO
model zip like `train bc`'s: `eval`, `play` and `train ppo --init-from` use it as it is. A run
directory keeps each round's samples (`data/round_NNN.npz`) and the model after each round, so an
interrupted run resumes at the round it stopped in.

>>> DaggerSettings(rounds=2).round_noise
0.05
>>> mix_probability(0.5, 2)
0.125
"""

from __future__ import annotations

import io
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.experts.base import AgentError
from metabonk_gym.rundir import RunDir, model_metadata, save_model
from metabonk_gym.runloop import RunLoop, seed_all
from metabonk_gym.think.games import game_module
from metabonk_gym.training.config import TrainConfig, config_to_yaml, resolve_config
from metabonk_gym.training.envs import make_env
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.training.ppo import TrainResult
from metabonk_gym.training.safeload import SpacesEnv, load_ppo
from metabonk_gym.training.seeds import dagger_seed
from metabonk_gym.training.stacking import FrameStacker, stacked_space
from metabonk_gym.utils import Log, atomic_write_bytes


@dataclass
class DaggerSettings:
    """The DAgger schedule (the policy itself comes from the `TrainConfig`).

    Args:
        teacher_episodes: round 0's teacher episodes (recorded with `noise` random steps).
        rounds: DAgger rounds after round 0, each running the policy and relabelling its states.
        episodes_per_round: policy episodes of each DAgger round.
        noise: share of random actions in teacher episodes (DART: the data shows recoveries).
        round_noise: share of random actions in policy episodes (more varied states).
        beta: the teacher acts instead of the policy with probability `beta * 0.5**round`
            (DAgger's mixture; 0: the policy always acts in rounds >= 1).
        epochs_first: epochs of BC on round 0's data.
        epochs_round: epochs on all the data after each later round.
        batch_size, learning_rate: of the Adam steps on the cross-entropy to the teacher's labels.
        starts: start states of the teacher episodes, cycled (savestate curriculum: every room
            seen from the start of the training); empty: the config's state.
        max_steps: an episode's step limit while collecting (None: the config's).
        position: the info variables [row, col] of the agent's cell on the observation's grid,
            recorded with every sample to train a locator (`EgoCellCNN`); empty: none.
        emphasis: info variables that weigh a sample's loss by the factor while they are
            nonzero (rare states whose decision decides the game, e.g. `{"menu_open": 10}` for a
            level-up menu that is 3% of the samples); weights are recorded with the samples.
    """

    teacher_episodes: int = 60
    rounds: int = 4
    episodes_per_round: int = 30
    noise: float = 0.2
    round_noise: float = 0.05
    beta: float = 0.0
    epochs_first: int = 30
    epochs_round: int = 10
    batch_size: int = 256
    learning_rate: float = 1e-3
    starts: list[str] = field(default_factory=list)
    max_steps: int | None = None
    position: list[str] = field(default_factory=list)
    emphasis: dict[str, float] = field(default_factory=dict)

    def check(self) -> None:
        """`ConfigError` for a setting out of range."""
        if self.teacher_episodes < 1 or self.rounds < 0 or self.episodes_per_round < 1:
            raise ConfigError(
                "DAgger needs teacher_episodes >= 1, rounds >= 0 and episodes_per_round >= 1"
            )
        if self.position and len(self.position) != 2:
            raise ConfigError(f"DAgger position names [row, col] variables, not {self.position}")
        for name in ("noise", "round_noise", "beta"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"DAgger {name} must be in [0, 1], not {value}")
        for name, factor in self.emphasis.items():
            if not 0.0 < float(factor) <= 1000.0:
                raise ConfigError(f"DAgger emphasis of {name} must be in (0, 1000], not {factor}")


def mix_probability(beta: float, round_index: int) -> float:
    """Probability that the teacher acts in DAgger round `round_index` (>= 1): beta halves a round."""
    return beta * 0.5**round_index


def extends(saved: DaggerSettings, wanted: DaggerSettings) -> bool:
    """Whether `wanted` is `saved` with more rounds: a finished or stopped run then goes on
    with the extra rounds (every other setting must match, or the run keeps its own).

    >>> extends(DaggerSettings(rounds=2), DaggerSettings(rounds=5))
    True
    >>> extends(DaggerSettings(rounds=2), DaggerSettings(rounds=5, noise=0.5))
    False
    """
    return wanted.rounds > saved.rounds and asdict(wanted) == {
        **asdict(saved),
        "rounds": wanted.rounds,
    }


def teacher_class(env: gym.Env) -> type:
    """The game folder's `Teacher` (decides from what the observation shows), else its `Expert`."""
    module = game_module(env)
    cls = getattr(module, "Teacher", None) or getattr(module, "Expert", None)
    if cls is None:
        raise AgentError(
            "DAgger needs a teacher: the env's game folder has no game.py with a Teacher or "
            "Expert class (see docs/new-game.md, 'game.py')"
        )
    return cls  # type: ignore[no-any-return]


@dataclass
class Episode:
    """One collected episode: its samples (stacked observations, teacher labels, the agent's
    cell when `position` was given, else -1) and outcome."""

    obs: np.ndarray
    labels: np.ndarray
    won: bool
    length: int
    variables: dict[str, float]
    cells: np.ndarray | None = None
    weights: np.ndarray | None = None


def sample_weight(info: Mapping[str, Any], emphasis: Mapping[str, float]) -> float:
    """The loss weight of a sample whose info is `info`: the product of the `emphasis` factors
    of the variables that are nonzero (1.0 when none is, or the env does not report it).

    >>> sample_weight({"menu_open": 1, "hp": 3}, {"menu_open": 10.0}), sample_weight({}, {"menu_open": 10.0})
    (10.0, 1.0)
    """
    weight = 1.0
    for name, factor in emphasis.items():
        value = info.get(name)
        if isinstance(value, (int, float, np.integer, np.floating)) and value != 0:
            weight *= float(factor)
    return weight


class PolicyActor:
    """Greedy actions of an SB3 policy on one env's stacked observation (no SB3 vec env).

    Args:
        model: the SB3 PPO model whose policy acts.
        space: the stacked observation space the policy was built for (channels last).
    """

    def __init__(self, model: Any, space: gym.Space) -> None:
        self.policy = model.policy
        self.channel_first = model.observation_space.shape != space.shape

    def batch(self, obs: np.ndarray) -> Any:
        import torch

        if self.channel_first:
            obs = np.transpose(obs, (0, 3, 1, 2))
        return torch.as_tensor(obs, device=self.policy.device)

    def logits(self, obs: np.ndarray) -> Any:
        dist = self.policy.get_distribution(self.batch(obs))
        return dist.distribution.logits

    def __call__(self, stacked: np.ndarray) -> int:
        import torch

        with torch.no_grad():
            return int(self.logits(stacked[None]).argmax(dim=1)[0])


def collect(
    env: gym.Env,
    teacher: Any,
    frame_stack: int,
    *,
    episodes: int,
    seed: int,
    noise: float,
    actor: Callable[[np.ndarray], int] | None = None,
    mix: float = 0.0,
    starts: Sequence[str] = (),
    max_steps: int | None = None,
    on_episode: Callable[[Episode], None] | None = None,
    position: Sequence[str] = (),
    emphasis: Mapping[str, float] | None = None,
) -> list[Episode]:
    """Play `episodes` episodes (reset seeds `seed + i`), labelling each state with the teacher's
    action. The teacher acts when `actor` is None (or with probability `mix`), else the actor;
    then `noise` replaces the action by a random one. Episode i starts in `starts[i % len]`.
    `position` names the info variables (row, col) of the agent's cell, kept per sample;
    `emphasis` weighs samples (`sample_weight`), kept per sample."""
    rng = np.random.default_rng(seed)
    n_actions = int(env.action_space.n)  # type: ignore[attr-defined]
    executed = getattr(teacher, "executed", None)
    out: list[Episode] = []
    for i in range(episodes):
        options = {"state": starts[i % len(starts)]} if starts else None
        obs, info = env.reset(seed=seed + i, options=options)
        teacher.reset(obs, info)
        stacker = FrameStacker(frame_stack)
        stacked = stacker.reset(np.asarray(obs))
        xs: list[np.ndarray] = []
        ys: list[int] = []
        cells: list[int] = []
        weights: list[float] = []
        steps = 0
        while True:
            label = int(teacher.act(obs, info))
            xs.append(stacked.copy())
            ys.append(label)
            if position:
                cells.append(grid_cell(info, position, np.shape(obs)))
            if emphasis:
                weights.append(sample_weight(info, emphasis))
            action = label if actor is None or rng.random() < mix else actor(stacked)
            if noise > 0.0 and rng.random() < noise:
                action = int(rng.integers(n_actions))
            if callable(executed):
                executed(action)  # the next new-press test compares with what the game got
            obs, _, terminated, truncated, info = env.step(action)
            stacked = stacker.add(np.asarray(obs))
            steps += 1
            if terminated or truncated or (max_steps is not None and steps >= max_steps):
                break
        variables = {
            k: float(v)
            for k, v in info.items()
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        }
        episode = Episode(
            obs=np.stack(xs),
            labels=np.asarray(ys, dtype=np.int64),
            won=bool(info.get("won", False)),
            length=steps,
            variables=variables,
            cells=np.asarray(cells, dtype=np.int64) if position else None,
            weights=np.asarray(weights, dtype=np.float32) if emphasis else None,
        )
        out.append(episode)
        if on_episode is not None:
            on_episode(episode)
    return out


def grid_cell(info: Mapping[str, Any], position: Sequence[str], shape: Sequence[int]) -> int:
    """The row-major index of the cell `info[position[0]], info[position[1]]` on an observation
    grid of `shape` (rows, cols, ...), or -1 when the env does not report it or it is off the grid.

    >>> grid_cell({"y": 2, "x": 3}, ["y", "x"], (20, 30, 2)), grid_cell({"y": 25, "x": 3}, ["y", "x"], (20, 30))
    (63, -1)
    """
    rows, cols = int(shape[0]), int(shape[1])
    try:
        row, col = int(info[position[0]]), int(info[position[1]])
    except (KeyError, TypeError, ValueError):
        return -1
    return row * cols + col if 0 <= row < rows and 0 <= col < cols else -1


def fit(
    model: Any,
    space: gym.Space,
    x: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    max_grad_norm: float = 0.5,
    cells: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> dict[str, float]:
    """Cross-entropy of the policy's action distribution to the labels, `epochs` passes of Adam;
    returns the last epoch's loss and the accuracy on the training and held-out (5%) samples.
    With `cells` (the agent's cell per sample, -1 unknown), a locator-bearing extractor
    (`EgoCellCNN`) also learns to find the agent (`locator_loss`, added to the loss). With
    `weights` (per sample), each sample's cross-entropy counts by its weight."""
    import torch

    from metabonk_gym.training.egocells import EgoCellCNN, locator_loss

    actor = PolicyActor(model, space)
    policy = model.policy
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    n_val = len(x) // 20 if len(x) >= 200 else 0
    val, train = order[:n_val], order[n_val:]
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    extractor = policy.features_extractor
    locate = cells is not None and isinstance(extractor, EgoCellCNN)
    loss_sum, batches = 0.0, 0
    policy.set_training_mode(True)
    for _ in range(epochs):
        rng.shuffle(train)
        loss_sum, batches = 0.0, 0
        for start in range(0, len(train), batch_size):
            idx = train[start : start + batch_size]
            logits = actor.logits(x[idx])
            target = torch.as_tensor(y[idx], device=policy.device)
            if weights is None:
                loss = torch.nn.functional.cross_entropy(logits, target)
            else:
                weight = torch.as_tensor(weights[idx], device=policy.device)
                each = torch.nn.functional.cross_entropy(logits, target, reduction="none")
                loss = (each * weight).sum() / weight.sum()
            if locate:
                known = cells[idx] >= 0  # type: ignore[index]
                if known.any():
                    where = torch.as_tensor(cells[idx][known], device=policy.device)  # type: ignore[index]
                    loss = loss + locator_loss(extractor, actor.batch(x[idx][known]), where)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
            optimizer.step()
            loss_sum += float(loss.item())
            batches += 1
    policy.set_training_mode(False)

    def accuracy(indices: np.ndarray) -> float:
        if len(indices) == 0:
            return float("nan")
        hits = 0
        with torch.no_grad():
            for start in range(0, len(indices), 1024):
                idx = indices[start : start + 1024]
                pred = actor.logits(x[idx]).argmax(dim=1).cpu().numpy()
                hits += int((pred == y[idx]).sum())
        return hits / len(indices)

    return {
        "loss": loss_sum / max(batches, 1),
        "accuracy": accuracy(train[:20_000]),
        "val_accuracy": accuracy(val),
    }


def _episode_cells(episode: Episode) -> np.ndarray:
    if episode.cells is None:
        return np.full(len(episode.labels), -1, dtype=np.int64)
    return episode.cells


def _episode_weights(episode: Episode) -> np.ndarray:
    if episode.weights is None:
        return np.ones(len(episode.labels), dtype=np.float32)
    return episode.weights


def _save_round(path: Path, episodes: Sequence[Episode]) -> None:
    buffer = io.BytesIO()
    np.savez(
        buffer,
        obs=np.concatenate([e.obs for e in episodes]),
        labels=np.concatenate([e.labels for e in episodes]),
        cells=np.concatenate([_episode_cells(e) for e in episodes]),
        weights=np.concatenate([_episode_weights(e) for e in episodes]),
    )
    atomic_write_bytes(path, buffer.getvalue())


@dataclass
class RoundData:
    """Every round's samples so far: observations, labels, agent cells and weights."""

    xs: list[np.ndarray] = field(default_factory=list)
    ys: list[np.ndarray] = field(default_factory=list)
    cs: list[np.ndarray] = field(default_factory=list)
    ws: list[np.ndarray] = field(default_factory=list)

    @classmethod
    def load(cls, folder: Path, upto: int) -> RoundData:
        """The samples of rounds 0 .. upto-1 saved in `folder` (`_save_round`)."""
        data = cls()
        for k in range(upto):
            with np.load(folder / f"round_{k:03d}.npz", allow_pickle=False) as saved:
                labels = saved["labels"]
                cells = saved["cells"] if "cells" in saved.files else None
                weights = saved["weights"] if "weights" in saved.files else None
                data.xs.append(saved["obs"])
                data.ys.append(labels)
                data.cs.append(
                    cells if cells is not None else np.full(len(labels), -1, dtype=np.int64)
                )
                data.ws.append(
                    weights if weights is not None else np.ones(len(labels), dtype=np.float32)
                )
        return data

    def add(self, episodes: Sequence[Episode]) -> None:
        self.xs.append(np.concatenate([e.obs for e in episodes]))
        self.ys.append(np.concatenate([e.labels for e in episodes]))
        self.cs.append(np.concatenate([_episode_cells(e) for e in episodes]))
        self.ws.append(np.concatenate([_episode_weights(e) for e in episodes]))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (
            np.concatenate(self.xs),
            np.concatenate(self.ys),
            np.concatenate(self.cs),
            np.concatenate(self.ws),
        )


@dataclass
class DaggerRun:
    """Where a DAgger run stands (`open_dagger_run`): its config, settings and progress."""

    cfg: TrainConfig
    settings: DaggerSettings
    resumed: bool
    done: int = 0
    env_steps: int = 0
    wall: float = 0.0


def open_dagger_run(
    env_id: str,
    run: RunDir,
    settings: DaggerSettings | None,
    config_file: str | Path | None,
    overrides: Mapping[str, Any] | None,
    log: Log,
) -> DaggerRun:
    """A new run's config and settings, or a DAgger run's own to resume after its last round
    (`settings` with more rounds and otherwise the same extend it)."""
    if not run.is_run():
        cfg = resolve_config(env_id, config_file, overrides)
        return DaggerRun(cfg, settings or DaggerSettings(), resumed=False)
    state = run.read_state()
    if state.get("algo") != "dagger":
        raise ConfigError(f"{run.path} holds a {state.get('algo')} run, not a DAgger run")
    cfg = TrainConfig.from_dict(run.read_config(), source=str(run.config_file))
    saved = DaggerSettings(**state["dagger"])
    if settings is not None and extends(saved, settings):
        log(f"dagger: extending {run.path} from {saved.rounds} to {settings.rounds} rounds")
        run.write_state(status="running", dagger=asdict(settings))
    else:
        settings = saved
    return DaggerRun(
        cfg,
        settings,
        resumed=True,
        done=int(state.get("rounds_done", 0)),
        env_steps=int(state.get("env_steps", 0)),
        wall=float(state.get("wall_s", 0.0)),
    )


def collect_round(
    env: gym.Env, teacher: Any, cfg: TrainConfig, settings: DaggerSettings, k: int, actor: Any
) -> list[Episode]:
    """Round `k`'s episodes: the teacher's with DART noise in round 0, else the policy's
    (`actor`) with the teacher mixed in, every state labelled by the teacher."""
    common: dict[str, Any] = {
        "max_steps": settings.max_steps,
        "position": settings.position,
        "emphasis": settings.emphasis,
    }
    if k == 0:
        return collect(
            env,
            teacher,
            cfg.frame_stack,
            episodes=settings.teacher_episodes,
            seed=dagger_seed(cfg.seed, 0),
            noise=settings.noise,
            starts=settings.starts,
            **common,
        )
    actor.policy.set_training_mode(False)
    return collect(
        env,
        teacher,
        cfg.frame_stack,
        episodes=settings.episodes_per_round,
        seed=dagger_seed(cfg.seed, k),
        noise=settings.round_noise,
        actor=actor,
        mix=mix_probability(settings.beta, k),
        **common,
    )


def _round_line(k: int, total: int, stats: Mapping[str, Any], episodes: int, at: DaggerRun) -> str:
    return (
        f"dagger round {k}/{total - 1} ({stats['who']}): {episodes} episodes, "
        f"win rate {stats['win_rate']:.2f}, mean length {stats['mean_length']:.0f}, "
        f"{stats['samples']} samples, loss {stats['loss']:.3f}, val acc {stats['val_accuracy']:.3f}, "
        f"{at.env_steps} env steps, {at.wall:.0f} s"
    )


def _policy_model(run: RunDir, venv: Any, cfg: TrainConfig, done: int) -> Any:
    """The run's PPO model after `done` rounds (its model.zip), or a new one."""
    from metabonk_gym.training.policies import make_ppo

    if done > 0:
        return load_ppo(run.model, venv, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PPO's rollout-size hints do not apply here
        return make_ppo(cfg, venv)


def train_dagger(
    env_id: str,
    run_dir: str | Path,
    *,
    settings: DaggerSettings | None = None,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    log: Log = print,
) -> TrainResult:
    """Distil the env's teacher into the config's policy: BC on the teacher's episodes, then
    `settings.rounds` DAgger rounds; saves `run_dir/model.zip` after every round.

    A run directory that already holds a DAgger run resumes after its last finished round (its
    own config and settings; `settings` with more rounds and otherwise the same extend it); the
    progress lines say what each round collected and reached. Ctrl-C marks the run interrupted
    (it resumes after its last finished round).
    """
    from stable_baselines3.common.vec_env import DummyVecEnv

    run = RunDir(Path(run_dir))
    at = open_dagger_run(env_id, run, settings, config_file, overrides, log)
    cfg, settings = at.cfg, at.settings
    settings.check()
    seed_all(cfg.seed, cfg.torch_threads)
    env = make_env(env_id, cfg)
    try:
        space = stacked_space(env.observation_space, cfg.frame_stack)  # type: ignore[arg-type]
        teacher = teacher_class(env)(env, seed=cfg.seed)
        venv = DummyVecEnv([lambda: SpacesEnv(space, env.action_space)])
        model = _policy_model(run, venv, cfg, at.done)
        if not at.resumed:
            run.path.mkdir(parents=True, exist_ok=True)
            run.write_config(config_to_yaml(cfg))
            run.write_state(env_id=env_id, algo="dagger", status="running", dagger=asdict(settings))
        folder = run.path / "data"
        folder.mkdir(exist_ok=True)
        data = RoundData.load(folder, at.done)
        actor = PolicyActor(model, space)
        total = settings.rounds + 1
        stats: dict[str, Any] = {}
        loop = RunLoop(
            total=total,
            start=at.done,
            on_interrupt=lambda _k: run.write_state(status="interrupted"),
        )
        with loop:
            for rounds in loop.steps():
                k = rounds - 1
                started = time.monotonic()
                episodes = collect_round(env, teacher, cfg, settings, k, actor)
                _save_round(folder / f"round_{k:03d}.npz", episodes)
                data.add(episodes)
                x, y, c, w = data.arrays()
                fitted = fit(
                    model,
                    space,
                    x,
                    y,
                    epochs=settings.epochs_first if k == 0 else settings.epochs_round,
                    batch_size=settings.batch_size,
                    learning_rate=settings.learning_rate,
                    seed=cfg.seed + k,
                    cells=c if settings.position else None,
                    weights=w if settings.emphasis else None,
                )
                at.env_steps += sum(e.length for e in episodes)
                at.wall += time.monotonic() - started
                stats = {
                    **fitted,
                    "round": k,
                    "who": "teacher" if k == 0 else "policy",
                    "win_rate": float(np.mean([e.won for e in episodes])),
                    "mean_length": float(np.mean([e.length for e in episodes])),
                    "samples": int(len(x)),
                }
                save_model(
                    model, run.model, model_metadata(env_id, "dagger", cfg.to_dict(), **stats)
                )
                run.write_state(
                    rounds_done=rounds, env_steps=at.env_steps, wall_s=round(at.wall, 1), **stats
                )
                log(_round_line(k, total, stats, len(episodes), at))
            run.write_state(status="finished")
        venv.close()
    finally:
        env.close()
    return TrainResult(
        run_dir=run.path,
        model_path=run.model,
        num_timesteps=at.env_steps,
        win_rate=stats.get("win_rate"),
        extra={"wall_s": round(at.wall, 1), **stats},
    )
