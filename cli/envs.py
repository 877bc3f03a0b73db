"""`metabonk list`: the registered envs, their savestates and info variables."""

from __future__ import annotations

from pathlib import Path

import typer
from metabonk_gym.cli.errors import plain_console
from metabonk_gym.cli.train import guarded
from metabonk_gym.rewards.presets import available_presets
from rich.table import Table

import metabonk_gym
from metabonk_gym.gamedata import GameData
from metabonk_gym.games import game_for
from metabonk_gym.gba.integration import Integration
from metabonk_gym.registration import env_traits


def list_envs() -> list[dict]:
    """One row per registered MetaBonk env: id, game, states, info variables (from its game folder
    and registration traits; no env is made).

    >>> [row["game"] for row in list_envs()][:2]
    ['BonkQuest', 'BonkArena']
    """
    rows = []
    for env_id in metabonk_gym.ENV_IDS:
        game = game_for(env_id)
        traits = env_traits(env_id)
        row: dict = {"id": env_id, "game": "", "states": [], "info": []}
        if game is None:
            row["game"] = "your ROM (rom=, integration=)"
        elif (game.folder / "data.json").is_file():  # an integration folder: states and RAM info
            integration = Integration.bundled(game.name)
            row.update(
                game=game.name, states=integration.state_names(), info=integration.info_names
            )
        else:
            row["game"] = f"{game.name} (host=, port=)" if traits.port_per_env else game.name
        rows.append(row)
    return rows


def folder_row(folder: Path) -> dict:
    """The `list` row of a user's game folder (`MetaBonk/GBA-v0 --integration FOLDER`), with its
    reward presets (the folder's and the generic ones)."""
    integration = Integration.from_folder(folder, check_hash=False)
    presets = ["default", *available_presets(GameData(folder).presets())]
    return {
        "id": "MetaBonk/GBA-v0",
        "game": f"{integration.name} (presets: {', '.join(presets)})",
        "states": integration.state_names(),
        "info": integration.info_names,
    }


def register(app: typer.Typer) -> None:
    @app.command("list")
    def list_command(
        integration: Path | None = typer.Option(
            None, "--integration", help="Show your game's folder instead (docs/new-game.md)."
        ),
    ) -> None:
        """List registered envs, their savestates and info variables."""
        rows = [guarded(lambda: folder_row(integration))] if integration else list_envs()
        table = Table(title="MetaBonk envs")
        table.add_column("id", no_wrap=True)  # whole, to copy: never folded mid-id
        for column in ("game", "states", "info variables"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(row["id"], row["game"], ", ".join(row["states"]), ", ".join(row["info"]))
        plain_console().print(table)
