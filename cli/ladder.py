"""`metabonk ladder ENV... --agents A,B,...`: every agent on the same seeds and starts, ranked.

Thin typer layer over `metabonk_gym.agents.ladder.run_ladder`: it writes `ladder.json`,
`ladder.md` and `ladder.html` (sortable, self-contained, each cell linking its best and worst
episode video) into `--out`, and prints the table.

>>> import typer
>>> from typer.testing import CliRunner
>>> app = typer.Typer()
>>> register(app)
>>> result = CliRunner().invoke(app, ["MetaBonk/BonkQuest-v0"])  # --agents is required
>>> result.exit_code, "--agents" in result.output
(2, True)
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import typer
from metabonk_gym.cli.evalopts import (
    DETERMINISTIC_OPTION,
    MAX_STEPS_OPTION,
    SEED_OPTION,
    goal_option,
)
from metabonk_gym.cli.train import (
    ENV_KWARG_OPTION,
    INTEGRATION_OPTION,
    ROM_OPTION,
    TRUST_GAME_FOLDER_OPTION,
    TRUST_MODEL_OPTION,
    check_run_game_code,
    env_options,
    guarded,
    overrides_from,
)
from rich.console import Console
from rich.table import Table

from metabonk_gym.agents.ladder import MARKDOWN_COLUMNS, cell_fields, parse_agents, run_ladder

console = Console(markup=False)  # print text as given: no markup in user text

AGENTS_HELP = (
    "Comma-separated agents: random, scripted (the game's expert), oracle (oracle strategist + "
    "directive follower), think:MODEL (M.gguf, a distilled policy.pt or a server URL, + "
    "follower), a model PATH.zip, a run directory of any trainer (train ppo/bc/appo/dreamer, "
    "curriculum, tune pbt), or replay:ARCHIVE.npz / replay:DATASET_ID (recorded actions played "
    "back: an explorer archive's best trajectory, a person's recorded play)."
)


def ladder_command(
    env_ids: list[str] = typer.Argument(..., help="Env ids, e.g. MetaBonk/BonkQuest-v0."),
    agents: str = typer.Option(..., "--agents", help=AGENTS_HELP),
    out: Path = typer.Option(
        Path("ladder"), "--out", help="Folder of ladder.json, ladder.md, ladder.html, videos/."
    ),
    episodes: int = typer.Option(10, help="Episodes per agent and env (seeds SEED..)."),
    seed: int = SEED_OPTION,
    goal: str = goal_option("game"),
    state: str | None = typer.Option(
        None, help="Start state of every agent (default: the env's training default)."
    ),
    max_steps: int | None = MAX_STEPS_OPTION,
    config: Path | None = typer.Option(None, "--config", help="Config file (env keys)."),
    video: bool = typer.Option(
        True, "--video/--no-video", help="Keep each cell's best and worst episode (mp4)."
    ),
    n_envs: int = typer.Option(1, "--n-envs", help="Cells evaluated at once, one process each."),
    deterministic: bool = DETERMINISTIC_OPTION,
    integration: Path | None = INTEGRATION_OPTION,
    rom: Path | None = ROM_OPTION,
    env_kwarg: list[str] | None = ENV_KWARG_OPTION,
    set_options: list[str] | None = typer.Option(
        None, "--set", help="Any config key for every cell: --set sticky_action_prob=0.25."
    ),
    trust_model: bool = TRUST_MODEL_OPTION,
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
    force: bool = typer.Option(False, "--force", help="Replace a ladder already in --out."),
) -> None:
    """Rank agents on envs: win rate (95% Wilson interval), mean return, steps to win."""
    flags = overrides_from(
        set_options,
        env_options(integration, rom, env_kwarg),
        state=state,
        max_episode_steps=max_steps,
    )
    specs = guarded(lambda: parse_agents(agents))
    for name in specs:  # a --config file's `wrappers:` is the user's stack
        check_run_game_code(name, trust_game_folder, flags, config)
    command = "metabonk " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["ladder"] else None

    def progress(cell: dict[str, Any]) -> None:
        console.print(
            f"{cell['env_id']}  {cell['agent']}: win rate {cell['win_rate']:.2f}, "
            f"mean return {cell['mean_return']:.2f}"
        )

    ladder = guarded(
        lambda: run_ladder(
            env_ids,
            specs,
            out,
            episodes=episodes,
            seed=seed,
            goal=goal,
            config_file=config,
            overrides=flags,
            videos=video,
            n_envs=n_envs,
            deterministic=deterministic,
            trust=trust_model,
            command=command,
            on_cell=progress,
            force=force,
        )
    )
    table = Table(title=f"ladder ({episodes} episodes each, --goal {goal})")
    shown = MARKDOWN_COLUMNS[: MARKDOWN_COLUMNS.index("mean length") + 1]
    for column in shown:
        table.add_column(column)
    for cell in ladder["cells"]:
        table.add_row(*cell_fields(cell))
    console.print(table)
    for cell in ladder["cells"]:
        if cell.get("note"):
            console.print(
                f"warning: {cell['agent']} on {cell['env_id']} is not ranked: {cell['note']}"
            )
        if (cell.get("replay") or {}).get("note"):
            console.print(f"{cell['agent']} on {cell['env_id']}: {cell['replay']['note']}")
    for env_id, what in ladder["scoring"].items():
        console.print(f"{env_id}: won scores {what['won_means']}")
    console.print(f"ladder: {out / 'ladder.html'} (and ladder.json, ladder.md)")


def register(app: typer.Typer) -> None:
    app.command("ladder")(ladder_command)
