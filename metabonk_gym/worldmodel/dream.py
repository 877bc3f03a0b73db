"""`metabonk dream`: what a world model imagines from a start state under a plan or a policy.

The env the model was trained on is made from its metadata and reset (seed, optional start
state); from its first frame the model imagines `steps` frames, `horizon` at a time, feeding its
own frames back. The same actions are played in the real env beside it (the emulators are
deterministic), so the video shows real | imagined | uncertainty side by side, with the PSNR of
each imagined frame against the real one. A plan is text: `ACTION*N` items separated by commas,
an action being its index or its buttons (`RIGHT`, `RIGHT+A`, `NOOP`).

>>> parse_plan("2*3,0,1*2", n_actions=4)
[2, 2, 2, 0, 1, 1]
>>> side_by_side([np.zeros((4, 6, 1), np.uint8)] * 2, scale=2).shape
(8, 26, 3)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from metabonk_gym.training.errors import CheckpointError
from metabonk_gym.training.predictor import sticky_actions
from metabonk_gym.training.safeload import load_ppo, model_train_config, policy_venv
from metabonk_gym.training.video import write_mp4
from metabonk_gym.utils import Log, check_number
from metabonk_gym.worldmodel.files import WorldModelError, load_world_model
from metabonk_gym.worldmodel.model import CONTEXT, imagine


def model_policy(
    path: str | Path, frame_shape: Sequence[int], n_actions: int, *, trust: bool = False
) -> Callable[[np.ndarray], int]:
    """A model zip of `train ppo`/`train bc` as `dream`'s frame -> action policy (greedy).

    The model must have been trained on the world model's frames (same obs type and downscale);
    its frame stack is filled with the frames it is shown (one per imagined chunk, the first
    repeated), and it is loaded without unpickling unless `trust`.
    """
    path = Path(path).expanduser()
    cfg = model_train_config(path)
    space = gym.spaces.Box(0, 255, tuple(int(d) for d in frame_shape), np.uint8)
    venv = policy_venv(space, gym.spaces.Discrete(n_actions), cfg.frame_stack)
    try:
        model = load_ppo(path, venv, cfg, trust=trust)
    except CheckpointError as exc:
        raise WorldModelError(f"{exc} (the world model's frames are {tuple(space.shape)})") from exc
    finally:
        venv.close()
    stack: deque[np.ndarray] = deque(maxlen=max(1, cfg.frame_stack))

    def policy(frame: np.ndarray) -> int:
        frame = np.asarray(frame, np.uint8).reshape(space.shape)
        while len(stack) < stack.maxlen - 1:  # type: ignore[operator]
            stack.append(frame)
        stack.append(frame)
        action, _ = model.predict(np.concatenate(list(stack), axis=-1), deterministic=True)
        return int(np.asarray(action).reshape(-1)[0])

    return policy


def _button_actions(env: Any) -> list[set[str]] | None:
    combos = getattr(getattr(env.unwrapped, "integration", None), "discrete_actions", None)
    return None if combos is None else [set(c) for c in combos]


#: Most frames one `dream` imagines (each is kept, with its real twin, for the figures and video).
MAX_DREAM_STEPS = 10_000


def parse_plan(text: str, n_actions: int, env: Any = None) -> list[int]:
    """Actions of a plan text (`ACTION*N,...`; buttons need `env` to name its actions)."""
    out: list[int] = []
    combos = _button_actions(env) if env is not None else None
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, count = item.partition("*")
        try:
            repeat = int(count) if count else 1
        except ValueError:
            raise WorldModelError(
                f"plan item {item!r}: the count after * must be a number"
            ) from None
        if not 1 <= repeat <= MAX_DREAM_STEPS - len(out):
            raise WorldModelError(
                f"plan item {item!r}: a plan holds 1..{MAX_DREAM_STEPS} actions in all "
                "(a count of at least 1 each)"
            )
        name = name.strip()
        if name.lstrip("-").isdigit():
            action = int(name)
        elif combos is not None:
            buttons = set() if name.upper() == "NOOP" else set(name.upper().split("+"))
            if buttons not in combos:
                shown = ", ".join("+".join(sorted(c)) or "NOOP" for c in combos)
                raise WorldModelError(
                    f"plan item {item!r}: no action presses {name}; actions: {shown}"
                )
            action = combos.index(buttons)
        else:
            raise WorldModelError(f"plan item {item!r}: name actions by index 0..{n_actions - 1}")
        if not 0 <= action < n_actions:
            raise WorldModelError(
                f"plan item {item!r}: action {action} is outside 0..{n_actions - 1}"
            )
        out.extend([action] * repeat)
    if not out:
        raise WorldModelError("the plan is empty; e.g. --plan 'RIGHT*10,UP*5' or --plan '3*10'")
    return out


def side_by_side(frames: Sequence[np.ndarray], scale: int = 1, gap: int = 2) -> np.ndarray:
    """Frames (H, W, C) next to each other, RGB, each scaled `scale` times, `gap` pixels apart."""
    tiles = []
    for frame in frames:
        f = np.asarray(frame)
        f = f[..., None] if f.ndim == 2 else f
        f = np.repeat(f, 3, axis=-1) if f.shape[-1] == 1 else f
        tiles.append(f.repeat(scale, axis=0).repeat(scale, axis=1))
        tiles.append(np.full((tiles[-1].shape[0], gap, 3), 40, np.uint8))
    return np.concatenate(tiles[:-1], axis=1).astype(np.uint8)


def _sticky_box(space: Any, rng: np.random.Generator, steps: int) -> list[np.ndarray]:
    """`steps` random Box actions, each held 2-9 steps (as a player holds a stick)."""
    out: list[np.ndarray] = []
    while len(out) < steps:
        action = rng.uniform(space.low, space.high).astype(np.float32)
        out.extend([action] * int(rng.integers(2, 10)))
    return out[:steps]


def _frame(obs: Any) -> np.ndarray:
    """An env observation's screen as (H, W, C)."""
    frame = np.asarray(obs["pixels"] if isinstance(obs, dict) else obs)
    return frame[..., None] if frame.ndim == 2 else frame


