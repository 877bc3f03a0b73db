"""`metabonk memory show|export|query` and `metabonk bench memory`: the long-term memory on the
command line, a thin layer over `metabonk_gym.memory.report` and `metabonk_gym.bench.memory_speed`.

Bad input is a one-line error and exit code 2 (through `metabonk_gym.cli.errors`):

>>> from typer.testing import CliRunner
>>> from metabonk_gym.cli.main import app
>>> result = CliRunner().invoke(app, ["memory", "show", "/no/such/run"])
>>> result.exit_code, "no memory database at /no/such/run" in result.output
(2, True)
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from metabonk_gym.cli.bench import _print
from metabonk_gym.cli.errors import plain_console
from rich.table import Table

from metabonk_gym.bench.figures import put_figures
from metabonk_gym.bench.memory_speed import figure_records
from metabonk_gym.bench.memory_speed import run as run_memory_bench
from metabonk_gym.memory.graph import KnowledgeGraph
from metabonk_gym.memory.report import memory_path, summary, write_map_png
from metabonk_gym.memory.store import MAX_ROWS

memory_app = typer.Typer(
    help="The thinking agent's long-term memory (a knowledge graph): show, export, query.",
    no_args_is_help=True,
)
console = plain_console()
RUN_HELP = "A run folder holding memory.lbdb, a memory database file, or a bolt:// URL."


def _open(run: str, user: str | None, password: str | None) -> KnowledgeGraph:
    where = memory_path(run)
    if isinstance(where, str):  # a Neo4j server
        auth = (user or "neo4j", password or "neo4j")
        return KnowledgeGraph(where, auth=auth)
    return KnowledgeGraph(where, read_only=True)


@memory_app.command("show")
def show(
    run: str = typer.Argument(..., help=RUN_HELP),
    png: Path | None = typer.Option(
        None, help="Where to write the map picture (default: memory_map.png beside the database)."
    ),
    cell: int = typer.Option(4, min=1, max=32, help="Pixels per tile in the map picture."),
    user: str | None = typer.Option(None, help="Neo4j user (with a bolt:// URL)."),
    password: str | None = typer.Option(None, help="Neo4j password (with a bolt:// URL)."),
) -> None:
    """Areas, quests and counts of a run's memory as tables, and a map PNG of what is known."""
    graph = _open(run, user, password)
    try:
        info = summary(graph)
        areas = Table(title=f"memory of {run}: areas")
        for column in ("world", "area", "visits", "known cells", "entities", "doors lead to"):
            areas.add_column(column)
        for a in info["areas"]:
            ents = ", ".join(f"{n} {k}" for k, n in sorted(a["entities"].items()))
            areas.add_row(
                str(a["world"]),
                str(a["number"]),
                str(a["visits"]),
                str(a["known_cells"]),
                ents,
                ", ".join(map(str, a["leads_to"])),
            )
        console.print(areas)
        quests = Table(title="quests")
        for column in ("priority", "quest", "status", "objectives done"):
            quests.add_column(column)
        for q in info["quests"]:
            done = sum(o["status"] == "done" for o in q["objectives"])
            quests.add_row(
                str(q["priority"]), q["title"], q["status"], f"{done}/{len(q['objectives'])}"
            )
        console.print(quests)
        console.print(
            "counts: " + ", ".join(f"{k} {v}" for k, v in info["counts"].items() if v),
            highlight=False,
        )
        if png is None:
            where = memory_path(run)
            png = (Path(where).parent if not isinstance(where, str) else Path(".")) / (
                "memory_map.png"
            )
        console.print(f"map: {write_map_png(graph, png, cell)}", highlight=False)
    finally:
        graph.close()


@memory_app.command("export")
def export(
    run: str = typer.Argument(..., help=RUN_HELP),
    out: Path = typer.Option(
        ..., help="The Cypher script to write (load it with cypher-shell -f)."
    ),
    user: str | None = typer.Option(None, help="Neo4j user (with a bolt:// URL)."),
    password: str | None = typer.Option(None, help="Neo4j password (with a bolt:// URL)."),
) -> None:
    """Write the memory as a Cypher script (one CREATE per line) that loads it into Neo4j."""
    graph = _open(run, user, password)
    try:
        n = graph.export_cypher(out)
    finally:
        graph.close()
    console.print(f"{n} statements written to {out}", highlight=False)


@memory_app.command("query")
def query(
    run: str = typer.Argument(..., help=RUN_HELP),
    cypher: str = typer.Argument(..., help="A Cypher query, e.g. MATCH (a:Area) RETURN a.id"),
    user: str | None = typer.Option(None, help="Neo4j user (with a bolt:// URL)."),
    password: str | None = typer.Option(None, help="Neo4j password (with a bolt:// URL)."),
    max_rows: int = typer.Option(
        MAX_ROWS, "--max-rows", min=1, max=10_000_000, help="Refuse a result of more rows."
    ),
) -> None:
    """Run a Cypher query on a run's memory; rows are printed as JSON lines.

    Queries only read (MATCH, UNWIND, WITH, RETURN, CALL ...: no COPY TO or EXPORT), return at
    most `--max-rows` rows and run within a deadline and a memory cap.
    """
    graph = _open(run, user, password)
    try:
        for row in graph.read_query(cypher, max_rows):
            print(json.dumps(row, default=str))
    finally:
        graph.close()


def bench_memory(
    episodes: int = typer.Option(10, min=2, help="Expert playthroughs timed for the write cost."),
    seeds: int = typer.Option(
        20, min=0, help="Seeds for steps-to-win with and without memory (0: skip)."
    ),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/memory.json)."
    ),
) -> None:
    """Memory write cost per step vs the env step, query latency p50/p95, and BonkQuest
    steps-to-win of a screen-limited strategist with memory vs without."""
    result = run_memory_bench(episodes, seeds)
    _print("metabonk bench memory", result, out)
    if figures is not None:
        command = f"metabonk bench memory --episodes {episodes} --seeds {seeds}"
        chosen = list(range(seeds)) if seeds else None
        put_figures(figures, figure_records(result), command=command, seeds=chosen)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
