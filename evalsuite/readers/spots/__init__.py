"""Spot-level readers: spatial transcriptomics, one H&E tile per spot with a target vector (e.g. the spot's gene
expression), as in HEST-Benchmark.

hest_files.py reads HEST's files (split CSVs, gene list, patch h5; the AnnData h5ad through hest_h5ad.py) with numpy
and h5py only. A reader of such a dataset extends `readers.base.Reader` and serves its own torch Dataset:
`readers.base.LabelledImages` does not fit, as it casts its labels to int64 class ids while a spot's target is a float
vector.
"""
