"""CLI layer: user journeys through `vault`, a file per command, run in-process on real archives."""
