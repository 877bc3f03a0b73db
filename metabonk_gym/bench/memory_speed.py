"""`metabonk bench memory`: what the long-term memory costs and what it is worth.

Cost: BonkQuest played by its scripted expert over several seeds under the memory (an embedded
database in a temporary folder); each step times the env step and the memory's work apart
(reading the variables, the arrays when needed, `observe`, the batched flushes), so the memory's
mean cost per step (target <= 0.2 ms, judged on CPU time after the first episode, which opens
the database and pays the first flush; wall time on a shared machine counts other processes'
turns) is a ratio to the env step measured in the same run. Query
latency: the prompt's fact queries (`FACT_QUERIES`) and the whole prompt section, p50/p95.
Worth: a strategist that sees only the screen (the room's tiles, the sprites, the HUD's hearts
and keys, the sage's box while it is open: the oracle restricted to what is on screen) plays
BonkQuest from the start state on N seeds with the game's follower, without memory and with it
(what the sage said, which NPC it talked to, where each door leads), and again with the memory
of a first attempt on the same seed (persistence across runs): steps to win, as ratios; asked
only on the director's events, and also every 30 and every 10 steps, as a VLM is asked every
few seconds: without memory each new answer starts from the screen alone.

>>> s = ScreenStrategist(None)
>>> s.name
'screen'
>>> [r["id"] for r in figure_records({"memory_cpu_ms_per_step_warm": 0.14})]
['cpu-per-step']
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import metabonk_gym  # noqa: F401  (registers the envs)
from metabonk_gym.bench.figures import Target
from metabonk_gym.games.BonkQuest.game import TILE, BonkQuestExpert, QuestAdapter
from metabonk_gym.memory.prompt import FACT_QUERIES, memory_text
from metabonk_gym.memory.world import WorldMemory
from metabonk_gym.think.agent import ThinkAgent
from metabonk_gym.think.directive import Directive
from metabonk_gym.think.oracle import oracle_directive
from metabonk_gym.think.prompts import HistoryItem
from metabonk_gym.think.strategist import Strategist, ThinkResult, done_future
from metabonk_gym.think.view import GameView
from metabonk_gym.wrappers.memory import Memory

ENV_ID = "MetaBonk/BonkQuest-v0"
BUDGET_MS = Target("<=", 0.2, "ms")
#: Target of the worth figure: with memory, at most this fraction of the steps to win without.
STEPS_RATIO_TARGET = Target("<=", 0.7, "x", suffix=" (30% fewer)")


def _size(path: Path) -> int:
    """Bytes of a database file with its write-ahead log."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _ms(values: Sequence[float], q: float) -> float:
    return 1000.0 * float(np.quantile(np.asarray(values), q)) if values else 0.0


