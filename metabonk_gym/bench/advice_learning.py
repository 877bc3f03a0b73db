"""PPO with advice (the oracle's or a real model's) vs PPO alone on the whole BonkQuest.

What: for each seed, two PPO runs from the `start` state (five rooms, `explore` reward, no room-1
goal) at equal env steps: `alone` (the screen only) and `advice` (the same plus `pause_to_think`
in async mode: its directive in the observation, a `follow` reward term, and an advice schedule
that fades the adviser out from `fade[0]` to `fade[1]` of the run, so the final policy plays
alone). The adviser (`adviser_entry`) is the oracle, a rule strategist (`first`, `random`:
`metabonk_gym.think.baselines`, the baselines a model must beat), or a GGUF language model
(`model`: the default SmolLM2-135M-Instruct; `model:PATH`: another, e.g. a `think finetune`
output) that one llama-server started by the trainer serves to all envs of the run, with
deadlines calibrated on this machine (`metabonk_gym.training.thinkserver`). `state` picks the
start (default `start`, the whole game); `alone_from` compares a second adviser with the
`alone` runs of a first folder instead of training them again.
Both final policies are then evaluated alone on the same fixed game seeds; the figure is the
median and worst over seeds of the game's win rate and of the mean rooms reached. Why: the
question is whether thinking during training leaves a better policy that no longer thinks.

>>> quest_overrides(1000, seed=2)["state"], quest_overrides(1000, seed=2)["seed"]
('start', 2)
>>> advice_stack(1000, (0.5, 0.9))[0]["advice_fade"]
[500, 900]
>>> adviser_entry("oracle"), adviser_entry("model")
({'engine': 'oracle'}, {'engine': 'llama_cpp', 'model_path': None, 'serve': True})
>>> adviser_entry("first"), quest_overrides(1000, seed=0, state="riddles")["state"]
({'engine': 'first'}, 'riddles')
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from metabonk_gym.agents.episode import episode_config
from metabonk_gym.agents.model import ModelAgent
from metabonk_gym.errors import MetabonkError
from metabonk_gym.rundir import RunDir, read_model_metadata
from metabonk_gym.think.baselines import RULE_STRATEGISTS
from metabonk_gym.think.models import check_gguf
from metabonk_gym.training.envs import make_env
from metabonk_gym.training.errors import RunDirError
from metabonk_gym.training.ppo import train_ppo
from metabonk_gym.utils import atomic_write_text

ENV_ID = "MetaBonk/BonkQuest-v0"
ARMS = ("alone", "advice")
#: Game seeds of the evaluation (fixed: both arms and every seed play the same games).
EVAL_SEED = 50_000


def quest_overrides(
    total_steps: int, seed: int, max_steps: int = 1500, state: str = "start"
) -> dict[str, Any]:
    """The game from `state` (default: the whole game from `start`): explore reward, the game's
    own win, no room-1 shaping."""
    return {
        "state": state,
        "reward": "explore",
        "goal": None,
        "shaping": None,
        "max_episode_steps": max_steps,
        "total_steps": total_steps,
        "seed": seed,
        "checkpoint_every": max(total_steps // 4, 1000),
        "video_every": 0,
    }


def adviser_entry(adviser: str) -> dict[str, Any]:
    """`pause_to_think`'s engine options for an adviser: `oracle`, a rule (`first`, `random`),
    `model` (the default model) or `model:PATH` (a GGUF, checked here; its absolute path goes
    into the runs' configs). A model is served to all envs of a run by one server
    (`serve: true`)."""
    if adviser == "oracle" or adviser in RULE_STRATEGISTS:
        return {"engine": adviser}
    kind, _, path = adviser.partition(":")
    if kind != "model" or (adviser != "model" and not path):
        rules = ", ".join(RULE_STRATEGISTS)
        raise MetabonkError(
            f"--adviser takes oracle, {rules}, model or model:PATH, not {adviser!r}"
        )
    model = str(check_gguf(path).resolve()) if path else None
    return {"engine": "llama_cpp", "model_path": model, "serve": True}


def advice_stack(
    total_steps: int,
    fade: tuple[float, float] = (0.5, 0.9),
    follow_weight: float = 0.1,
    adviser: str = "oracle",
) -> list[dict[str, Any]]:
    """The `advice` arm's wrappers: the adviser, async, fading out over `fade` of the run."""
    return [
        {
            "name": "pause_to_think",
            **adviser_entry(adviser),
            "mode": "async",
            "follow_weight": follow_weight,
            "advice_fade": [int(fade[0] * total_steps), int(fade[1] * total_steps)],
        }
    ]


def _train(run_dir: Path, overrides: dict[str, Any], progress: bool) -> dict[str, Any]:
    """Train (resuming a stopped run; a finished one is kept) and report steps and minutes;
    a run stopped before its end (Ctrl-C, SIGTERM) raises KeyboardInterrupt, never scored."""
    run = RunDir(run_dir)
    state = run.read_state()
    if run.model.is_file() and state.get("status") == "finished":
        steps = read_model_metadata(run.model)["num_timesteps"]
        return {"steps": steps, "minutes": state.get("minutes"), "resumed": False}
    if run.is_run():
        run.check_not_running()  # RunDirError while another live process trains it
    start = time.monotonic()
    resume = run.is_run() and (run.model.is_file() or bool(run.list_checkpoints()))
    if run.is_run() and not resume:  # a run that died before its first checkpoint
        for path in sorted(run.path.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
    result = train_ppo(
        ENV_ID,
        run_dir,
        overrides={"total_steps": overrides["total_steps"]} if resume else overrides,
        resume=resume,
        progress=progress,
    )
    minutes = (time.monotonic() - start) / 60
    run.write_state(minutes=round(minutes + float(state.get("minutes") or 0.0), 2))
    if result.interrupted:  # Ctrl-C or SIGTERM: checkpointed, resumed by the next call
        raise KeyboardInterrupt(f"{run_dir} stopped at step {result.num_timesteps}")
    return {"steps": result.num_timesteps, "minutes": round(minutes, 2), "resumed": resume}


def evaluate_alone(model: Path, episodes: int, max_steps: int = 1500) -> dict[str, float]:
    """The model on `episodes` fixed games from its run's start, alone (an advice run's stack is rebuilt
    from its config and, never told a training step, gives no advice): game win rate and mean
    rooms reached."""
    cfg = episode_config(ENV_ID, str(model))
    env = make_env(ENV_ID, cfg)
    try:
        agent = ModelAgent(model, env)
        wins, rooms, advised = [], [], 0
        for i in range(episodes):
            obs, info = env.reset(seed=EVAL_SEED + i)
            agent.reset(obs, info)
            for _ in range(max_steps):
                obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
                if terminated or truncated:
                    break
            advised += bool((info.get("think") or {}).get("advised", False))
            wins.append(float(bool(info.get("won"))))
            rooms.append(float(info.get("rooms_visited", 0)))
    finally:
        env.close()
    if advised:
        raise RuntimeError(f"{advised} evaluation episodes of {model} were advised")
    return {"win_rate": statistics.fmean(wins), "mean_rooms": statistics.fmean(rooms)}


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median and worst of per-seed values.

    >>> summary([0.2, 0.5, 0.1])
    {'median': 0.2, 'worst': 0.1}
    """
    return {"median": float(statistics.median(values)), "worst": float(min(values))}


def run_advice_bench(
    out: Path,
    *,
    seeds: int = 3,
    total_steps: int = 30_000,
    episodes: int = 10,
    fade: tuple[float, float] = (0.5, 0.9),
    follow_weight: float = 0.1,
    n_envs: int = 4,
    progress: bool = False,
    on_result: Callable[[str, dict[str, Any]], None] | None = None,
    order: Sequence[int] | None = None,
    adviser: str = "oracle",
    state: str = "start",
    max_steps: int = 1500,
    alone_from: Path | None = None,
) -> dict[str, Any]:
    """Train and evaluate both arms on `seeds` seeds in `out`; see the module docstring. Runs
    resume; each run's scores are kept in its `scores.json`, so several processes may share
    `out` (`order`: the seeds this one takes first; a run another live process trains is left
    to it). `adviser`: see `adviser_entry`; `state` the start and `max_steps` the episode
    length, in training and evaluation; `alone_from`: a folder of this bench whose `alone`
    runs (same seeds, steps and start) are this report's, none trained here. Writes
    `out/advice.json` after every run."""
    out = Path(out).expanduser()
    if alone_from is not None:
        alone_from = Path(alone_from).expanduser()
        if not any(alone_from.glob("alone_seed*/scores.json")):
            raise MetabonkError(f"--alone-from {alone_from} holds no scored alone runs")
    stack = advice_stack(total_steps, fade, follow_weight, adviser)  # a bad adviser: before runs
    report: dict[str, Any] = {
        "fade": fade,
        "follow_weight": follow_weight,
        "adviser": stack[0],
        "state": state,
        "max_steps": max_steps,
        "alone_from": alone_from,
    }
    out.mkdir(parents=True, exist_ok=True)
    for seed in order if order is not None else range(seeds):
        for arm in ARMS[1:] if alone_from is not None else ARMS:
            run_dir = out / f"{arm}_seed{seed}"
            if (run_dir / "scores.json").is_file():
                continue
            overrides = {**quest_overrides(total_steps, seed, max_steps, state), "n_envs": n_envs}
            if arm == "advice":
                overrides["wrappers"] = stack
            try:
                trained = _train(run_dir, overrides, progress)
            except RunDirError as exc:
                if "being trained right now" not in str(exc):
                    raise
                continue  # another process trains it
            scores = evaluate_alone(run_dir / "model.zip", episodes, max_steps)
            row = {"seed": seed, **trained, **scores}
            atomic_write_text(run_dir / "scores.json", json.dumps(row))
            if on_result is not None:
                on_result(arm, row)
            result = collect(out, seeds, total_steps, episodes, **report)
            atomic_write_text(out / "advice.json", json.dumps(result, indent=2))
    return collect(out, seeds, total_steps, episodes, **report)


def collect(
    out: Path,
    seeds: int,
    total_steps: int,
    episodes: int,
    fade: Sequence[float],
    follow_weight: float,
    adviser: dict[str, Any] | None = None,
    state: str = "start",
    max_steps: int = 1500,
    alone_from: Path | None = None,
) -> dict[str, Any]:
    """The report of the runs in `out` scored so far (`scores.json` of each); `adviser`: the
    advice arm's `pause_to_think` entry (default: the oracle's); `state` and `max_steps` as
    the runs'; `alone_from`: where the `alone` runs are (default: `out`)."""
    per_seed: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for seed in range(seeds):
        for arm in ARMS:
            folder = alone_from if arm == "alone" and alone_from is not None else out
            path = folder / f"{arm}_seed{seed}" / "scores.json"
            if path.is_file():
                per_seed[arm].append(json.loads(path.read_text()))
    report = _report(per_seed, total_steps, episodes, fade, follow_weight, adviser)
    report.update(state=state, max_episode_steps=max_steps)
    if alone_from is not None:
        report["alone_from"] = str(alone_from)
    return report


def _report(
    per_seed: dict[str, list[dict[str, Any]]],
    total_steps: int,
    episodes: int,
    fade: Sequence[float],
    follow_weight: float,
    adviser: dict[str, Any] | None = None,
) -> dict[str, Any]:
    entry = {k: v for k, v in (adviser or {}).items() if k not in ("name", "advice_fade")}
    out: dict[str, Any] = {
        "env": ENV_ID,
        "state": "start",
        "env_steps_per_run": total_steps,
        "eval_episodes": episodes,
        "adviser": {
            "engine": "oracle",
            "mode": "async",
            **entry,
            "fade": list(fade),
            "follow_weight": follow_weight,
        },
        "runs": per_seed,
    }
    for arm, rows in per_seed.items():
        if rows:
            out[arm] = {
                "win_rate": summary([r["win_rate"] for r in rows]),
                "mean_rooms": summary([r["mean_rooms"] for r in rows]),
                "seeds": len(rows),
            }
    return out


def adviser_label(adviser: str) -> str:
    """A short name of an adviser for a figure's id: `model:runs/ft/model.gguf` -> `model-ft`.

    >>> adviser_label("first"), adviser_label("model:runs/ft/model.gguf"), adviser_label("model")
    ('first', 'model-ft', 'model')
    """
    kind, _, path = adviser.partition(":")
    if not path:
        return kind
    name = Path(path).parent.name or Path(path).stem
    return f"{kind}-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}"


def figure_record(result: dict[str, Any], adviser: str) -> dict[str, Any]:
    """The bench's figure for `docs/figures/advice.json`: mean rooms reached, advised vs alone
    (median and worst over seeds), with the game win rates; met when the advised median is
    higher.

    >>> arm = lambda rooms: {"win_rate": {"median": 0.0, "worst": 0.0},
    ...                      "mean_rooms": {"median": rooms, "worst": rooms}, "seeds": 3}
    >>> r = figure_record({"state": "riddles", "env_steps_per_run": 8000, "alone": arm(1.5),
    ...                    "advice": arm(1.9)}, "first")
    >>> r["id"], r["value"], r["met"]
    ('riddles-first-advice', 1.9, True)
    """
    state = str(result.get("state", "start"))
    advised, alone = result.get("advice"), result.get("alone")

    def arm_text(arm: dict[str, Any] | None) -> str:
        if not arm:
            return "not run"
        rooms, wins = arm["mean_rooms"], arm["win_rate"]
        return (
            f"rooms {rooms['median']:.2f} (worst {rooms['worst']:.2f}), game win rate "
            f"{wins['median']:.2f}, {arm['seeds']} seeds"
        )

    value = advised["mean_rooms"]["median"] if advised else None
    met = None if not (advised and alone) else value > alone["mean_rooms"]["median"]
    slug = re.sub(r"[^a-z0-9]+", "-", f"{state}-{adviser_label(adviser)}-advice".lower())
    return {
        "id": slug.strip("-"),
        "name": f"PPO with {adviser}'s advice vs alone from `{state}` at "
        f"{result.get('env_steps_per_run')} env steps: mean rooms reached (median)",
        "value": value,
        "unit": "rooms",
        "text": f"advised: {arm_text(advised)}; alone: {arm_text(alone)}",
        "target": "advised better",
        "met": met,
    }
