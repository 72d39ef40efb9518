"""Probes on dense token grids ([N, h, w, D]): the segmentation heads."""
