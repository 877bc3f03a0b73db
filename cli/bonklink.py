"""``metabonk bonklink-sim``: serve the stand-in arena game over BonkLink v1.

``cli/main.py`` calls :func:`register` on its Typer app.

>>> [choice.value for choice in FrameFormatChoice]
['jpeg', 'raw_rgb']
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import typer

from metabonk_gym.bench.bonklink_speed import figure_records, report, run
from metabonk_gym.bench.figures import put_figures
from metabonk_gym.bonklink import DEFAULT_PORT
from metabonk_gym.bonklink.player import HUMAN_PLAYERS
from metabonk_gym.bonklink.render import LOOKS
from metabonk_gym.bonklink.sim import BonkLinkSim, serve_here, serve_instances
from metabonk_gym.utils import check_number

__all__ = ["register"]


class FrameFormatChoice(str, Enum):
    """Frame encodings the plugin supports."""

    jpeg = "jpeg"
    raw_rgb = "raw_rgb"


def bench_bonklink(
    steps: int = typer.Option(6000, help="Lockstep env steps per round."),
    realtime_ticks: int = typer.Option(300, help="Ticks per realtime round."),
    frame_format: FrameFormatChoice = typer.Option(FrameFormatChoice.jpeg, help="Frame encoding."),
    rounds: int = typer.Option(2, help="Alternating env/bare-client rounds (best counts)."),
    figures: Path | None = typer.Option(
        None, help="Put the figures into this record file (docs/figures/bonklink.json)."
    ),
) -> None:
    """Megabonk env steps/s vs a bare protocol client (lockstep) and added latency (realtime)."""
    result = run(steps, realtime_ticks, frame_format.value, rounds)
    typer.echo(report(result))
    if figures is not None:
        command = f"metabonk bench bonklink --steps {steps} --realtime-ticks {realtime_ticks}"
        command += f" --frame-format {frame_format.value} --rounds {rounds}"
        put_figures(
            figures, figure_records(result), command=command, title="Megabonk over BonkLink"
        )


def bonklink_sim(
    port: int = typer.Option(DEFAULT_PORT, help="Port of the first instance."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (the plugin uses loopback)."),
    realtime: bool = typer.Option(
        True,
        "--realtime/--lockstep",
        help="Realtime pushes packets at --update-hz like the plugin; lockstep ticks once "
        "per action received (fast training).",
    ),
    frame_format: FrameFormatChoice = typer.Option(
        FrameFormatChoice.jpeg, help="Frame encoding (the plugin's FrameFormat)."
    ),
    plugin_stubs: bool = typer.Option(
        False,
        "--plugin-stubs",
        help="Send the deployed plugin's constants: health 100/100, no enemies, no options.",
    ),
    instances: int = typer.Option(
        1, min=1, help="Number of games, on ports port..port+n-1 (one process each)."
    ),
    update_hz: int = typer.Option(60, min=1, help="Ticks per second (the plugin's UpdateHz)."),
    jpeg_hz: int = typer.Option(
        10, min=0, help="Frames per second (the plugin's JpegHz); 0 sends no frames."
    ),
    seed: int | None = typer.Option(None, help="Seed of the first game (instance i: seed+i)."),
    stats: bool = typer.Option(
        True, "--stats/--no-stats", help="Send the MBST trailer (kills, XP, level)."
    ),
    input_snapshot: bool = typer.Option(
        False,
        "--input-snapshot",
        help="Append the HINP trailer (the applied input), like EnableInputSnapshot.",
    ),
    duration: float = typer.Option(0.0, help="Stop after this many seconds (0: run until ^C)."),
    human: str | None = typer.Option(
        None,
        help="A scripted person at the game's keyboard ('scripted'): plays whenever the "
        "client sends no action; with --input-snapshot its input is in the HINP trailer (for "
        "`metabonk record --agent human`). Realtime only.",
    ),
    speed: float = typer.Option(
        1.0,
        help="Realtime ticks this many times faster than --update-hz (game time unchanged).",
    ),
    look: str = typer.Option(
        "plain",
        help="How frames are drawn: plain, or detailed (textured ground scrolled smoothly, "
        "the character facing its run, its attack pose and shots, the ability's ring: the "
        "input visible as a game shows it, for learning from video).",
    ),
) -> None:
    """Run a headless Megabonk-like arena game serving BonkLink v1.

    A stand-in for Megabonk and its plugin, for tests and offline training: not the game.
    """
    check_number("--port", port, 0, 65535 - (instances - 1), integer=True)
    check_number("--duration", duration, 0, 10**9)
    mode = "realtime" if realtime else "lockstep"
    check_number("--speed", speed, 1e-3, 1000)
    if human is not None and (human not in HUMAN_PLAYERS or mode != "realtime"):
        raise typer.BadParameter(
            f"--human takes {', '.join(HUMAN_PLAYERS)} and plays in --realtime mode",
            param_hint="--human",
        )
    if look not in LOOKS:
        raise typer.BadParameter(f"--look takes {', '.join(LOOKS)}", param_hint="--look")
    kwargs: dict[str, Any] = {
        "look": look,
        "host": host,
        "mode": mode,
        "frame_format": frame_format.value,
        "plugin_stubs": plugin_stubs,
        "update_hz": update_hz,
        "jpeg_hz": jpeg_hz,
        "stats": stats,
        "input_snapshot": input_snapshot,
        "human": human,
        "speed": speed,
    }
    what = f"{mode}, {frame_format.value}{', plugin stubs' if plugin_stubs else ''}"
    run_for = duration if duration > 0 else None

    def announce(bound: int) -> None:
        typer.echo(f"bonklink-sim (stand-in game) listening on {host}:{bound} ({what})")

    if instances == 1:
        sim = BonkLinkSim(port=port, seed=seed, **kwargs)
        try:
            bound = sim.bind()
        except OSError as exc:
            typer.echo(f"bonklink-sim: cannot listen on {host}:{port}: {exc}", err=True)
            raise typer.Exit(1) from exc
        announce(bound)
        serve_here(sim, run_for)
        return
    if port == 0:
        raise typer.BadParameter(
            "--instances > 1 serves on port..port+n-1: give a base port, e.g. --port 5560",
            param_hint="--port",
        )
    try:
        serve_instances(port, instances, seed, run_for, announce, **kwargs)
    except OSError as exc:
        typer.echo(f"bonklink-sim: {exc}", err=True)
        raise typer.Exit(1) from exc


def register(app: typer.Typer) -> None:
    """Add the ``bonklink-sim`` command to ``app`` (``bench bonklink`` is in ``cli.bench.BENCHES``)."""
    app.command("bonklink-sim")(bonklink_sim)
