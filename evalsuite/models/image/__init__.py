"""Image encoders: the registry entries of pathology tile encoders (entries.py), their timm architecture and head,
and the checkpoint key renames that fit transformers-format weights to timm."""
