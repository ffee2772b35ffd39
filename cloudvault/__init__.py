"""cloudvault: search, extract from, restore and re-run a research group's cloud backup."""

__version__ = "0.1.0"
