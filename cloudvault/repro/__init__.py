"""Replay recorded experiments from recipes and compare the new outputs with the recorded ones."""
