"""The `metabonk` command (installed as metabonk_gym.cli)."""
