"""Integration layer: tests that start or reach a real service or tool (docker, slurm, ssh/s3, fuse, browser)."""
