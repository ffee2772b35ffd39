"""Rebuild what the mirror holds: conda envs (env.py) and docker images (docker.py), verified."""
