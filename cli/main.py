"""The `metabonk` command: a thin typer layer over library functions research code can call.

`app` gathers the commands of each module named in `COMMAND_MODULES` (each has
`register(app)`; a name with no module is skipped), so a new command is one module and one name.

>>> import typer
>>> from typer.testing import CliRunner
>>> {"list", "play", "eval", "train", "bench"} <= set(typer.main.get_command(app).commands)
True
>>> result = CliRunner().invoke(app, ["list"])  # what `metabonk list` prints
>>> result.exit_code, "MetaBonk/BonkQuest-v0" in result.output
(0, True)
"""

from __future__ import annotations

import typer
from metabonk_gym.cli.errors import OneLineErrorsGroup, guard_commands

app = typer.Typer(
    name="metabonk",
    cls=OneLineErrorsGroup,  # bad command-line input: one `error:` line, exit code 2
    help="Gymnasium game envs (GBA, Megabonk) with training, evaluation and benchmarks.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


#: Each module has `register(app)`; the bench commands are listed in `metabonk_gym.cli.bench.BENCHES`.
COMMAND_MODULES = (
    "envs",
    "bench",
    "play",
    "train",
    "think",
    "finetune",
    "bonklink",
    "skyemu",
    "observe",
    "tune",
    "vector",
    "memory",
    "video",
    "world",
    "ladder",
    "advice",
    "watch",
    "integrate",
    "explore",
)


def _register_commands() -> None:
    import importlib
    import importlib.util

    for name in COMMAND_MODULES:
        module_name = f"metabonk_gym.cli.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).register(app)


_register_commands()
guard_commands(app)  # the one place a MetabonkError becomes one line and exit code 2

if __name__ == "__main__":
    app()