def write_cost(
    episodes: int = 6, first_seed: int = 100, folder: Path | None = None
) -> dict[str, Any]:
    """Expert playthroughs under the memory: env step vs memory work per step (see above)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(folder or tmp) / "memory.lbdb"
        env = Memory(gym.make(ENV_ID, state="start"), path=path)
        inner, memory = env.env, env.memory
        env_s: list[float] = []
        mem_s: list[float] = []
        warm = 0
        mem_cpu: list[float] = []
        clock, cpu = time.perf_counter, time.process_time
        try:
            for seed in range(first_seed, first_seed + episodes):
                if seed == first_seed + 1:
                    warm = len(mem_s)  # steps of the first episode (first flush, warm-up)
                obs, info = env.reset(seed=seed)
                expert = BonkQuestExpert(env)
                done = False
                while not done:
                    action = expert.act(obs, info)
                    a = clock()
                    obs, _, terminated, truncated, info = inner.step(action)
                    b, b_cpu = clock(), cpu()
                    values = env._values(info)
                    wants = memory.wants_tiles(values)
                    memory.observe(values, env._read_arrays() if wants else None)
                    done = terminated or truncated
                    if done:
                        memory.end_episode()
                    c = clock()
                    mem_cpu.append(cpu() - b_cpu)
                    env_s.append(b - a)
                    mem_s.append(c - b)
            latency = query_latency(memory)
            stats = memory.stats()
            counts = memory.graph.counts()
            script = Path(tmp) / "memory.cypher"
            memory.graph.export_cypher(script)  # the data itself, as text
            exported = script.stat().st_size
            rows, flushes = memory.graph.rows_written, memory.graph.flushes
        finally:
            env.close()
        size = _size(path)
    mean_mem = 1000.0 * sum(mem_s) / len(mem_s)
    nodes = sum(n for k, n in counts.items() if not k.isupper())
    later = mem_cpu[warm:] or mem_cpu
    warm_cpu = 1000.0 * sum(later) / len(later)
    mean_env = 1000.0 * sum(env_s) / len(env_s)
    return {
        "write_steps": len(mem_s),
        "write_episodes": episodes,
        "env_ms_per_step": mean_env,
        "memory_ms_per_step": mean_mem,
        "memory_cpu_ms_per_step": 1000.0 * sum(mem_cpu) / len(mem_cpu),
        "memory_cpu_ms_per_step_warm": warm_cpu,
        "memory_ms_p50": _ms(mem_s, 0.5),
        "memory_ms_p99": _ms(mem_s, 0.99),
        "memory_ms_max": _ms(mem_s, 1.0),
        "memory_vs_env_step": mean_mem / mean_env,
        "memory_budget_ms": BUDGET_MS.value,
        "memory_within_budget": BUDGET_MS.met(warm_cpu),
        "rows_written": rows,
        "flushes": flushes,
        "areas": stats["areas"],
        "events": stats["events"],
        "database_bytes": size,
        "nodes": nodes,
        "relationships": sum(n for k, n in counts.items() if k.isupper()),
        # every episode a new world (a new seed): the worst case for growth
        "export_bytes": exported,
        # every episode is a new world (a new seed): the worst case for growth
        "export_mb_per_1m_steps_extrapolated": exported / len(mem_s) * 1e6 / 2**20,
        "nodes_per_1k_steps": 1000 * nodes / len(mem_s),
        **latency,
    }


def query_latency(memory: WorldMemory, repeats: int = 40) -> dict[str, Any]:
    """p50/p95 of each fact query and of the whole prompt section on `memory`'s graph."""
    memory.flush_quietly()
    area = memory.area
    params = {"world": area.split(":")[0], "area": area, "x": memory.cell[0], "y": memory.cell[1]}
    out: dict[str, Any] = {}
    clock = time.perf_counter
    for name, (query, _) in FACT_QUERIES.items():
        times = []
        for _ in range(repeats):
            start = clock()
            memory.graph.query(query, params)
            times.append(clock() - start)
        key = name.replace(" ", "_")
        out[f"query_{key}_ms_p50"] = _ms(times, 0.5)
        out[f"query_{key}_ms_p95"] = _ms(times, 0.95)
    times = []
    for _ in range(repeats):
        start = clock()
        memory_text(memory)
        times.append(clock() - start)
    out["prompt_section_ms_p50"] = _ms(times, 0.5)
    out["prompt_section_ms_p95"] = _ms(times, 0.95)
    return out


