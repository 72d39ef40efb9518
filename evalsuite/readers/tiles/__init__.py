"""Tile-classification readers: datasets whose samples are labelled images (one class id each).

A dataset of image files on disk extends `FileListReader` (tiles/base.py): list `(paths, labels)` per split in
`self.splits` (and `self.split_groups` when patients or slides are known). A dataset stored otherwise (PCam's HDF5)
extends `readers.base.Reader` and serves `readers.base.LabelledImages`. A tile cohort listed in a CSV needs no
new reader: tile_csv.py reads it.
"""
