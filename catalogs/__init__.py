"""Mirror definitions (TOML), installed as package data."""
