"""File helpers every stage uses: atomic writes with one-line fault errors, positioned .npy row reads."""
