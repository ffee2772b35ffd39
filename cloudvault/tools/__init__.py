"""Clients of the systems outside vault: local GPUs and CUDA arch lists, dockerd, Slurm, the mirror's filesystem."""
