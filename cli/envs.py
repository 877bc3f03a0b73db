"""`metabonk list`: the registered envs, their savestates and info variables."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table


def list_envs() -> list[dict]:
    """One row per registered MetaBonk env: id, game, states, info variables."""
    import metabonk_gym
    from metabonk_gym.gba.integration import Integration

    rows = []
    for env_id, spec in metabonk_gym.ENV_IDS.items():
        game = spec.get("kwargs", {}).get("game")
        if game:
            integ = Integration.bundled(game)
            rows.append(
                {
                    "id": env_id,
                    "game": game,
                    "states": integ.state_names(),
                    "info": integ.info_names,
                }
            )
        elif env_id.endswith("GBA-v0"):
            rows.append(
                {"id": env_id, "game": "your ROM (rom=, integration=)", "states": [], "info": []}
            )
        else:
            rows.append(
                {
                    "id": env_id,
                    "game": "Megabonk via BonkLink (host=, port=)",
                    "states": [],
                    "info": [],
                }
            )
    return rows


def register(app: typer.Typer) -> None:
    @app.command("list")
    def list_command() -> None:
        """List registered envs, their savestates and info variables."""
        table = Table(title="MetaBonk envs")
        table.add_column("id", no_wrap=True)  # whole, to copy: never folded mid-id
        for column in ("game", "states", "info variables"):
            table.add_column(column, overflow="fold")
        for row in list_envs():
            table.add_row(row["id"], row["game"], ", ".join(row["states"]), ", ".join(row["info"]))
        Console().print(table)
