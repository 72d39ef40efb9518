"""Where a run executes: device choice, CPU threads, compute precision policy, torchrun process groups."""
