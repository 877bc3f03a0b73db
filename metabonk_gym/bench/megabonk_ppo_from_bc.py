"""PPO from a Megabonk BC clone on the stand-in: the clone's survival, then PPO's, beside PPO from
scratch and a random policy, each evaluated on a fresh lockstep sim of one seed.

The last link of the offline chain (docs/video.md): `train ppo --init-from CLONE/model.zip`.
Every evaluation is `evaluate` (the policy sampling its actions, seeded per episode) on a fresh
`bonklink-sim --lockstep --seed 1000`, capped at 1800 steps (120 game seconds); PPO trains on
four lockstep sims (ports 5590-5593, seeds 2000-2003).

    python -m metabonk_gym.bench.megabonk_ppo_from_bc CLONE.zip OUT_DIR [--steps 150000]
        [--episodes 24] [--scratch] [--figures docs/figures/megabonk-video.json]

`--scratch` also trains PPO from scratch for the same steps; `--figures` puts the result into
that record file as its `ppo-from-bc` figure (this machine, today).

>>> record = figure_record(
...     {"ppo_steps": 150000, "random": {"mean": 51.4}, "bc": {"mean": 20.9},
...      "ppo_from_bc": {"mean": 57.0}, "ppo_from_scratch": {"mean": 66.0}}
... )
>>> record["value"], record["text"]
(57.0, 'clone 20.9 s -> PPO 57.0 s; PPO from scratch 66.0 s, random 51.4 s')
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from metabonk_gym.agents.evaluate import evaluate
from metabonk_gym.bench.figures import put_figures
from metabonk_gym.bonklink.sim import SimProcess
from metabonk_gym.training.ppo import train_ppo
from metabonk_gym.utils import atomic_write_text

ENV_ID = "MetaBonk/Megabonk-v0"
EVAL_SEED = 1000
EVAL_STEPS = 1800


def survival(agent: str, episodes: int) -> dict[str, Any]:
    """Mean survival (game seconds) and each episode's, on a fresh lockstep sim."""
    with SimProcess(port=0, mode="lockstep", seed=EVAL_SEED, jpeg_hz=0) as game:
        report = evaluate(
            ENV_ID,
            agent,
            episodes=episodes,
            seed=0,
            overrides={"base_port": game.port, "n_envs": 1, "max_episode_steps": EVAL_STEPS},
        )
    return {
        "mean": float(report["mean_survival_time"]),
        "episodes": [round(float(t), 1) for t in report["survival_times"]],
    }


def ppo(out: Path, steps: int, init_from: Path | None) -> float:
    """Train PPO into `out` on four lockstep sims; returns its wall seconds."""
    sims = [SimProcess(port=5590 + i, mode="lockstep", seed=2000 + i, jpeg_hz=0) for i in range(4)]
    started = time.monotonic()
    try:
        for sim in sims:
            sim.start()
        train_ppo(
            ENV_ID,
            out,
            overrides={
                "base_port": 5590,
                "n_envs": 4,
                "total_steps": steps,
                "max_episode_steps": EVAL_STEPS,
            },
            init_from=init_from,
        )
    finally:
        for sim in sims:
            sim.stop()
    return round(time.monotonic() - started, 1)


def figure_record(figures: dict[str, Any]) -> dict[str, Any]:
    """The run's figure in the docs' schema (:mod:`metabonk_gym.bench.figures`): PPO's survival."""
    text = f"clone {figures['bc']['mean']:.1f} s -> PPO {figures['ppo_from_bc']['mean']:.1f} s"
    if "ppo_from_scratch" in figures:
        text += f"; PPO from scratch {figures['ppo_from_scratch']['mean']:.1f} s"
    text += f", random {figures['random']['mean']:.1f} s"
    return {
        "id": "ppo-from-bc",
        "name": f"Megabonk PPO from the BC clone, {figures['ppo_steps'] // 1000}k steps: mean survival",
        "value": round(figures["ppo_from_bc"]["mean"], 1),
        "unit": "s",
        "text": text,
        "target": None,
        "met": None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clone", type=Path, help="the BC clone's model.zip")
    parser.add_argument("out", type=Path, help="a new folder for the PPO runs and the figures")
    parser.add_argument("--steps", type=int, default=150_000)
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--scratch", action="store_true", help="also PPO from scratch")
    parser.add_argument("--figures", type=Path, default=None, help="a figure record file to update")
    args = parser.parse_args(argv)
    if not args.clone.is_file():
        print(f"error: {args.clone} is not a file: pass the BC clone's model.zip", file=sys.stderr)
        return 2
    figures: dict[str, Any] = {"clone": str(args.clone), "ppo_steps": args.steps}
    figures["random"] = survival("random", args.episodes)
    figures["bc"] = survival(str(args.clone), args.episodes)
    figures["ppo_from_bc_seconds"] = ppo(args.out / "from-bc", args.steps, args.clone)
    figures["ppo_from_bc"] = survival(str(args.out / "from-bc" / "model.zip"), args.episodes)
    if args.scratch:
        figures["ppo_from_scratch_seconds"] = ppo(args.out / "scratch", args.steps, None)
        figures["ppo_from_scratch"] = survival(
            str(args.out / "scratch" / "model.zip"), args.episodes
        )
    text = json.dumps(figures, indent=2)
    atomic_write_text(args.out / "ppo-from-bc.json", text)
    print(text)
    if args.figures is not None:
        command = shlex.join(
            ["python", "-m", __spec__.name if __spec__ else __name__, *sys.argv[1:]]
        )
        put_figures(args.figures, [figure_record(figures)], command=command, seeds=[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
