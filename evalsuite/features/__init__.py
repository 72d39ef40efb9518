"""Stage 4, features: the RAM budget plan, extraction through the backbone, and the float16 cache."""
