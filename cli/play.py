"""`metabonk play` and `metabonk record`: an agent or a human plays; optionally into a Minari dataset.

Thin typer layer over `metabonk_gym.agents.record.play` / `record`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from metabonk_gym.cli.errors import fail, plain_console
from metabonk_gym.cli.evalopts import AGENT_OPT_OPTION, MAX_STEPS_OPTION, SERVER_OPTION
from metabonk_gym.cli.train import (
    ENV_HELP,
    ENV_KWARG_OPTION,
    INTEGRATION_OPTION,
    ROM_OPTION,
    TRUST_GAME_FOLDER_OPTION,
    TRUST_MODEL_OPTION,
    check_run_game_code,
    env_options,
    exit_if_stopped,
    guarded,
    overrides_from,
    parse_agent_options,
    trust_kwargs,
)
from metabonk_gym.cli.watch import WATCH_OPTION, live_watch
from rich.table import Table

from metabonk_gym.agents.human import KEY_MAP
from metabonk_gym.agents.many import play_many
from metabonk_gym.agents.record import play, record

console = plain_console()

AGENT_HELP = (
    "human (a window, keyboard), random, scripted (the game's expert), think, think:MODEL, a "
    "model PATH.zip, or a run directory of any trainer (train ppo/bc/appo/dreamer, curriculum, "
    "tune pbt)."
)


def _key_map() -> Table:
    """The keyboard's GBA buttons, for a human player.

    >>> _key_map().row_count > 8
    True
    """
    table = Table(title="keys")
    table.add_column("key")
    table.add_column("GBA button")
    for key, button in KEY_MAP.items():
        table.add_row(key, button)
    table.add_row("ESC / close window", "quit (the current episode ends)")
    return table


def _report(result: Any) -> None:
    table = Table(title="episodes")
    for column in ("episode", "seed", "return", "length", "won", "ended"):
        table.add_column(column)
    for e in result.episodes:
        ended = "stopped" if e.stopped else ("terminated" if e.terminated else "time limit")
        table.add_row(
            str(e.index), str(e.seed), f"{e.ret:.2f}", str(e.length), str(e.success), ended
        )
    console.print(table)
    for message in result.messages:
        console.print(message)


def play_command(
    env_id: str = typer.Argument(..., help=ENV_HELP),
    agent: str = typer.Option("human", help=AGENT_HELP),
    episodes: int = typer.Option(1, help="Episodes to play."),
    seed: int = typer.Option(0, help="Reset seed of the first episode (then +1 each)."),
    state: str | None = typer.Option(
        None, help="Start state (e.g. start, room1, wave3 or a .state file)."
    ),
    reward: str | None = typer.Option(None, help="Reward preset or file."),
    max_steps: int | None = MAX_STEPS_OPTION,
    config: Path | None = typer.Option(None, "--config", help="Config file (env keys)."),
    record_to: str | None = typer.Option(
        None, "--record", help="Record into this new Minari dataset id."
    ),
    window: bool | None = typer.Option(
        None, "--window/--no-window", help="Show the game (default: only for human)."
    ),
    agent_opt: list[str] | None = AGENT_OPT_OPTION,
    model: str | None = typer.Option(
        None, "--model", help="think: the strategist (M.gguf, policy.pt or oracle)."
    ),
    mmproj: Path | None = typer.Option(None, "--mmproj", help="think: the vision projector GGUF."),
    server: str | None = SERVER_OPTION,
    n_envs: int = typer.Option(
        1, "--n-envs", help="Games at once, one process each (agents; no window or dataset)."
    ),
    integration: Path | None = INTEGRATION_OPTION,
    rom: Path | None = ROM_OPTION,
    env_kwarg: list[str] | None = ENV_KWARG_OPTION,
    set_options: list[str] | None = typer.Option(
        None, "--set", help="Any config key: --set obs_type=rgb."
    ),
    trust_model: bool = TRUST_MODEL_OPTION,
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
    watch: str | None = WATCH_OPTION,
) -> None:
    """Play ENV: a human in a window (the key map is shown), or an agent, headless or watched."""
    agent_kwargs = parse_agent_options(agent_opt) | trust_kwargs(agent, trust_model)
    if model is not None:
        agent_kwargs["model_path"] = model
    if mmproj is not None:
        agent_kwargs["mmproj_path"] = str(mmproj)
    if server is not None:
        agent_kwargs["base_url"] = server
    if n_envs != 1 and (agent == "human" or window or record_to is not None):
        fail("--n-envs plays agents headless: drop --window/--record")

    if agent == "human":
        console.print(_key_map())
    flags = overrides_from(
        set_options,
        env_options(integration, rom, env_kwarg),
        state=state,
        reward=reward,
        max_episode_steps=max_steps,
    )
    check_run_game_code(agent, trust_game_folder, flags, config)
    live_watch(watch, None, f"play {agent} on {env_id}")
    if n_envs != 1:
        many = guarded(
            lambda: play_many(
                env_id,
                agent,
                n_envs,
                episodes=episodes,
                seed=seed,
                config_file=config,
                overrides=flags,
                agent_kwargs=agent_kwargs,
            )
        )
        _report(many)
        return
    result = guarded(
        lambda: play(
            env_id,
            agent,
            episodes=episodes,
            seed=seed,
            dataset_id=record_to,
            config_file=config,
            overrides=flags,
            window=window,
            agent_kwargs=agent_kwargs,
            require_display=True,
        )
    )
    _report(result)
    exit_if_stopped("the episode under way was saved")


def record_command(
    env_id: str = typer.Argument(..., help=ENV_HELP),
    dataset: str = typer.Option(
        ..., "--dataset", help="New Minari dataset id, e.g. metabonk/quest-expert-v0."
    ),
    agent: str = typer.Option("scripted", help=AGENT_HELP),
    episodes: int = typer.Option(10, help="Episodes to record."),
    seed: int = typer.Option(0, help="Reset seed of the first episode (then +1 each)."),
    state: str | None = typer.Option(None, help="Start state."),
    reward: str | None = typer.Option(None, help="Reward preset or file (stored rewards)."),
    max_steps: int | None = MAX_STEPS_OPTION,
    obs_type: str | None = typer.Option(
        None, "--obs-type", help="rgb or grayscale (default: the training config's)."
    ),
    downscale: int | None = typer.Option(
        None, help="1, 2, 4 or 8 (default: the training config's)."
    ),
    config: Path | None = typer.Option(None, "--config", help="Config file (env keys)."),
    window: bool = typer.Option(False, "--window/--no-window", help="Watch while recording."),
    noise: float = typer.Option(
        0.0, help="Fraction of random actions (DART; BC learns the agent's own choices)."
    ),
    agent_opt: list[str] | None = typer.Option(
        None, "--agent-opt", help="KEY=VALUE for the agent."
    ),
    integration: Path | None = INTEGRATION_OPTION,
    rom: Path | None = ROM_OPTION,
    env_kwarg: list[str] | None = ENV_KWARG_OPTION,
    set_options: list[str] | None = typer.Option(None, "--set", help="Any config key."),
    trust_model: bool = TRUST_MODEL_OPTION,
    trust_game_folder: bool = TRUST_GAME_FOLDER_OPTION,
    video: Path | None = typer.Option(
        None, "--video", help="Also write each episode as an mp4 into this folder."
    ),
) -> None:
    """Record demonstrations as a Minari dataset (observations, actions, rewards, ends, infos)."""
    flags = overrides_from(
        set_options,
        env_options(integration, rom, env_kwarg),
        state=state,
        reward=reward,
        max_episode_steps=max_steps,
        obs_type=obs_type,
        downscale=downscale,
    )
    check_run_game_code(agent, trust_game_folder, flags, config)
    result = guarded(
        lambda: record(
            env_id,
            agent,
            dataset,
            episodes=episodes,
            seed=seed,
            config_file=config,
            overrides=flags,
            window=window,
            agent_kwargs=parse_agent_options(agent_opt) | trust_kwargs(agent, trust_model),
            noise=noise,
            require_display=True,
            video_dir=video,
        )
    )
    _report(result)
    exit_if_stopped("the episode under way was saved")


def register(app: typer.Typer) -> None:
    app.command("play")(play_command)
    app.command("record")(record_command)
