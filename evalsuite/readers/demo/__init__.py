"""The demo data shipped with evalsuite (evalsuite/data/hgsc_*): its readers and the builder of the demo slides.

hgsc_tiles.py, hgsc_seg.py and hgsc_counts.py read the shipped hgsc_nest crop (tasks demo, demo_seg,
demo_counts); demo_slides.py and
demo_slide_pieces.py build the offline demo whole-slide images on first use (`built:demo_slides`, task
demo_slide). A reader of a real dataset does not belong here: see tiles/, masks/ or slides/.
"""
