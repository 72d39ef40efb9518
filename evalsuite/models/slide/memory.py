"""What one slide-encoder forward holds at its peak, from the tile count: for refusing a slide before any forward.

A module may define `forward_bytes(spec, tiles)` where its network needs another rule (attention over all tiles at
once grows with tiles squared); the rule below is the default: the float32 input rows and, per tile, ACTIVATION_WIDTHS
float32 vectors of the network's width alive at once (a transformer block's residual, normed input, q, k, v and a
4x-wide MLP hidden layer). TITAN and Prov-GigaPath's slide encoder have rules of their own. benchmarks/slide_encoders.py
measures the peak and prints it beside this estimate (docs/compute.md: at or above every measured peak but one).
"""

from evalsuite.models.slide.encoder import module_of

FLOAT32_BYTES = 4
ACTIVATION_WIDTHS = 12
# What the allocator keeps of freed blocks beside a forward's own peak (blocks under 32 MiB stay with the process):
# measured up to 2x TITAN's rule at 2,000 tiles and MADELEINE's 2.3x at 1,000 (benchmarks/slide_encoders.py).
ALLOCATOR_SLACK_BYTES = 256 * 1024**2


def forward_bytes(spec, tiles: int) -> int:
    """Estimated peak bytes of one forward of `spec`'s slide encoder over `tiles` tiles, beyond its weights."""
    own_rule = getattr(module_of(spec), "forward_bytes", None)
    if own_rule is not None:
        return int(own_rule(spec, tiles)) + ALLOCATOR_SLACK_BYTES
    width = int(spec.config.get("width", spec.embed_dim))
    return FLOAT32_BYTES * tiles * (spec.tile_dim + ACTIVATION_WIDTHS * width) + ALLOCATOR_SLACK_BYTES
