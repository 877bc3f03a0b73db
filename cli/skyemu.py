"""`metabonk skyemu-peer` (the SkyEmu stand-in server) and `metabonk bench skyemu`.

>>> skyemu_peer.__doc__.split(" ")[:3]
['Serve', 'a', 'ROM']
"""

from __future__ import annotations

from pathlib import Path

import typer
from metabonk_gym.cli.bench import _print

from metabonk_gym.bench.figures import put_figures
from metabonk_gym.bench.skyemu_speed import figure_records, run
from metabonk_gym.gba.integration import Integration
from metabonk_gym.gba.skyemu_peer import serve


def skyemu_peer(
    rom: Path | None = typer.Argument(None, help="ROM to serve (default: the bundled game's)."),
    game: str = typer.Option(
        "BonkQuest", help="Bundled game whose ROM to serve when no ROM is given."
    ),
    port: int = typer.Option(8080, help="Port on 127.0.0.1 (0: a free one, printed)."),
) -> None:
    """Serve a ROM on the embedded mGBA core behind SkyEmu's HTTP control server protocol.

    A stand-in for `SkyEmu http_server PORT ROM` where SkyEmu is not installed: point an env at
    it with backend="skyemu", skyemu_url="http://127.0.0.1:PORT". See docs/skyemu.md.
    """
    if rom is None:
        rom = Integration.bundled(game).rom_path
    if not rom.is_file():
        raise typer.BadParameter(f"ROM file not found: {rom}")
    serve(rom, port)


def bench_skyemu(
    env_id: str = typer.Argument("MetaBonk/BonkQuest-v0", help="Env id to measure."),
    steps: int = typer.Option(500, help="Env steps per round."),
    rounds: int = typer.Option(
        3, help="Alternating embedded/SkyEmu rounds (medians are reported)."
    ),
    frameskip: int = typer.Option(4, help="Frames per env step."),
    skyemu_url: str | None = typer.Option(
        None, help="A running SkyEmu (default: start the test peer)."
    ),
    skyemu_binary: str | None = typer.Option(None, help="A SkyEmu program to start headless."),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures: Path | None = typer.Option(
        None, help="Put the figure into this record file (docs/figures/skyemu.json)."
    ),
) -> None:
    """Env steps per second over SkyEmu's HTTP server vs the embedded core, same process."""
    result = run(
        env_id,
        steps=steps,
        rounds=rounds,
        frameskip=frameskip,
        skyemu_url=skyemu_url,
        skyemu_binary=skyemu_binary,
    )
    command = f"metabonk bench skyemu {env_id}"
    _print(command, result, out)
    if figures is not None:
        command += f" --steps {steps} --rounds {rounds} --frameskip {frameskip}"
        put_figures(figures, figure_records(result), command=command)


def register(app: typer.Typer) -> None:
    """Add `skyemu-peer` to `app` (`bench skyemu` is in `metabonk_gym.cli.bench.BENCHES`)."""
    app.command("skyemu-peer")(skyemu_peer)