class ScreenStrategist(Strategist):
    """BonkQuest's oracle restricted to the screen (and, given one, the memory).

    Args:
        memory: the `WorldMemory` it may consult (None: it sees only the screen).
    """

    name = "screen"

    def __init__(self, memory: WorldMemory | None) -> None:
        self.memory = memory

    def request(
        self, view: GameView, history: Sequence[HistoryItem], trigger: str, note: str | None = None
    ) -> Any:
        start = time.perf_counter()
        return done_future(ThinkResult(self.decide(view), time.perf_counter() - start))

    def decide(self, view: GameView) -> Directive:
        """The directive from what is on screen (plus the memory, when there is one)."""
        tiles = view.arrays["room_tiles"]
        me = (view.get("player_x"), view.get("player_y"))

        def cells(*names: str) -> list[tuple[int, int]]:
            found = np.argwhere(np.isin(tiles, [TILE[n] for n in names]))
            return [(int(x), int(y)) for y, x in found]  # reading order

        def nearest(found: list[tuple[int, int]]) -> tuple[int, int]:
            return min(found, key=lambda c: abs(c[0] - me[0]) + abs(c[1] - me[1]))

        def at(cell: tuple[int, int]) -> dict[str, int]:
            return {"x": cell[0], "y": cell[1]}

        chests = cells("chest", "chest_open")
        if view.get("dialogue_open"):  # the sage's box is on screen: it names the chest
            said = view.get("key_chest")
            if 0 <= said < len(chests):
                return oracle_directive("open the chest the sage named", "open", at(chests[said]))
        if cells("treasure"):
            return oracle_directive("take the treasure", "collect", at(cells("treasure")[0]))
        if view.get("hp") <= 2 and cells("heart"):
            return oracle_directive("heal", "collect", at(nearest(cells("heart"))), 600)
        locked = cells("door_locked")
        if view.get("keys") > 0 and locked:
            return oracle_directive("unlock the door", "open", at(nearest(locked)))
        if cells("key"):
            return oracle_directive("take the key", "collect", at(nearest(cells("key"))))
        if locked:
            closed = cells("chest")
            hint = self._remembered_hint()
            if hint is not None and 0 <= hint < len(chests) and chests[hint] in closed:
                return oracle_directive("open the chest the sage named", "open", at(chests[hint]))
            if cells("npc") and not self._talked_here():
                return oracle_directive("ask the sage", "talk", at(cells("npc")[0]))
            if closed:
                return oracle_directive("try a chest", "open", at(nearest(closed)))
            return oracle_directive("look around", "explore", None, 240)
        doors = cells("door")
        if doors:
            return oracle_directive("go on", "go_to", at(self._forward_door(doors, nearest)))
        return oracle_directive("look around", "explore", None, 240)

    # ------------------------------------------------------------------ what memory adds
    def _remembered_hint(self) -> int | None:
        """What the sage of this room said (his `key_chest`), from the memory's events."""
        if self.memory is None:
            return None
        self.memory.flush_quietly()
        rows = self.memory.graph.query(
            "MATCH (e:Event) WHERE e.kind = 'talked' AND e.area = $area AND e.note <> '' "
            "RETURN e.note AS note ORDER BY e.episode DESC, e.step DESC LIMIT 1",
            {"area": self.memory.area},
        )
        if not rows:
            return None
        return int(rows[0]["note"].split("key_chest=")[1].split()[0])

    def _talked_here(self) -> bool:
        if self.memory is None:
            return False
        return any(
            e["kind"] == "npc" and e["state"] == "talked"
            for e in self.memory.entities(self.memory.area)
        )

    def _forward_door(self, doors: list[tuple[int, int]], nearest: Any) -> tuple[int, int]:
        """The open door to take: without memory the nearest; with it, one that does not lead
        back to an area already visited (else the nearest)."""
        if self.memory is None:
            return nearest(doors)
        memory = self.memory
        back = {
            cell
            for (a, b), cell in memory.connections.items()
            if a == memory.area and b in memory.areas
        }
        fresh = [d for d in doors if d not in back]
        return nearest(fresh or doors)


def play(
    seeds: Sequence[int],
    with_memory: bool,
    path: Path | None,
    max_steps: int = 3000,
    think_every: int = 0,
) -> list[dict[str, Any]]:
    """One episode per seed with the screen-limited strategist (asked on the director's events,
    and every `think_every` steps as well when > 0); steps, won, hits each."""
    base = gym.make(ENV_ID, state="start", max_episode_steps=max_steps)
    env: gym.Env = Memory(base, path=path) if with_memory else base
    memory = env.memory if isinstance(env, Memory) else None
    agent = ThinkAgent(env, ScreenStrategist(memory), QuestAdapter(), think_every=think_every)
    out = []
    try:
        for seed in seeds:
            obs, info = env.reset(seed=seed)
            agent.reset(obs, info, seed=seed)
            steps, done = 0, False
            while not done:
                obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
                steps += 1
                done = terminated or truncated
            out.append(
                {
                    "seed": seed,
                    "steps": steps,
                    "won": bool(info.get("won")),
                    "hits": int(info.get("hits", 0)),
                }
            )
    finally:
        agent.close()
        env.close()
    return out


#: How often the strategist is asked besides the director's events (0: only on events; a VLM is
#: usually asked every few seconds: 10 steps are 40 frames at frameskip 4).
THINK_EVERY = (0, 30, 10)


