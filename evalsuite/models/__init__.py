"""Stage 3, the frozen backbone: one registry of named models (registry.py), its entries grouped by kind (image/,
vision_language/), and what every kind shares: building (backbones.py, meta_build.py), checkpoints and hub files,
pooling, transforms, FLOPs."""
