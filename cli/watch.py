"""`metabonk watch DIR|DATASET` (the replay viewer), `--watch [HOST:]PORT` of the commands that
run envs (the live dashboard), and `metabonk bench watch` (what a viewer costs training).

A thin typer layer over `metabonk_gym.watch` (docs/watch.md). `live_watch(spec, root, label)`
is what a command calls before it builds its envs: it asks this process's envs to serve frames
on request and starts the dashboard in a process of its own; the command runs as before.

>>> from typer.testing import CliRunner
>>> from metabonk_gym.cli.main import app
>>> result = CliRunner().invoke(app, ["watch", "/no/such/dir"])
>>> result.exit_code, "not a directory" in result.output
(2, True)
>>> result = CliRunner().invoke(app, ["watch", ".", "--address", "0.0.0.0:0", "--token", ""])
>>> result.exit_code, "would let anyone in" in result.output
(2, True)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from metabonk_gym.bench.figures import put_figures
from metabonk_gym.bench.watch_speed import bench_watch_speed, figure_records
from metabonk_gym.training.datasets import datasets_root
from metabonk_gym.utils import atomic_write_text
from metabonk_gym.watch import LiveProcess, WatchServer, parse_address
from metabonk_gym.watch.server import WatchError

err_console = Console(stderr=True, markup=False)  # text as given

#: `--watch [HOST:]PORT` of every command that runs envs.
WATCH_OPTION: Any = typer.Option(
    None,
    "--watch",
    help="Watch the envs live in a browser at [HOST:]PORT (127.0.0.1 unless a host is given; "
    "another host needs the token in the printed URL). docs/watch.md.",
)


def live_watch(spec: str | None, root: Path | None = None, label: str = "") -> LiveProcess | None:
    """Start the live dashboard for `--watch SPEC` (None: nothing) before envs are built:
    envs built from now on serve frames while a viewer is connected; the dashboard runs in a
    process of its own and goes with this one."""
    if spec is None:
        return None
    host, port = parse_address(spec)
    live = LiveProcess(host, port, root, label).start()
    err_console.print(f"watch: {live.url}")
    return live


def _root_of(target: str) -> Path:
    """A directory, or a Minari dataset id (its folder in Minari's datasets root)."""
    path = Path(target).expanduser()
    if path.is_dir():
        return path
    if "/" in target or target.count("-v"):
        try:
            candidate = datasets_root() / target
        except ImportError:  # minari not installed
            candidate = None
        if candidate is not None and candidate.is_dir():
            return candidate
    raise WatchError(f"{target} is not a directory (nor a local Minari dataset id)")


def watch_command(
    target: str = typer.Argument(
        ".",
        help="A run directory, eval --video folder, think log folder, Minari dataset "
        "(folder or id), ladder folder: anything below it is browsable.",
    ),
    address: str = typer.Option(
        "127.0.0.1:8765", "--address", help="[HOST:]PORT to listen on (port 0: any free one)."
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        help="Access token, 16 characters or more (default: none on 127.0.0.1, a random one "
        "elsewhere).",
    ),
    allow_host: list[str] = typer.Option(
        [],
        "--allow-host",
        help="A host name browsers may reach the dashboard by, beside its address, localhost "
        "and this machine's name (a DNS name, a proxy's); repeatable. Others get 421.",
    ),
    seconds: float | None = typer.Option(
        None, "--seconds", help="Stop after this many seconds (default: until Ctrl-C)."
    ),
) -> None:
    """Browse a directory's replays and training curves in the browser (read-only)."""
    root = _root_of(target)
    host, port = parse_address(address)
    server = WatchServer(
        root, None, host=host, port=port, token=token, allowed_hosts=tuple(allow_host)
    ).start()
    typer.echo(f"watch: {server.url}  (Ctrl-C stops)")
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def bench_watch(
    env_id: str = typer.Argument("MetaBonk/BonkQuest-v0", help="The env to train on."),
    n_envs: int = typer.Option(16, "--n-envs", help="Training envs."),
    rounds: int = typer.Option(5, help="Alternating rounds of each setting."),
    seconds: float = typer.Option(4.0, help="Seconds per round."),
    out: Path | None = typer.Option(None, "--out", help="Also write the result as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/watch.json)."
    ),
) -> None:
    """Training env steps/s with one live viewer connected vs no watch at all, in one run."""
    result = bench_watch_speed(env_id, n_envs=n_envs, rounds=rounds, seconds=seconds)
    text = json.dumps(result, indent=2)
    typer.echo(text)
    if out is not None:
        atomic_write_text(out, text)
    if figures is not None:
        command = f"metabonk bench watch {env_id} --n-envs {n_envs} --rounds {rounds}"
        put_figures(figures, figure_records(result), command=f"{command} --seconds {seconds:g}")


def register(app: typer.Typer) -> None:
    app.command("watch")(watch_command)
