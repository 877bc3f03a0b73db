"""BonkLink v1: Megabonk over TCP."""
