"""metabonk_gym.skyemu."""