def _dream_plan(
    plan: Sequence[Any] | str | None, n: int, box: bool, env: Any, seed: int, steps: int
) -> Sequence[Any]:
    """The actions to dream under: plan text parsed, a plan as it is, or without one the sticky
    random actions of the training rollouts (Box actions for a Box model)."""
    if isinstance(plan, str):
        return parse_plan(plan, n, env)
    if plan is not None:
        return plan
    if box:
        return _sticky_box(env.action_space, np.random.default_rng(seed), steps)
    return sticky_actions(np.random.default_rng(seed), n, steps).tolist()


Chooser = Callable[[list[np.ndarray], int, int], list[Any]]


def _chooser(
    policy: Callable[[np.ndarray], int] | None, planned: Sequence[Any] | None, box: bool
) -> Chooser:
    """A chunk's actions from (frames so far, actions done, count): the policy's action on the
    newest frame, held; else the plan's next ones, its last held."""
    if policy is not None:
        chosen = policy
        return lambda frames, _done, k: [int(chosen(frames[-1]))] * k
    assert planned is not None
    plan = planned

    def act(_frames: list[np.ndarray], done: int, k: int) -> list[Any]:
        picked = (plan[min(done + i, len(plan) - 1)] for i in range(k))
        return [np.asarray(a, np.float32) if box else int(a) for a in picked]

    return act


def _imagine_steps(
    model: Any,
    first: np.ndarray,
    steps: int,
    act: Chooser,
    log: Log | None,
) -> tuple[list[np.ndarray], list[np.ndarray], list[Any]]:
    """(imagined frames, their uncertainty, the actions): `steps` frames from `first`, the
    model's horizon at a time, each chunk's actions from `act(frames, done, count)`."""
    horizon = max(1, model.config.horizon)
    frames = [first] * CONTEXT
    imagined: list[np.ndarray] = []
    spreads: list[np.ndarray] = []
    actions: list[Any] = []
    while len(imagined) < steps:
        k = min(horizon, steps - len(imagined))
        chunk = act(frames, len(actions), k)
        pred, std = imagine(model, np.stack(frames[-CONTEXT:]), chunk)
        for i in range(k):
            imagined.append(pred[i].numpy())
            spreads.append(std[i].numpy())
        frames.extend(imagined[-k:])
        actions.extend(chunk)
        if log is not None and len(imagined) // 1000 > (len(imagined) - k) // 1000:
            log(f"imagined {len(imagined)}/{steps} frames")
    return imagined, spreads, actions


def _play(env: Any, actions: Sequence[Any]) -> list[np.ndarray]:
    """The real env's frames under `actions` (up to the episode's end)."""
    truth: list[np.ndarray] = []
    for action in actions:
        obs, _, terminated, truncated, _ = env.step(action)
        truth.append(_frame(obs))
        if terminated or truncated:
            break
    return truth


