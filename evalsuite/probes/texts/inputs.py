"""The text inputs of a run's probes, built in one place: the class prompts' embeddings for the probes that read
class texts (zeroshot, mizero: probes/texts/class_texts.py) and the captions' or class texts' embeddings for
text_retrieval (probes/texts/retrieval_texts.py), each cached under the run's --out (probes/texts/text_cache.py).
The runner calls `with_text_inputs` once, after the backbone is built and before any image is extracted, so a bad
prompt or caption is refused before the expensive part."""

from evalsuite.probes.texts.class_texts import with_class_texts
from evalsuite.probes.texts.retrieval_texts import with_retrieval_texts


def with_text_inputs(recipes: list, card, reader, backbone, out_dir, device) -> list:
    """`recipes` with the text embeddings each reads in its `context` (unchanged for probes that read no text)."""
    recipes = with_class_texts(recipes, card, backbone, out_dir, device)
    return with_retrieval_texts(recipes, card, reader, backbone, out_dir, device)  # captions: the reader's
