"""Where a reproduction runs: local processes, a docker container, a Slurm job; one interface."""
