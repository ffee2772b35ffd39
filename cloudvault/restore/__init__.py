"""Rebuild what the mirror holds, verified: one subpackage per kind, conda envs and venvs (env/) and docker
images (docker/)."""
