"""`run_ladder`: every agent the CLI can load, on the same envs, seeds and starts, ranked.

What: each (env, agent) cell is one `evaluate` of `episodes` episodes reset with seeds
`seed .. seed + episodes - 1`, from the same start state, episode limit and goal for every agent
(resolved once per env: the flags, else the env's training defaults; a model keeps only what
it must see as in training). A cell reports its win rate with a 95% Wilson interval, mean
return, mean steps to a win and its best and worst episode videos (`evaluate`'s video
machinery); the ladder writes `ladder.json`, `ladder.md` (a Markdown table) and `ladder.html`
(one self-contained page: a table sortable by any column, inline script and style, no network).
Why: one ranking for random, scripted experts, thinkers with followers, distilled nets and every
trainer's runs, so a figure of the README names the one command that made it.

Agents: `random`, `scripted`, `oracle` (= `think:oracle`, the oracle strategist with the directive
follower), `think:MODEL` (a GGUF thinker, a distilled `policy.pt`, or a server URL, with the
follower), a model zip, a run directory of any trainer (`agents.runs`), or `replay:SOURCE`
(a Go-Explore archive's best trajectory or a Minari dataset's episodes, `agents.replay`; the
row's note says how many steps were no-ops after the recording ran out). The format of
`ladder.json` (entries, the interval, ranking) is `agents.ranking`'s, as `eval --ladder` writes.

>>> parse_agents("random, oracle")
['random', 'think:oracle']
"""

from __future__ import annotations

import dataclasses
import html
import json
import multiprocessing
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from metabonk_gym.agents.episode import GOALS, episode_config
from metabonk_gym.agents.evaluate import check_writable, evaluate
from metabonk_gym.agents.ranking import LADDER_FORMAT, agent_key, ladder_entry, rank
from metabonk_gym.agents.spec import ALIASES, AgentSpec
from metabonk_gym.experts.base import AgentError
from metabonk_gym.training.config import TrainConfig, resolve_config
from metabonk_gym.training.errors import ConfigError
from metabonk_gym.utils import atomic_write_text

#: Files a ladder writes into its folder.
OUTPUTS: tuple[str, ...] = ("ladder.json", "ladder.md", "ladder.html")


def parse_agents(text: str | Sequence[str]) -> list[str]:
    """Agent specs of `--agents A,B,...` (aliases expanded, blanks dropped); an empty list or a
    repeated agent is a `ConfigError`."""
    items = text.split(",") if isinstance(text, str) else [p for t in text for p in t.split(",")]
    agents = [ALIASES.get(a.strip(), a.strip()) for a in items if a.strip()]
    if not agents:
        raise ConfigError("--agents names no agent; e.g. --agents random,scripted,oracle,RUN_DIR")
    spellings: dict[str, list[str]] = {}
    for agent in agents:
        spellings.setdefault(agent_key(agent), []).append(agent)
    repeated = [names for names in spellings.values() if len(names) > 1]
    if repeated:
        said = "; ".join(
            names[0] if len(set(names)) == 1 else f"one agent as {', '.join(names)}"
            for names in repeated
        )
        raise ConfigError(f"--agents names {said} more than once")
    return agents


def _check_think(spec: AgentSpec) -> None:
    """A `think:PATH` strategist file must exist (oracle and server URLs need none)."""
    model = spec.think.get("model_path")
    if model not in (None, "oracle") and not Path(str(model)).expanduser().is_file():
        raise AgentError(f"{spec.text}: strategist file not found: {model}")


def _slug(text: str) -> str:
    """A file-name-safe form of an env id or agent spec.

    >>> _slug("MetaBonk/BonkQuest-v0"), _slug("runs/ppo a/")
    ('MetaBonk_BonkQuest-v0', 'runs_ppo_a')
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "agent"


@dataclasses.dataclass(frozen=True)
class Cell:
    """One evaluation of the ladder: an agent on an env, with what it plays under.

    Args:
        env_id: the env.
        spec: the agent, parsed once (`AgentSpec.parse`).
        index: the agent's place in `--agents` (its videos' folder).
        overrides: config keys of the cell (the same start, limit and goal for every agent).
        goal: what `won` scores ("game" or "config").
        config: the episodes' config for this agent (`episode_config`), resolved once.
    """

    env_id: str
    spec: AgentSpec
    index: int
    overrides: dict[str, Any]
    goal: str
    config: TrainConfig

    @property
    def agent(self) -> str:
        """The agent's spec as written (aliases expanded)."""
        return self.spec.text

    @property
    def folder(self) -> str:
        """Its videos' folder, relative to the ladder's."""
        return f"videos/{_slug(self.env_id)}/{self.index:02d}-{_slug(self.agent)[-60:]}"


