"""Record reference trajectories (obs hashes, rewards, dones, info) for tests/test_trajectories.py.

Run once on the commit whose behaviour the tests pin (the env contract refactor compares against
trajectories recorded on the main before it):
    python scripts/record_trajectories.py tests/data/trajectories.json
A case whose behaviour changed on purpose is recorded again alone, the others kept, the reason
stored in the file's `rerecorded`:
    python scripts/record_trajectories.py tests/data/trajectories.json --only NAME --reason TEXT
Each case is an env, its make kwargs, a reset seed/options and a list of actions; actions are
stored, so replaying them does not depend on how a space samples.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

import gymnasium as gym
import numpy as np

import metabonk_gym  # noqa: F401

CASES: list[dict[str, Any]] = [
    {"name": "quest_rgb", "env": "MetaBonk/BonkQuest-v0", "kwargs": {}, "seed": 0, "steps": 200},
    {
        "name": "quest_gray_ds4_room3",
        "env": "MetaBonk/BonkQuest-v0",
        "kwargs": {"obs_type": "grayscale", "downscale": 4, "state": "room3"},
        "seed": 1,
        "steps": 200,
    },
    {
        "name": "arena_state_survival",
        "env": "MetaBonk/BonkArena-v0",
        "kwargs": {"obs_type": "state", "reward": "survival"},
        "seed": 2,
        "steps": 300,
    },
    {
        "name": "arena_multibinary_ds2",
        "env": "MetaBonk/BonkArena-v0",
        "kwargs": {"action_space": "multibinary", "downscale": 2, "frameskip": 2},
        "seed": 3,
        "steps": 150,
    },
    {
        "name": "quest_skyemu",
        "env": "MetaBonk/BonkQuest-v0",
        "kwargs": {"backend": "skyemu"},
        "seed": 0,
        "steps": 80,
    },
    {"name": "megabonk_sim", "env": "MetaBonk/Megabonk-v0", "kwargs": {}, "seed": 0, "steps": 120},
]


def digest(obs: Any) -> Any:
    """A short hash per observation (per key for Dict observations)."""
    if isinstance(obs, dict):
        return {k: digest(v) for k, v in sorted(obs.items())}
    arr = np.ascontiguousarray(obs)
    return f"{arr.dtype.str}{arr.shape}:" + hashlib.sha1(arr.tobytes()).hexdigest()[:16]


def scalars(info: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, (bool, np.bool_)):
            out[key] = bool(value)
        elif isinstance(value, (int, np.integer)):
            out[key] = int(value)
        elif isinstance(value, (float, np.floating)):
            out[key] = float(value)
    return out


def jsonable(action: Any) -> Any:
    if isinstance(action, dict):
        return {k: jsonable(v) for k, v in action.items()}
    if isinstance(action, np.ndarray):
        return action.tolist()
    if isinstance(action, np.generic):
        return action.item()
    return action


def rollout(env: gym.Env, seed: int, actions: list[Any], reset_options: dict | None = None) -> dict:
    obs, info = env.reset(seed=seed, options=reset_options)
    first = {"obs": digest(obs), "info": scalars(info)}
    steps = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append(
            {
                "obs": digest(obs),
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": scalars(info),
            }
        )
        if terminated or truncated:
            break
    return {"reset": first, "steps": steps}


def main(out: str, only: str | None = None, reason: str | None = None) -> None:
    from metabonk_gym.bonklink.sim import BonkLinkSim
    from metabonk_gym.gba.integration import Integration
    from metabonk_gym.gba.skyemu_peer import PeerProcess

    if only is not None and only not in {case["name"] for case in CASES}:
        raise SystemExit(f"--only {only}: no such case ({', '.join(c['name'] for c in CASES)})")
    if only is not None and not reason:
        raise SystemExit("--only needs --reason: why the pinned behaviour changed")
    results = []
    for case in CASES:
        if only is not None and case["name"] != only:
            continue
        kwargs = dict(case["kwargs"])
        peer = sim = None
        if kwargs.get("backend") == "skyemu":
            peer = PeerProcess(Integration.bundled("BonkQuest").rom_path)
            peer.__enter__()
            kwargs["skyemu_url"] = peer.url
        if case["env"].endswith("Megabonk-v0"):
            sim = BonkLinkSim(port=0, mode="lockstep", seed=case["seed"], frame_format="raw_rgb")
            kwargs["port"] = sim.start()
        env = gym.make(case["env"], **kwargs)
        env.action_space.seed(case["seed"])
        actions = [env.action_space.sample() for _ in range(case["steps"])]
        result = rollout(env, case["seed"], actions)
        env.close()
        if peer is not None:
            peer.__exit__(None, None, None)
        if sim is not None:
            sim.stop()
        results.append(
            {
                **{k: v for k, v in case.items() if k != "kwargs"},
                "kwargs": case["kwargs"],
                "actions": [jsonable(a) for a in actions],
                **result,
            }
        )
        print(case["name"], len(result["steps"]), "steps", file=sys.stderr)
    data: dict[str, Any] = {"recorded_on": "main before the env-contract change", "cases": results}
    if only is not None:
        with open(out) as handle:
            data = json.load(handle)
        data["cases"] = [results[0] if c["name"] == only else c for c in data["cases"]]
        data.setdefault("rerecorded", {})[only] = reason
    with open(out, "w") as handle:
        json.dump(data, handle)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--only", help="record this case again, keep the others")
    parser.add_argument("--reason", help="with --only: why its pinned behaviour changed")
    args = parser.parse_args()
    main(args.out, args.only, args.reason)
