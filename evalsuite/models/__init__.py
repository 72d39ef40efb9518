"""Stage 3, the frozen backbone: registry of names, timm/hf-hub/checkpoint loading, pooling, transforms."""
