"""Vision-language models (CLIP, QuiltNet, PLIP, CONCH, MUSK, KEEP): their registry entries (entries.py), image and
text towers, tokenizers and checkpoint adapters."""