def _write_dream(
    video: Path,
    first: np.ndarray,
    imagined: Sequence[np.ndarray],
    spreads: Sequence[np.ndarray],
    truth: Sequence[np.ndarray] | None,
    fps: float,
) -> None:
    """The mp4 of (real |) imagined | uncertainty, scaled to at least 160 pixels high."""
    scale = max(1, -(-160 // first.shape[0]))
    blank = np.zeros_like(first)
    composite = []
    for i, frame in enumerate(imagined):
        spread = np.clip(spreads[i] * 4, 0, 255).astype(np.uint8)[..., None]
        if truth is not None:
            shown = [truth[i] if i < len(truth) else blank, frame, spread]
        else:
            shown = [frame, spread]
        tile = side_by_side(shown, scale)
        pad_h, pad_w = -tile.shape[0] % 8, -tile.shape[1] % 8
        composite.append(np.pad(tile, ((0, pad_h), (0, pad_w), (0, 0))))
    write_mp4(video, composite, fps)


def dream(
    model_path: str | Path,
    steps: int = 60,
    plan: Sequence[Any] | str | None = None,
    policy: Callable[[np.ndarray], int] | None = None,
    seed: int = 0,
    state: str | None = None,
    video: str | Path | None = None,
    fps: float = 15.0,
    real: bool = True,
    log: Log | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Imagine `steps` frames; returns figures (PSNR per step vs the real env when `real`) and,
    with `video`, writes real | imagined | uncertainty as an mp4.

    Args:
        model_path: the model file or run directory.
        steps: frames to imagine.
        plan: actions (or plan text), its last action held; with neither plan nor policy, the
            sticky random policy of the training rollouts.
        policy: an imagined frame -> action callable, used instead of a plan (`model_policy`
            makes one of a model zip: `metabonk dream --agent MODEL.zip`).
        seed, state: the reset seed and start state of the env.
        video, fps: the mp4 to write and its frame rate.
        real: also play the actions in the real env and compare.
        log: progress messages.
        env_kwargs: over the model's recorded env kwargs (a live game's `port`; a Megabonk
            model recorded from a person playing needs `send_actions=True` to play for real).

    A model of Box actions (Megabonk's) dreams under sticky random Box actions (each held 2-9
    steps) or a `plan` of Box action vectors; plan text and `policy` name Discrete actions.
    """
    import metabonk_gym  # noqa: F401  (registers the envs)

    check_number("--steps", steps, 1, MAX_DREAM_STEPS, integer=True)
    check_number("--fps", fps, 0.1, 240)
    model, meta = load_world_model(model_path)
    env_id = str(meta.get("env_id") or "")
    kwargs = {**dict(meta.get("env_kwargs") or {}), **dict(env_kwargs or {})}
    n = model.config.n_actions
    box = bool(model.config.action_box)
    if box and (isinstance(plan, str) or policy is not None):
        raise WorldModelError(
            "this world model takes Box actions: dream it under sticky random actions (no --plan "
            "or --agent)"
        )
    try:
        env = gym.make(env_id, **kwargs)
    except Exception as exc:
        raise WorldModelError(f"cannot make the model's env {env_id} {kwargs}: {exc}") from exc
    try:
        obs, _ = env.reset(seed=seed, options={"state": state} if state else None)
        first = _frame(obs)
        if list(first.shape) != list(meta.get("obs_shape", first.shape)):
            raise WorldModelError(
                f"{env_id} gives {first.shape} frames, the model was trained on {tuple(meta['obs_shape'])}"
            )
        parsed = policy is None or isinstance(plan, str)  # plan text is checked either way
        planned = _dream_plan(plan, n, box, env, seed, steps) if parsed else None
        act = _chooser(policy, planned, box)
        imagined, spreads, actions = _imagine_steps(model, first, steps, act, log)
        truth = _play(env, actions) if real else []
    finally:
        env.close()
    psnr = [
        float(10 * np.log10(255.0**2 / max(np.mean((a.astype(float) - b) ** 2), 1e-10)))
        for a, b in zip(imagined, truth)
    ]
    result: dict[str, Any] = {
        "env_id": env_id,
        "steps": len(imagined),
        "actions": actions,
        "mean_uncertainty": float(np.mean([s.mean() for s in spreads])),
    }
    if psnr:
        result["psnr_first"] = psnr[0]
        result["psnr_last"] = psnr[-1]
        result["psnr_mean"] = float(np.mean(psnr))
    if video is not None:
        _write_dream(Path(video), first, imagined, spreads, truth if real else None, fps)
        result["video"] = str(video)
        if log:
            log(f"wrote {video} ({'real | ' if real else ''}imagined | uncertainty)")
    return result