def plan_cells(
    env_ids: Sequence[str],
    agents: Sequence[str | AgentSpec],
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    goal: str = "game",
) -> list[Cell]:
    """Every (env, agent) cell with its settings, checked before anything runs: an unknown env
    or agent, a run of another game, a setting a model cannot take: one-line errors."""
    if goal not in GOALS:
        raise ConfigError(f"--goal must be one of {', '.join(GOALS)}, not {goal!r}")
    if not env_ids:
        raise ConfigError("name at least one env, e.g. metabonk ladder MetaBonk/BonkQuest-v0")
    if len(set(env_ids)) != len(env_ids):
        raise ConfigError("an env is named more than once")
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    specs = [AgentSpec.parse(agent) for agent in agents]
    for spec in specs:
        _check_think(spec)
    cells = []
    for env_id in env_ids:
        base = resolve_config(env_id, config_file, given)  # the env's own: unknown ids fail here
        fixed = {**given, "state": base.state, "max_episode_steps": base.max_episode_steps}
        cell_goal = goal
        if goal == "config":
            if base.goal is None:
                cell_goal = "game"  # the env's config scores the game's own win
            else:
                fixed["goal"] = base.goal  # every agent scores the env's goal, not its own
        fixed = {k: v for k, v in fixed.items() if v is not None}
        for index, spec in enumerate(specs):
            # a misfit fails before any work
            config = episode_config(env_id, spec, config_file, fixed)
            cells.append(Cell(env_id, spec, index, fixed, cell_goal, config))
    return cells


def _agent_kwargs(spec: AgentSpec, trust: bool) -> dict[str, Any]:
    return {"trust": True} if trust and spec.run is not None else {}


def run_cell(
    cell: Cell,
    out_dir: str | Path,
    *,
    episodes: int,
    seed: int,
    config_file: str | Path | None,
    videos: bool,
    deterministic: bool,
    trust: bool,
) -> dict[str, Any]:
    """Evaluate one cell (in this process) and return its ladder entry."""
    video_dir = Path(out_dir) / cell.folder if videos else None
    report = evaluate(
        cell.env_id,
        cell.spec,
        episodes=episodes,
        seed=seed,
        config_file=config_file,
        overrides=cell.overrides,
        video_dir=video_dir,
        agent_kwargs=_agent_kwargs(cell.spec, trust),
        deterministic=deterministic,
        goal=cell.goal,
        config=cell.config,
    )
    return ladder_entry(report, Path(out_dir))


def _run_cell_worker(args: tuple[Any, ...]) -> dict[str, Any]:
    cell, out_dir, kwargs = args
    return run_cell(cell, out_dir, **kwargs)


