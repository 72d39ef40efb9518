"""A card's zero-shot prompts and the class text embeddings the zeroshot probe compares images with.

A tile or slide classification card may carry a `zeroshot:` block (docs/zeroshot.md):

    zeroshot:
      source: where its class names and templates come from (CONCH's prompt file, CLIP-style, our own)
      class_names: {class: [name, ...]}          # one or more names per card class
      templates: [template, ...]                 # each with one CLASSNAME, as CONCH writes them
      # or several sets, val choosing between them:  templates: {set_name: [template, ...], ...}

A class's embedding is prompt ensembling as CLIP, CONCH and TITAN do it: every name x template prompt is encoded,
each embedding L2-normalised, averaged over names and templates, and the mean normalised again. A model whose text
tower says `class_rule = "sum_prompt_probabilities"` (PRISM's `zero_shot`) keeps every prompt's normalised
embedding instead: the probe takes a softmax over all prompts and sums each class's probabilities.

The block is checked before any text or image forward: an unknown key (a typo would drop the user's prompts), a
`class_names` key that is no class, an empty template set; then, with the model's tokenizer, a prompt longer than
its text context and two classes with the same prompts (probes/texts/prompt_checks.py).
"""

import dataclasses

import numpy as np

from evalsuite.errors import EvalsuiteError
from evalsuite.models.vision_language.towers import ImageToJoint
from evalsuite.probes import PROBES
from evalsuite.probes._validate import check_images_map_to_joint_space, check_text_tower
from evalsuite.probes.texts.prompt_checks import check_prompt_set
from evalsuite.probes.texts.text_cache import cached_text_embeddings
from evalsuite.probes.texts.zeroshot import ENSEMBLE, ZERO_SHOT
from evalsuite.tasks.cards import PROMPT_KEYS, PROMPTS_FIELD

PLACEHOLDER = "CLASSNAME"


@dataclasses.dataclass(frozen=True)
class PromptSet:
    name: str
    texts: list  # every prompt, class by class, name by name, template by template
    prompt_class: np.ndarray  # the class id of each prompt
    origins: list = dataclasses.field(default_factory=list)  # (class, name, template) of each prompt, for errors


def prompt_sets(card, probe: str = "zeroshot") -> list[PromptSet]:
    """The card's prompt sets, checked; one-line errors name the card file, the probe and the fix."""
    block = card.extra.get(PROMPTS_FIELD)
    where = f"task card {card.path}"
    if not isinstance(block, dict):
        raise EvalsuiteError(f"{where}: probe {probe} needs a `zeroshot:` block with class_names and templates "
                             "(docs/zeroshot.md)")
    unknown = [key for key in block if key not in PROMPT_KEYS]
    if unknown:
        raise EvalsuiteError(f"{where}: unknown key '{PROMPTS_FIELD}.{unknown[0]}'; known: "
                             f"{', '.join(sorted(PROMPT_KEYS))}")
    names = _class_names(block.get("class_names"), card.classes, where)
    templates = block.get("templates")
    sets = templates if isinstance(templates, dict) else {"templates": templates}
    if not sets:
        raise EvalsuiteError(f"{where}: zeroshot.templates is empty; give a list of templates or "
                             "{set_name: [templates], ...}, each template with CLASSNAME once")
    return [_prompt_set(str(set_name), _templates(value, f"{where}: zeroshot.templates"), names, card.classes)
            for set_name, value in sets.items()]


def _class_names(names, classes: list, where: str) -> dict:
    """{class: [name, ...]} for every class of the card; a key that is no class is named, not called missing."""
    if not isinstance(names, dict):
        raise EvalsuiteError(f"{where}: zeroshot.class_names must map every class ({', '.join(classes)}) to a list "
                             "of names")
    extra = [str(key) for key in names if key not in classes]
    if extra:
        raise EvalsuiteError(f"{where}: zeroshot.class_names has '{extra[0]}', which is not a class of the card "
                             f"({', '.join(classes)}); fix its spelling or remove it")
    missing = [c for c in classes if c not in names]
    if missing:
        raise EvalsuiteError(f"{where}: zeroshot.class_names must map every class ({', '.join(classes)}) to a list "
                             f"of names; {', '.join(missing)} has none")
    return {c: _strings(names[c], f"{where}: zeroshot.class_names.{c}") for c in classes}


def checked_prompt_sets(card, backbone, probe: str = "zeroshot") -> list[PromptSet]:
    """`prompt_sets`, each also checked with the model's tokenizer (none too long for its text context, no two
    classes with the same prompts) before any text is encoded."""
    sets = prompt_sets(card, probe)
    for prompt_set in sets:
        where = f"task card {card.path}" + (f" (template set '{prompt_set.name}')" if len(sets) > 1 else "")
        check_prompt_set(prompt_set, card.classes, backbone, where)
    return sets


