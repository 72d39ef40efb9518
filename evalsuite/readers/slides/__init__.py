"""Whole-slide readers: cohorts of slides tiled at the card's MPP (slide classification, survival).

A cohort with its own layout extends `SlideReader` (slides/base.py) and gives `records()`: one
`SlideRecord` (slide_manifest.py) per slide with its split. A cohort listed in a CSV needs no new reader:
slide_csv.py reads it. Also here: slide opening (wsi.py), tissue detection and the tile grid (tissue.py), and
the manifest checks (slide_manifest.py, slide_identity.py, patients.py).
"""
