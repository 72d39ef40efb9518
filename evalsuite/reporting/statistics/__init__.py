"""The statistics of a column from the stored predictions: intervals, rank intervals, best sets, --compare."""
