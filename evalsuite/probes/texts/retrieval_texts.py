"""The texts the text_retrieval probe ranks against the test images, chosen and checked before any image forward.

Which texts (docs/zeroshot.md, "Text-image retrieval"): a card whose reader has captions for the test images (the
tile_csv reader's `caption` column, or the column `reader.args.caption_column` names) uses them, one per image;
any other card uses its `zeroshot:` block's class texts, one prompt-ensembled embedding per class (the first
template set where the block has several: nothing is chosen on val). Both are encoded through the text cache
(evalsuite.probes.texts.text_cache), so a second run encodes nothing.
"""

import dataclasses

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.models.vision_language.towers import ImageToJoint
from evalsuite.probes import PROBES
from evalsuite.probes._validate import check_images_map_to_joint_space, check_text_tower
from evalsuite.probes.texts.class_texts import checked_prompt_sets, ensemble_class_embeddings
from evalsuite.probes.texts.prompt_checks import check_captions_fit
from evalsuite.probes.texts.text_cache import cached_text_embeddings
from evalsuite.probes.texts.text_retrieval import CAPTIONS, CLASS_TEXTS, check_ks_fit, checked_ks
from evalsuite.tasks.cards import PROMPTS_FIELD


@dataclasses.dataclass(frozen=True)
class RetrievalTexts:
    embeddings: np.ndarray  # float32 [texts, dim], L2-normalised
    source: str  # CAPTIONS or CLASS_TEXTS
    params: dict  # what the run's selected_params record about them
    # Maps the cached image rows (float32 batches) into the space of `embeddings` (models/vision_language/towers.py); the identity
    # where the cache holds the joint embedding.
    image_to_joint: ImageToJoint = dataclasses.field(default_factory=ImageToJoint)


def _reads_texts(recipe) -> bool:
    return getattr(PROBES[recipe.probe], "reads_retrieval_texts", False)


def with_retrieval_texts(recipes: list, card, reader, backbone, out_dir, device) -> list:
    """`recipes` with the texts in the context of those whose probe reads them; refuses a non-VLM model, a probe that
    does not map a model's cached rows into the joint space, a card without texts and a k above the test images
    before anything is extracted."""
    if not any(_reads_texts(r) for r in recipes):
        return recipes
    check_text_tower(backbone, "text_retrieval")
    test_images = len(reader.dataset("test", None).labels)
    for recipe in filter(_reads_texts, recipes):
        check_images_map_to_joint_space(PROBES[recipe.probe], recipe.probe, backbone)
        where = f"probe recipe {recipe.path}"
        check_ks_fit(checked_ks(recipe.params.get("ks", [1]), where), test_images, where)
    captions = reader.captions("test") if getattr(reader, "caption_column", None) else None
    texts = (_caption_texts(captions, reader, backbone, out_dir, device) if captions is not None
             else _class_texts(card, backbone, out_dir, device))
    texts = dataclasses.replace(texts, image_to_joint=backbone.text.image_to_joint)
    return [dataclasses.replace(r, context={"texts": texts}) if _reads_texts(r) else r for r in recipes]


def _normalised(rows) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _caption_texts(captions: list, reader, backbone, out_dir, device) -> RetrievalTexts:
    check_captions_fit(captions, _caption_places(reader, len(captions)), backbone)  # before any is encoded
    rows, key = cached_text_embeddings(out_dir, backbone, captions, device)
    return RetrievalTexts(_normalised(rows), CAPTIONS,
                          {"texts": CAPTIONS, "caption_column": reader.caption_column, "captions": len(captions),
                           "text_cache_key": key})


def _caption_places(reader, count: int) -> list:
    """Where each test caption is, for errors: its manifest line where the reader knows it."""
    manifest, lines = getattr(reader, "manifest_path", None), getattr(reader, "split_lines", {}).get("test")
    column = f"'{reader.caption_column}' of "
    if manifest is not None and lines is not None and len(lines) == count:
        return [f"tile manifest {manifest} line {line} ({column}a test tile)" for line in lines]
    return [f"test caption {index} ({column}the card's reader)" for index in range(count)]


def _class_texts(card, backbone, out_dir, device) -> RetrievalTexts:
    if not isinstance(card.extra.get(PROMPTS_FIELD), dict):
        raise EvalsuiteError(f"task card {card.path}: probe text_retrieval needs texts: a `zeroshot:` block (class "
                             "names and templates, docs/zeroshot.md) or test captions (a `caption` column in a "
                             "tile_csv manifest)")
    first, *others = checked_prompt_sets(card, backbone, "text_retrieval")
    rows, key = cached_text_embeddings(out_dir, backbone, first.texts, device)
    classes = ensemble_class_embeddings(rows, first.prompt_class, card.num_classes)
    return RetrievalTexts(_normalised(classes), CLASS_TEXTS,
                          {"texts": CLASS_TEXTS, "prompt_set": first.name, "prompts": len(first.texts),
                           "prompt_source": str(card.extra[PROMPTS_FIELD].get("source", "")), "text_cache_key": key,
                           **({"prompt_sets_not_used": [s.name for s in others]} if others else {})})