def _strings(value, where: str) -> list:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise EvalsuiteError(f"{where} must be a non-empty list of strings")
    return value


def _templates(value, where: str) -> list:
    templates = _strings(value, where)
    bad = [t for t in templates if t.count(PLACEHOLDER) != 1]
    if bad:
        raise EvalsuiteError(f"{where}: template '{bad[0]}' must hold {PLACEHOLDER} exactly once")
    return templates


def _prompt_set(name: str, templates: list, names: dict, classes: list) -> PromptSet:
    texts, prompt_class, origins = [], [], []
    for class_id, class_name in enumerate(classes):
        for label in names[class_name]:
            texts += [t.replace(PLACEHOLDER, label) for t in templates]
            prompt_class += [class_id] * len(templates)
            origins += [(class_name, label, t) for t in templates]
    return PromptSet(name, texts, np.asarray(prompt_class, dtype=np.int64), origins)


def ensemble_class_embeddings(prompt_embeddings: np.ndarray, prompt_class: np.ndarray, num_classes: int) -> np.ndarray:
    """[classes, dim] float32: per class, the normalised mean of its prompts' normalised embeddings."""
    rows = np.asarray(prompt_embeddings, dtype=np.float64)
    rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    means = np.stack([rows[prompt_class == c].mean(axis=0) for c in range(num_classes)])
    return (means / np.linalg.norm(means, axis=1, keepdims=True)).astype(np.float32)


def normalised_prompt_embeddings(prompt_embeddings: np.ndarray) -> np.ndarray:
    """[prompts, dim] float32: each prompt's embedding L2-normalised (the rule that sums prompt probabilities)."""
    rows = np.asarray(prompt_embeddings, dtype=np.float64)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class ClassTexts:
    """What the zeroshot probe receives: class embeddings per prompt set, the logit scale, where they came from."""
    embeddings: dict  # {set name: [classes, dim] float32}
    logit_scale: float
    prompts: dict  # {set name: number of prompts}
    cache_keys: dict  # {set name: text cache key}
    source: str
    # Maps the cached image rows (float32 batches) into the space of `embeddings`: the model's image projection
    # where its cache holds the features before it (models/vision_language/towers.py); the identity by default.
    image_to_joint: ImageToJoint = dataclasses.field(default_factory=ImageToJoint)
    # ENSEMBLE: `embeddings` rows are classes. SUM_PROMPT_PROBABILITIES: they are prompts, `prompt_class` their class.
    rule: str = ENSEMBLE
    prompt_class: dict = dataclasses.field(default_factory=dict)  # {set name: [prompts] class ids}

    def params_of(self, prompt_set: str) -> dict:
        """What a run's selected_params record of the chosen prompt set (zeroshot and mizero alike)."""
        return {"prompt_set": prompt_set, "prompts": self.prompts[prompt_set], "logit_scale": self.logit_scale,
                "trained_on": ZERO_SHOT, "prompt_source": self.source, "text_cache_key": self.cache_keys[prompt_set],
                **({"class_rule": self.rule} if self.rule != ENSEMBLE else {})}


def with_class_texts(recipes: list, card, backbone, out_dir, device) -> list:
    """`recipes` with the class text embeddings in the context of those whose probe reads them (zeroshot, mizero)."""
    readers = [r.probe for r in recipes if getattr(PROBES[r.probe], "reads_class_texts", False)]
    if not readers:
        return recipes
    check_text_tower(backbone, readers[0])
    for probe in readers:
        check_images_map_to_joint_space(PROBES[probe], probe, backbone)
    sets = checked_prompt_sets(card, backbone, readers[0])  # every set checked before the first is encoded
    # PRISM's rule: only on its slide vectors, where the zeroshot probe is the one prompt reader (mizero reads bags).
    rule = getattr(backbone.text, "class_rule", ENSEMBLE)
    embeddings, keys = {}, {}
    for prompt_set in sets:
        rows, keys[prompt_set.name] = cached_text_embeddings(out_dir, backbone, prompt_set.texts, device)
        embeddings[prompt_set.name] = ensemble_class_embeddings(rows, prompt_set.prompt_class, card.num_classes) \
            if rule == ENSEMBLE else normalised_prompt_embeddings(rows)
    texts = ClassTexts(embeddings, backbone.text.logit_scale, {s.name: len(s.texts) for s in sets}, keys,
                       str(card.extra[PROMPTS_FIELD].get("source", "")), backbone.text.image_to_joint, rule,
                       {s.name: s.prompt_class for s in sets})
    return [dataclasses.replace(r, context={"class_texts": texts})
            if getattr(PROBES[r.probe], "reads_class_texts", False) else r for r in recipes]
