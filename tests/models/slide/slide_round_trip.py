"""What the slide encoders' round-trip tests share: a checkpoint in the published layout loaded through
build_slide_encoder twice (the file, and the folder it is in), embedding the same random tiles."""

import torch

from evalsuite.models.slide import encoder as slide_encoder


def embed_loaded_twice(name: str, path, tile_dim: int, tiles: int = 23):
    """(tiles, embedding from `path`, embedding from `path`'s folder), float32, without positions."""
    features = torch.randn(tiles, tile_dim, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        embedding = slide_encoder.build_slide_encoder(name, weights=str(path)).model(features, torch.zeros(tiles, 2), 512)
        again = slide_encoder.build_slide_encoder(name, weights=str(path.parent)).model(features, None, None)
    return features, embedding, again
