"""The `metabonk` command (installed as metabonk_gym.cli): one module per command group.

Each module registers thin typer commands over library functions (`main.COMMAND_MODULES`), so
research code calls the same functions the shell does; the console script points at `main.app`.

>>> from importlib.metadata import entry_points
>>> [script.value for script in entry_points(group="console_scripts", name="metabonk")]
['metabonk_gym.cli.main:app']
"""
