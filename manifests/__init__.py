"""Metadata of the mirrors cloudvault knows, as TOML manifests (installed as package data)."""
