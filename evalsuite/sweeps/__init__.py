"""Sweeps: many models x many tasks, run here or as a Slurm job array (docs/sweeps.md)."""
