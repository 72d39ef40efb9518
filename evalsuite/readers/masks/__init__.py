"""Segmentation readers: datasets of images with dense class masks, served as tiles with uint8 mask labels.

Extend `GridTilingReader` (masks/base.py) for whole images tiled on a grid with val carved from train (CoNSeP,
MoNuSAC): give CLASSES, TASK, CLASS_MAP and a `scan` returning one `GridImage` per image. Other layouts (PanNuke's fold
arrays) extend `SegmentationReader` there and fill `self.source` and `self.tiles` themselves.
"""