def run_ladder(
    env_ids: Sequence[str],
    agents: Sequence[str | AgentSpec],
    out_dir: str | Path,
    *,
    episodes: int = 10,
    seed: int = 0,
    goal: str = "game",
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    videos: bool = True,
    n_envs: int = 1,
    deterministic: bool = False,
    trust: bool = False,
    command: str | None = None,
    on_cell: Callable[[dict[str, Any]], None] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Evaluate every agent on every env and write `ladder.json`, `ladder.md` and `ladder.html`
    (with the cells' best and worst videos under `videos/`) into `out_dir`; they are rewritten
    after each cell (`complete: false` until the last), so a stopped ladder keeps what it did.

    Args:
        env_ids: the envs (ids of `metabonk list`).
        agents: agent specs (`parse_agents`).
        out_dir: the ladder's folder (made if missing; files in it are replaced atomically).
        episodes: episodes per cell, reset with seeds `seed .. seed + episodes - 1`.
        seed: the first seed.
        goal: what `won` scores: "game" (the game's own win) or "config" (the env's config goal,
            the same for every agent).
        config_file, overrides: config keys for every cell (e.g. `state`, `max_episode_steps`).
        videos: keep each cell's best and worst episode as mp4 (one process per cell).
        n_envs: cells evaluated at once, one process each.
        deterministic: models take their most likely action (default: sampled, seeded).
        trust: load model zips that need unpickling (`--trust-model`).
        command: the command line that made the ladder (recorded in its outputs).
        on_cell: called with each cell's entry as it finishes.
        force: replace a ladder already in `out_dir` (without it, one there is refused before
            any work, so a second ladder never overwrites the first by accident).
    """
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, not {episodes}")
    if n_envs < 1:
        raise ConfigError(f"--n-envs must be >= 1, not {n_envs}")
    out = Path(out_dir).expanduser()
    cells = plan_cells(env_ids, agents, config_file=config_file, overrides=overrides, goal=goal)
    check_out(out, force)
    kwargs = {
        "episodes": episodes,
        "seed": seed,
        "config_file": config_file,
        "videos": videos,
        "deterministic": deterministic,
        "trust": trust,
    }
    header = {
        "format": LADDER_FORMAT,
        "command": command,
        "envs": list(env_ids),
        "agents": [str(agent) for agent in agents],
        "episodes": episodes,
        "seeds": [seed + i for i in range(episodes)],
        "goal": goal,
    }
    progress = LadderProgress(header, out, len(cells), on_cell)
    run_cells(cells, out, n_envs, kwargs, progress.done)
    ladder = progress.summary(complete=True)
    write_ladder(ladder, out)
    return ladder


def check_out(out: Path, force: bool) -> None:
    """Before any work: `out` holds no ladder (unless `force`) and can be written."""
    held = [name for name in OUTPUTS if (out / name).exists()]
    if held and not force:
        raise ConfigError(
            f"--out {out} already holds a ladder ({', '.join(held)}): pass --force to replace it, "
            "or choose another --out"
        )
    check_writable(out, "--out", folder=True)


def run_cells(
    cells: Sequence[Cell],
    out: Path,
    n_envs: int,
    kwargs: Mapping[str, Any],
    done: Callable[[dict[str, Any]], None],
) -> None:
    """Evaluate every cell (`run_cell` with `kwargs`), `n_envs` at once in processes of their
    own, handing each entry to `done` in the cells' order."""
    if n_envs == 1 or len(cells) == 1:
        for cell in cells:
            done(run_cell(cell, out, **kwargs))
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(n_envs, len(cells)), mp_context=context) as pool:
        futures = [pool.submit(_run_cell_worker, (cell, out, dict(kwargs))) for cell in cells]
        for future in futures:
            done(future.result())


class LadderProgress:
    """The entries of a ladder so far, written after each (`complete: false` until the last),
    so a stopped ladder keeps the cells it finished.

    Args:
        header: the ladder's fixed fields (format, command, envs, agents, episodes, seeds, goal).
        out: the ladder's folder.
        n_cells: how many cells the ladder has.
        on_cell: called with each entry as it finishes.
    """

    def __init__(
        self,
        header: Mapping[str, Any],
        out: Path,
        n_cells: int,
        on_cell: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.header, self.out, self.n_cells, self.on_cell = dict(header), out, n_cells, on_cell
        self.entries: list[dict[str, Any]] = []
        self.started = time.perf_counter()

    def summary(self, complete: bool) -> dict[str, Any]:
        """The ladder as it stands: the header, what `won` scores per env, the ranked cells."""
        entries = self.entries
        envs = [env for env in self.header["envs"] if any(e["env_id"] == env for e in entries)]
        return {
            **{k: v for k, v in self.header.items() if k in ("format", "command")},
            "complete": complete,
            **{k: v for k, v in self.header.items() if k not in ("format", "command")},
            "scoring": {  # the same for every agent of an env
                env: next(e["scoring"] for e in entries if e["env_id"] == env) for env in envs
            },
            "cells": rank([dict(e) for e in entries]),
            "seconds": time.perf_counter() - self.started,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }

    def done(self, entry: dict[str, Any]) -> None:
        """One more cell finished: record it, write the ladder so far, tell `on_cell`."""
        self.entries.append(entry)
        if len(self.entries) < self.n_cells:  # the cells so far, so a stopped ladder keeps them
            write_ladder(self.summary(complete=False), self.out)
        if self.on_cell is not None:
            self.on_cell(entry)


def write_ladder(ladder: Mapping[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write the ladder's three files atomically; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / name for name in OUTPUTS}
    atomic_write_text(paths["ladder.json"], json.dumps(ladder, indent=2, default=str))
    atomic_write_text(paths["ladder.md"], markdown(ladder))
    atomic_write_text(paths["ladder.html"], html_page(ladder))
    return paths


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


MARKDOWN_COLUMNS = (
    "env",
    "rank",
    "agent",
    "kind",
    "win rate",
    "95% CI",
    "mean return",
    "steps to win",
    "mean length",
    "episodes",
    "videos",
)


def markdown(ladder: Mapping[str, Any]) -> str:
    """The ladder as a Markdown table (one row per cell, env by env, best first), headed by the
    command that made it and what `won` scores.

    >>> cell = {"env_id": "E", "rank": 1, "agent": "random", "kind": "random", "win_rate": 0.5,
    ...         "win_ci95": [0.1, 0.9], "mean_return": 1.0, "steps_to_win": None, "episodes": 2,
    ...         "mean_length": 7.5, "videos": {}}
    >>> print(markdown({"cells": [cell], "command": "metabonk ladder E --agents random",
    ...                 "scoring": {"E": {"won_means": "the game's own win"}}}).splitlines()[-1])
    | E | 1 | random | random | 50% | 10%-90% | 1.00 | - | 7.5 | 2 | |
    """
    lines = []
    if ladder.get("command"):
        lines += [f"Made by `{ladder['command']}`.", ""]
    if ladder.get("complete") is False:
        lines += ["**Incomplete**: the cells evaluated so far (running, or stopped).", ""]
    for env_id, what in (ladder.get("scoring") or {}).items():
        lines.append(f"- {env_id}: `won` scores {what.get('won_means')}")
    if ladder.get("scoring"):
        lines.append("")
    lines.append("| " + " | ".join(MARKDOWN_COLUMNS) + " |")
    lines.append("|" + "---|" * len(MARKDOWN_COLUMNS))
    for c in ladder["cells"]:
        links = " ".join(
            f"[{label}]({c['videos'][label]})"
            for label in ("best", "worst")
            if label in c["videos"]
        )
        row = [*cell_fields(c), str(c["episodes"]), links]
        row[2] = row[2].replace("|", "\\|")
        lines.append("| " + " | ".join(row) + " |")
    notes = [
        f"- {c['agent']} on {c['env_id']}: {n}" for c in ladder["cells"] if (n := cell_note(c))
    ]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def cell_note(cell: Mapping[str, Any]) -> str | None:
    """What a replay's row needs said beside its figures: how much of its recording it played
    and the no-op steps after it (`agents.replay`); None for other rows.

    >>> cell_note({"replay": {"note": "replayed 5 of 5 recorded actions"}})
    'replayed 5 of 5 recorded actions'
    >>> cell_note({"rank": 1}) is None
    True
    """
    note = (cell.get("replay") or {}).get("note")
    return str(note) if note else None


def cell_fields(cell: Mapping[str, Any]) -> list[str]:
    """One cell's figures as text, in `MARKDOWN_COLUMNS` order up to "mean length" (the
    Markdown table and the CLI's table show the same text)."""
    low, high = cell["win_ci95"]
    return [
        str(cell["env_id"]),
        "-" if cell.get("rank") is None else str(cell["rank"]),
        str(cell["agent"]),
        str(cell.get("kind")),
        _pct(cell["win_rate"]),
        f"{_pct(low)}-{_pct(high)}",
        _num(cell["mean_return"]),
        _num(cell["steps_to_win"], 1),
        _num(cell.get("mean_length"), 1),
    ]


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; }
th, td { padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: left; }
th { cursor: pointer; user-select: none; background: #f4f4f4; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f4f4f4; padding: 1px 4px; }
"""

_SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById("ladder-data").textContent);
  var columns = [
    ["env_id", "env", false], ["rank", "rank", true], ["agent", "agent", false],
    ["kind", "kind", false], ["win_rate", "win rate", true], ["ci_low", "95% CI", true],
    ["mean_return", "mean return", true], ["steps_to_win", "steps to win", true],
    ["mean_length", "mean length", true], ["episodes", "episodes", true],
    ["videos", "videos", false]
  ];
  var rows = data.cells.map(function (c) {
    var r = Object.assign({}, c); r.ci_low = c.win_ci95[0]; r.ci_high = c.win_ci95[1]; return r;
  });
  function pct(v) { return Math.round(100 * v) + "%"; }
  function num(v, d) { return v === null || v === undefined ? "-" : v.toFixed(d); }
  function text(r, key) {
    if (key === "win_rate") return pct(r.win_rate);
    if (key === "ci_low") return pct(r.ci_low) + "\\u2013" + pct(r.ci_high);
    if (key === "mean_return") return num(r.mean_return, 2);
    if (key === "steps_to_win") return num(r.steps_to_win, 1);
    if (key === "mean_length") return num(r.mean_length, 1);
    return r[key] === null || r[key] === undefined ? "-" : String(r[key]);
  }
  var table = document.getElementById("ladder");
  var head = table.createTHead().insertRow();
  columns.forEach(function (col) {
    var th = document.createElement("th");
    th.textContent = col[1]; th.dataset.key = col[0];
    th.addEventListener("click", function () { sortBy(col[0], state.key === col[0] ? !state.desc : col[2]); });
    head.appendChild(th);
  });
  var body = table.createTBody();
  var state = { key: null, desc: false };
  function render() {
    body.innerHTML = "";
    rows.forEach(function (r) {
      var tr = body.insertRow(); tr.className = "cell";
      tr.dataset.env = r.env_id; tr.dataset.agent = r.agent;
      columns.forEach(function (col) {
        var td = tr.insertCell(); td.dataset.key = col[0];
        if (col[2]) td.className = "num";
        if (col[0] === "videos") {
          ["best", "worst"].forEach(function (label) {
            if (!r.videos[label]) return;
            var a = document.createElement("a");
            a.href = r.videos[label]; a.textContent = label; a.className = "video-" + label;
            a.title = "episode " + r.videos[label + "_episode"];
            td.appendChild(a); td.appendChild(document.createTextNode(" "));
          });
        } else { td.textContent = text(r, col[0]); }
      });
    });
    Array.prototype.forEach.call(head.cells, function (th) {
      th.className = th.dataset.key === state.key ? (state.desc ? "sorted-desc" : "sorted-asc") : "";
    });
    table.dataset.rendered = String(rows.length);
    table.dataset.sort = state.key ? (state.desc ? "-" : "") + state.key : "";
  }
  function value(r, key) {
    var v = r[key];
    return v === null || v === undefined ? -Infinity : v;
  }
  function sortBy(key, desc) {
    state.key = key; state.desc = desc;
    rows.sort(function (a, b) {
      var x = value(a, key), y = value(b, key);
      var c = typeof x === "string" ? String(x).localeCompare(String(y)) : x - y;
      return desc ? -c : c;
    });
    render();
  }
  var match = /sort=(-?)(\\w+)/.exec(location.hash);
  if (match) { sortBy(match[2], match[1] === "-"); } else { render(); }
})();
"""


def html_page(ladder: Mapping[str, Any]) -> str:
    """The ladder as one self-contained HTML page: the data inline as JSON, a script that
    renders it as a table sortable by any column (click a header; `#sort=-win_rate` in the URL
    sorts on load), inline style, no network. Each row links its best and worst video."""
    # JSON no HTML parser reads as markup: every <, > and & escaped (an agent path holding
    # `<!--<script>` would otherwise make the data block swallow the page's own script)
    data = (
        json.dumps(ladder, default=str)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )
    scoring = "".join(
        f"<li>{html.escape(env)}: <code>won</code> scores {html.escape(str(s.get('won_means')))}"
        "</li>"
        for env, s in (ladder.get("scoring") or {}).items()
    )
    command = ladder.get("command")
    made = f"<p>Made by <code>{html.escape(command)}</code></p>" if command else ""
    if ladder.get("complete") is False:
        made += "<p><strong>Incomplete</strong>: the cells evaluated so far.</p>"
    seeds = ladder.get("seeds") or []
    span = f"{seeds[0]}..{seeds[-1]}" if seeds else "-"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>metabonk ladder</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>metabonk ladder</h1>
{made}
<p>{len(seeds)} episodes per cell, seeds {span}; win rates
with 95% Wilson intervals; steps to win: mean length of won episodes; mean length: of all
episodes (survival, where the game is to last).</p>
<ul>{scoring}</ul>
<table id="ladder"></table>
<noscript>This page renders its table with JavaScript; the data is in ladder.json.</noscript>
<script type="application/json" id="ladder-data">{data}</script>
<script>{_SCRIPT}</script>
</body>
</html>
"""