def steps_to_win(
    seeds: int = 20, first_seed: int = 0, think_every: Sequence[int] = THINK_EVERY
) -> dict[str, Any]:
    """Without memory (the baseline), with memory, and (asked on events only) with a first
    attempt's memory, for each `think_every`; keys of the events-only runs have no prefix."""
    chosen = list(range(first_seed, first_seed + seeds))
    result: dict[str, Any] = {"win_seeds": seeds}
    for every in think_every:
        prefix = f"think_every_{every}_" if every else ""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "memory.lbdb"
            runs = {
                "no_memory": play(chosen, False, None, think_every=every),
                "memory": play(chosen, True, path, think_every=every),
            }
            if not every:  # the same seeds again over the same database: the first attempt's
                runs["memory_second_attempt"] = play(chosen, True, path)
        base = None
        for name, episodes in runs.items():
            key = prefix + name
            steps = [e["steps"] for e in episodes]
            result[f"{key}_wins"] = sum(e["won"] for e in episodes)
            result[f"{key}_mean_steps"] = float(statistics.mean(steps))  # lost: max_steps
            won = [e["steps"] for e in episodes if e["won"]]
            result[f"{key}_mean_steps_won"] = float(statistics.mean(won)) if won else 0.0
            result[f"{key}_mean_hits"] = float(statistics.mean(e["hits"] for e in episodes))
            if base is None:
                base = result[f"{key}_mean_steps"]
            else:
                result[f"{key}_steps_vs_no_memory"] = result[f"{key}_mean_steps"] / base
    return result


def run(episodes: int = 10, seeds: int = 20, worth: bool = True) -> dict[str, Any]:
    """Cost, latency and (with `worth`) steps to win; see the module docstring."""
    result = write_cost(episodes)
    if worth and seeds > 0:
        result.update(steps_to_win(seeds))
    return result


def _cost_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if "memory_cpu_ms_per_step_warm" in result:
        cpu = result["memory_cpu_ms_per_step_warm"]
        rows.append({"id": "cpu-per-step", "name": "long-term memory, CPU per step", "unit": "ms"})
        rows[-1] |= {"value": round(cpu, 3), "text": f"{cpu:.2f} ms"}
        rows[-1] |= BUDGET_MS.record(cpu)
    if "memory_ms_p50" in result:
        p50, p99, top = (result[f"memory_ms_{q}"] for q in ("p50", "p99", "max"))
        name = "memory work per step p50 / p99 / max (the first flush)"
        rows.append({"id": "work-per-step", "name": name, "value": round(p50, 3), "unit": "ms"})
        rows[-1] |= {"text": f"{p50:.2f} / {p99:.2f} / {top:.0f} ms", "target": None, "met": None}
    if "prompt_section_ms_p50" in result:
        p50, p95 = result["prompt_section_ms_p50"], result["prompt_section_ms_p95"]
        name = "whole memory prompt section (flush + fact queries), p50 / p95"
        rows.append({"id": "prompt-section", "name": name, "value": round(p50, 2), "unit": "ms"})
        rows[-1] |= {"text": f"{p50:.1f} / {p95:.1f} ms", "target": None, "met": None}
    return rows


def figure_records(result: dict[str, Any]) -> list[dict[str, Any]]:
    """`run`'s figures as records for `docs/figures/memory.json` (ids as there)."""
    rows = _cost_records(result)
    seeds = result.get("win_seeds")
    often = "think_every_10_memory_steps_vs_no_memory"
    if often in result:
        ratio, events = result[often], result.get("memory_steps_vs_no_memory")
        text = f"{ratio:.2f}x asked every 10 steps"
        text += f" ({result['think_every_10_memory_wins']}/{seeds} won vs "
        text += f"{result['think_every_10_no_memory_wins']}/{seeds})"
        if events is not None:
            text += f"; {events:.2f}x asked on events only"
        name = f"steps to win with memory vs without, screen-limited strategist, {seeds} seeds"
        rows.append({"id": "steps-to-win", "name": name, "value": round(ratio, 3), "unit": "x"})
        rows[-1] |= {"text": text} | STEPS_RATIO_TARGET.record(ratio)
    if "memory_second_attempt_steps_vs_no_memory" in result:
        ratio = result["memory_second_attempt_steps_vs_no_memory"]
        name = "steps to win with a first attempt's memory on the same seed, asked on events only"
        rows.append({"id": "second-attempt", "name": name, "value": round(ratio, 3), "unit": "x"})
        rows[-1] |= {"target": None, "met": None}
    return rows
