"""`metabonk integrate ...`, `metabonk ram ...`, `metabonk tiles ...`: bring your own ROM.

A thin layer over `metabonk_gym.integrate`: a game folder from a ROM, a saved RAM search
(filters, undo, candidates with their history), live watches, suggestions from scripted
probes, tile classes and start states. Bad input is one line and exit code 2, the session
untouched:

>>> from typer.testing import CliRunner
>>> from metabonk_gym.cli.main import app
>>> result = CliRunner().invoke(app, ["integrate", "new", "/no/such.gba", "/no/such/folder"])
>>> result.exit_code, "ROM file not found: /no/such.gba" in result.output
(2, True)
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path

import typer
from metabonk_gym.cli.bench import _print
from metabonk_gym.cli.errors import plain_console
from rich.console import Console
from rich.live import Live
from rich.table import Table

from metabonk_gym.agents.human import PlayWindow, display_problem
from metabonk_gym.bench.figures import invoked_command, put_figures
from metabonk_gym.bench.integrate_speed import figure_records as integrate_records
from metabonk_gym.bench.integrate_speed import run as run_integrate_bench
from metabonk_gym.gba.buttons import buttons_to_mask
from metabonk_gym.gba.integration import MULTIBOOT_GUESS_LIMIT
from metabonk_gym.integrate import (
    IntegrateError,
    Machine,
    RamSearch,
    Watcher,
    add_variable,
    collect_tiles,
    folder_variables,
    label_tiles,
    new_game_folder,
    parse_filter,
    parse_script,
    parse_watch,
    rank,
    read_rom,
    region_spans,
    run_probes,
    save_start,
    start_state,
    view_type,
)
from metabonk_gym.utils import atomic_write_text

integrate_app = typer.Typer(
    help="Bring your own ROM: a game folder, tile classes, start states.", no_args_is_help=True
)
ram_app = typer.Typer(
    help="RAM search, watch and suggestions for a game folder's data.json.", no_args_is_help=True
)
search_app = typer.Typer(help="Start a RAM search session.", no_args_is_help=True)
tiles_app = typer.Typer(
    help="Name the tile groups `integrate tiles` found (tiles.json).", no_args_is_help=True
)
console = plain_console()

FOLDER = typer.Argument(..., help="The game folder (made by metabonk integrate new).")
INPUTS_HELP = "An input script played first, e.g. 'wait 600; START 10; RIGHT+A 8'."
SESSION_HELP = "The session folder (default FOLDER/ram-session)."
#: Where the RAM tools begin: the folder's default start (metadata.json), another, or power-on.
START = typer.Option(
    None, "--start", help="Begin from this start state of the folder (default: its default start)."
)
POWER_ON = typer.Option(False, "--power-on", help="Begin from power-on, not the default start.")
#: Seconds between two looks at a SkyEmu someone plays.
WATCH_POLL_S = 0.1


def _play_window(  # noqa: ANN202
    title: str,
    watcher: Watcher | None = None,
    on_frame: Callable[[Machine, int], None] | None = None,
    every: int = 4,
):
    """A callable that lets a human play a machine in a window until it is closed (the watch's
    values on the status line; `on_frame(machine, buttons)` every `every` frames)."""
    problem = display_problem()
    if problem is not None:
        raise IntegrateError(
            f"--play needs a window you can see, but {problem}; play on a desktop, or give "
            "--inputs SCRIPT (e.g. 'RIGHT 16; wait 30')"
        )

    def play(machine: Machine) -> None:
        window = PlayWindow(title=title, fps=60.0)
        while not window.closed:
            window.pump()
            buttons = buttons_to_mask(window.buttons())
            machine.run([(buttons, 1)])
            if on_frame is not None and machine.frames % every == 0:
                on_frame(machine, buttons)
            status = ""
            if watcher is not None:
                if on_frame is None:
                    watcher.sample(machine)
                status = " ".join(f"{r['name']}={r['value']}" for r in watcher.rows())
            window.show(machine.screen(), status)

    return play


# ---------------------------------------------------------------------- integrate
@integrate_app.command("new")
def new(
    rom: Path = typer.Argument(..., help="Your GBA ROM (.gba)."),
    folder: Path = typer.Argument(..., help="The game folder to write (new or empty)."),
    name: str | None = typer.Option(None, help="The game's name (default: from the ROM header)."),
) -> None:
    """A game folder from a ROM that `metabonk play MetaBonk/GBA-v0 --integration FOLDER` runs."""
    made = new_game_folder(rom, folder, name)
    extension = json.loads((made / "metabonk.json").read_text())
    if (made / "rom.gba").stat().st_size <= MULTIBOOT_GUESS_LIMIT:
        console.print(
            "note: a ROM of 256 KiB or less may look like a multiboot image to mGBA 0.7, so the "
            "env runs a copy padded with 0xFF to 512 KiB (rom.gba stays as it is)"
        )
    console.print(f"wrote {made}: {extension['name']} ({read_rom(made / 'rom.gba').describe()})")


@integrate_app.command("state")
def state(
    folder: Path = FOLDER,
    name: str = typer.Argument(..., help="The start's name (FOLDER/NAME.state)."),
    inputs: str = typer.Option(..., help="The input script played from power-on."),
    default: bool = typer.Option(False, help="Also make it metadata.json's default start."),
    from_: str | None = typer.Option(
        None, "--from", help="Play from this start state of the folder instead of power-on."
    ),
    poke: list[str] = typer.Option(
        [], help="VAR=VALUE: set a data.json variable first (with --from), e.g. a level number."
    ),
    force: bool = typer.Option(False, "--force", help="Replace FOLDER/NAME.state if it exists."),
) -> None:
    """Play an input script from power-on (or --from a start) and save a named, checksummed
    start state."""
    pokes = {}
    for item in poke:
        variable, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise IntegrateError(f"--poke {item!r}: write VAR=VALUE with an integer VALUE")
        pokes[variable] = int(value)
    if pokes and from_ is None:
        raise IntegrateError("--poke sets variables in a running game: give --from START too")
    path = save_start(
        folder, name, inputs, make_default=default, start=from_, pokes=pokes, force=force
    )
    console.print(f"wrote {path} (state={name!r} starts there)")


@integrate_app.command("tiles")
def tiles(
    folder: Path = FOLDER,
    inputs: str | None = typer.Option(None, help="Play this script instead of the probes."),
    play: bool = typer.Option(False, help="Play in a window (after --inputs) until you close it."),
    start: str | None = START,
    power_on: bool = POWER_ON,
    every: int = typer.Option(4, min=1, help="Look at the screen every N frames."),
    sheet: Path | None = typer.Option(
        None, help="The contact sheet PNG (default FOLDER/tiles.png)."
    ),
) -> None:
    """Collect the 8x8 background tiles the game shows, group them, write a contact sheet with
    group ids and FOLDER/tile_groups.json (walkability guessed where the player moved)."""

    def in_window(machine: Machine, observe: Callable[[Machine, int], None]) -> None:
        _play_window("integrate tiles", None, observe, every)(machine)

    if play:
        _play_window("integrate tiles")  # refuses in one line without a display, before playing
    result = collect_tiles(
        folder,
        inputs=inputs,
        start=start,
        every=every,
        power_on=power_on,
        sheet=sheet,
        play=in_window if play else None,
    )
    console.print(
        f"{result['tiles']} distinct tiles in {result['groups']} groups; contact sheet {result['sheet']}; "
        f"name them: metabonk tiles label {folder} ID=CLASS ..."
    )


# ---------------------------------------------------------------------- ram
@search_app.command("start")
def search_start(
    folder: Path = FOLDER,
    inputs: str | None = typer.Option(None, help=INPUTS_HELP),
    state_file: Path | None = typer.Option(None, "--state", help="Start from this savestate."),
    backend: str = typer.Option("embedded", help="embedded (the mGBA core) or skyemu."),
    skyemu_url: str | None = typer.Option(
        None, help="The SkyEmu HTTP control server (backend skyemu)."
    ),
    region: list[str] = typer.Option(
        ["ewram", "iwram"], help="Memory regions (ewram iwram io vram oam palette)."
    ),
    type_: list[str] = typer.Option(
        [], "--type", help="Value types (default all: u8 .. s32, BCD, both endians)."
    ),
    session: Path | None = typer.Option(None, help=SESSION_HELP),
    start: str | None = START,
    power_on: bool = POWER_ON,
) -> None:
    """Snapshot RAM: the first step of a search (from the folder's default start, if it has one)."""
    search = RamSearch.start(
        folder,
        backend=backend,
        skyemu_url=skyemu_url,
        regions=region,
        types=type_ or None,
        inputs=inputs,
        state_file=state_file,
        path=session,
        start=start,
        power_on=power_on,
    )
    console.print(
        f"search started at {search.path}: {search.left:,} candidates ({search.labels[-1]})"
    )


@ram_app.command("filter")
def filter_(
    folder: Path = FOLDER,
    op: str = typer.Argument(
        ..., help="changed unchanged increased decreased eq ne lt gt range delta (or == != < >)."
    ),
    values: list[str] = typer.Argument(
        None, help="The filter's numbers (eq 5, range 1 9, delta -1)."
    ),
    inputs: str | None = typer.Option(None, help="Play this script, then snapshot."),
    state_file: Path | None = typer.Option(
        None, "--state", help="Load this savestate, then snapshot."
    ),
    play: bool = typer.Option(False, help="Play in a window until you close it, then snapshot."),
    session: Path | None = typer.Option(None, help=SESSION_HELP),
) -> None:
    """Keep the candidates for which the filter holds (a change filter takes a new snapshot)."""
    flt = parse_filter(op, values or [])
    search = RamSearch.load(folder, session)
    left = search.filter(flt, inputs, state_file, _play_window("ram filter") if play else None)
    _show_candidates(search, 10)
    console.print(f"{flt}: {left:,} candidates, {search.addresses_left():,} addresses left")


def _show_candidates(search: RamSearch, limit: int) -> None:
    rows = search.candidates(limit=limit)
    if not rows:
        return
    table = Table(title="candidates (value at each snapshot)")
    for column in ("address", "type", "history"):
        table.add_column(column)
    for c in rows:
        table.add_row(f"0x{c.address:08X}", c.type, " -> ".join(map(str, c.history[-8:])))
    console.print(table)


@ram_app.command("list")
def list_(
    folder: Path = FOLDER,
    limit: int = typer.Option(20, min=1, help="Rows to show."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    session: Path | None = typer.Option(None, help=SESSION_HELP),
) -> None:
    """The candidates left, one type per address, with their value history."""
    search = RamSearch.load(folder, session)
    if as_json:
        rows = [
            {"address": c.address, "type": c.type, "history": c.history}
            for c in search.candidates(limit)
        ]
        console.print_json(
            json.dumps(
                {"left": search.left, "addresses": search.addresses_left(), "candidates": rows}
            )
        )
        return
    _show_candidates(search, limit)
    console.print(f"{search.addresses_left():,} addresses left after {len(search.steps)} filter(s)")


@ram_app.command("undo")
def undo(
    folder: Path = FOLDER, session: Path | None = typer.Option(None, help=SESSION_HELP)
) -> None:
    """Take the last filter back."""
    search = RamSearch.load(folder, session)
    left = search.undo()
    console.print(f"undone: {left:,} candidates")


@ram_app.command("add")
def add(
    folder: Path = FOLDER,
    name: str = typer.Argument(..., help="The variable's name in data.json (e.g. hp)."),
    address: str | None = typer.Argument(
        None, help="Bus address (0x02000010); default: the search's one address left."
    ),
    type_: str | None = typer.Argument(
        None, help="u8 s8 u16 s16 u32 s32 bcd8 ... (default: the candidate's)."
    ),
    session: Path | None = typer.Option(None, help=SESSION_HELP),
    contract: bool = typer.Option(
        False,
        help="Allow the names the env reads as an episode's result (won, lost): a value that "
        "is not 0 counts the episode as won or lost.",
    ),
) -> None:
    """Write a variable into FOLDER/data.json (checked: an address in RAM, a known type)."""
    if address is None:
        found = RamSearch.load(folder, session).sole_candidate()
        where, kind = found.address, found.type
    else:
        try:
            where = int(address, 0)
        except ValueError:
            raise IntegrateError(
                f"address {address!r} is not a number: write it as 0x02000010"
            ) from None
        kind = view_type(type_ or "u8")
    add_variable(folder, name, where, kind, contract=contract)
    console.print(f"data.json: {name} = 0x{where:08X} {kind}")


@ram_app.command("watch")
def watch(
    folder: Path = FOLDER,
    what: list[str] = typer.Argument(
        None, help="Variables of data.json or ADDR:TYPE (default: all of data.json)."
    ),
    inputs: str | None = typer.Option(None, help="Play this script headless, updating the table."),
    play: bool = typer.Option(False, help="Play in a window; the table updates live."),
    every: int = typer.Option(4, min=1, help="Update every N frames."),
    log: Path | None = typer.Option(None, help="Write every sample as JSON lines here."),
    svg: Path | None = typer.Option(None, help="Save the last view as an SVG picture."),
    session: Path | None = typer.Option(None, help="Start where this search session stands."),
    backend: str = typer.Option(
        "embedded", help="embedded, or skyemu: watch a SkyEmu you play in."
    ),
    skyemu_url: str | None = typer.Option(
        None, help="The SkyEmu HTTP control server (backend skyemu)."
    ),
    seconds: float | None = typer.Option(
        None, min=0, help="SkyEmu: watch this long (default until Ctrl-C)."
    ),
    start: str | None = START,
    power_on: bool = POWER_ON,
) -> None:
    """Values live while the game plays (a window, an input script with --inputs, or SkyEmu)."""
    variables = folder_variables(folder)
    watched = [parse_watch(w, variables) for w in (what or list(variables))]
    if not watched:
        raise IntegrateError(
            f"nothing to watch: {folder}/data.json has no variables; name ADDR:TYPE"
        )
    if not inputs and not play and backend != "skyemu":
        raise IntegrateError(
            "ram watch plays the game: give --inputs SCRIPT or --play (or --backend skyemu)"
        )
    steps = parse_script(inputs) if inputs else []
    if session is not None:
        search_state = RamSearch.load(folder, session).state
    elif backend == "embedded":
        search_state, _ = start_state(folder, start, power_on)
    else:
        search_state = None
    watcher = Watcher(watched)
    if play:
        _play_window("ram watch")  # refuses in one line without a display, before anything opens
    lines: list[str] = []
    with (
        Machine.open(folder / "rom.gba", backend, skyemu_url, state=search_state) as machine,
        Live(watcher.table(), console=console, refresh_per_second=10) as live,
    ):

        def on_frame(m: Machine, buttons: int) -> None:
            values = watcher.sample(m)
            lines.append(
                json.dumps(
                    {
                        "frame": m.frames,
                        "buttons": buttons,
                        "values": dict(zip([w.name for w in watched], values)),
                    }
                )
            )
            live.update(watcher.table(f"ram watch: frame {m.frames}"))

        watcher.sample(machine)
        machine.run(steps, on_frame=on_frame, every=every)
        if play:
            _play_window("ram watch", watcher, on_frame, every)(machine)
            live.update(watcher.table(f"ram watch: frame {machine.frames}"))
        if machine.kind == "skyemu" and not inputs:  # the user plays in SkyEmu's window
            end = None if seconds is None else time.monotonic() + seconds
            try:
                while end is None or time.monotonic() < end:
                    on_frame(machine, 0)
                    time.sleep(WATCH_POLL_S)
            except KeyboardInterrupt:
                pass
    if log is not None:
        atomic_write_text(log, "\n".join(lines) + "\n")
    if svg is not None:
        view = Console(file=io.StringIO(), record=True, width=100, markup=False)
        view.print(watcher.table(f"ram watch: frame {machine.frames}"))
        atomic_write_text(svg, view.export_svg(title="metabonk ram watch"))


@ram_app.command("suggest")
def suggest(
    folder: Path = FOLDER,
    inputs: str | None = typer.Option(
        None,
        help="Play this script from the folder's default start first (default: where the "
        "session stands, else the default start).",
    ),
    top: int = typer.Option(3, min=1, help="Addresses per role."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    add_: list[str] = typer.Option(
        [],
        "--add",
        help="ROLE=NAME: write the best address of ROLE (x, y, frames, button_a) to data.json as NAME.",
    ),
    session: Path | None = typer.Option(None, help=SESSION_HELP),
    start: str | None = START,
    power_on: bool = POWER_ON,
) -> None:
    """Probe the game (hold each direction, press A, wait) and rank addresses that follow the
    player's x/y, count frames or change with A."""
    where = session if session is not None else folder / "ram-session"
    from_session = start is None and not power_on and inputs is None
    if from_session and (where / "session.json").is_file():
        state_bytes = RamSearch.load(folder, session).state
    else:
        state_bytes, _ = start_state(folder, start, power_on)
    spans = region_spans(["ewram", "iwram"])
    with Machine.open(folder / "rom.gba", state=state_bytes) as machine:
        machine.run(parse_script(inputs) if inputs else [])
        snaps, held, frames = run_probes(machine, spans)
    ranked = rank(snaps, held, frames, spans, top=top)
    for pair in add_:
        role, sep, name = pair.partition("=")
        if not sep or role not in ranked:
            raise IntegrateError(
                f"--add {pair!r}: write ROLE=NAME with ROLE one of {', '.join(ranked)}"
            )
        if not ranked[role] or ranked[role][0].score <= 0:
            raise IntegrateError(f"--add {pair!r}: no address follows {role} in these probes")
        best = ranked[role][0]
        add_variable(folder, name, best.address, best.type)
        console.print(f"data.json: {name} = 0x{best.address:08X} {best.type} (best {role})")
    if as_json:
        out = {
            role: [{"address": s.address, "type": s.type, "score": s.score} for s in rows]
            for role, rows in ranked.items()
        }
        console.print_json(json.dumps(out))
        return
    table = Table(title="ram suggest: addresses by what they follow")
    for column in ("role", "rank", "address", "type", "score", "values after each probe"):
        table.add_column(column)
    for role, rows in ranked.items():
        for i, s in enumerate(rows, 1):
            table.add_row(
                role,
                str(i),
                f"0x{s.address:08X}",
                s.type,
                f"{s.score:g}",
                " ".join(map(str, s.history[:10])),
            )
    console.print(table)


# ---------------------------------------------------------------------- tiles
@tiles_app.command("label")
def label(
    folder: Path = FOLDER,
    labels: list[str] = typer.Argument(
        ..., help="ID=CLASS pairs (group ids of the contact sheet)."
    ),
) -> None:
    """Name tile groups: writes FOLDER/tiles.json (classes by tile id) and metabonk.json tile_classes."""
    written = label_tiles(folder, labels)
    console.print(f"tiles.json: {written['tiles']} tiles in {written['classes']} classes")


def bench_integrate(
    steps: int = typer.Option(20, help="Timed filter steps of each kind."),
    figures: bool = typer.Option(
        True, help="Also run the scripted searches on relaid ROMs (needs the toolchain)."
    ),
    out: Path | None = typer.Option(None, help="Write the figures as JSON here."),
    figures_file: Path | None = typer.Option(
        None,
        "--figures-file",
        help="Put the figures into this record file (docs/figures/integrate.json).",
    ),
) -> None:
    """RAM-search step time vs a per-address Python loop, and the bring-your-own-ROM search figures."""
    result = run_integrate_bench(steps=steps, figures=figures)
    _print("metabonk bench integrate", result, out)
    if figures_file is not None:
        put_figures(
            figures_file,
            integrate_records(result),
            command=invoked_command(),
            seeds=[1, 2] if figures else None,
        )


def register(app: typer.Typer) -> None:
    ram_app.add_typer(search_app, name="search")
    app.add_typer(integrate_app, name="integrate")
    app.add_typer(ram_app, name="ram")
    app.add_typer(tiles_app, name="tiles")
