"""Texts checked against the model's own tokenizer before anything is encoded or extracted (docs/zeroshot.md,
"Prompts: the card's `zeroshot:` block").

Two ways a zero-shot run would otherwise collapse without a word, scoring chance with every row written:

- a text longer than the text tower's context is cut by the tokenizer (CLIP keeps 77 tokens, the end token moved
  to the last place), so class names that differ only after the cut, a long template ending in CLASSNAME, or long
  captions all become the same tokens: any such text is refused, naming it and the context length;
- two classes whose prompts are the same token sequences (names equal once lower-cased, as CLIP's BPE does, or
  simply the same) get the same class embedding, so each image's probabilities between them are equal: refused,
  naming both classes.

Token ids come from `TextTower.prompt_token_ids` (models/vision_language/towers.py): the layout the tokenizer gives, start and end
included, neither padded nor cut, so its length is compared with what the tokenizer would keep.
"""

from collections import Counter
from fractions import Fraction

from evalsuite.errors import EvalsuiteError


def check_prompt_set(prompt_set, class_names: list, backbone, where: str) -> None:
    """`prompt_set` (probes/class_texts.PromptSet) fits `backbone`'s text context and tells its classes apart."""
    ids = backbone.text.prompt_token_ids(prompt_set.texts)
    longest = _first_too_long(ids, backbone.text.max_prompt_tokens)
    if longest is not None:
        class_name, name, template = prompt_set.origins[longest]
        raise EvalsuiteError(f"{where}: the prompt '{_clipped(prompt_set.texts[longest])}' (class {class_name}, name "
                             f"'{_clipped(name)}', template '{_clipped(template)}') is {len(ids[longest])} tokens, "
                             f"{_over_context(backbone)}; shorten the template or the name")
    same = _classes_with_equal_prompts(ids, prompt_set.prompt_class)
    if same is not None:
        first, second = (class_names[c] for c in same)
        example = {c: prompt_set.texts[list(prompt_set.prompt_class).index(c)] for c in same}
        raise EvalsuiteError(f"{where}: classes {first} and {second} give the same prompts once tokenized for model "
                             f"'{_text_model(backbone)}' (e.g. '{_clipped(example[same[0]])}' and "
                             f"'{_clipped(example[same[1]])}'), so their class embeddings would be equal and no image "
                             "told between them; give them names that differ in zeroshot.class_names")


def check_captions_fit(captions: list, places: list, backbone) -> None:
    """Every caption fits `backbone`'s text context; `places[i]` says where caption i is (manifest and line)."""
    ids = backbone.text.prompt_token_ids(captions)
    longest = _first_too_long(ids, backbone.text.max_prompt_tokens)
    if longest is not None:
        raise EvalsuiteError(f"{places[longest]}: the caption '{_clipped(captions[longest])}' is "
                             f"{len(ids[longest])} tokens, {_over_context(backbone)} (captions that differ after "
                             "the cut would be the same text); shorten it")


def _over_context(backbone) -> str:
    return (f"longer than the text context of model '{_text_model(backbone)}' ({backbone.text.max_prompt_tokens} "
            "tokens, start and end included), which would cut it without a word")


def _text_model(backbone) -> str:
    """The model whose text tower tokenizes: a slide encoder's run names the slide encoder, not its tile encoder."""
    return getattr(backbone.text, "model_name", backbone.name)


def _first_too_long(token_ids: list, most: int) -> int | None:
    return next((index for index, ids in enumerate(token_ids) if len(ids) > most), None)


def _classes_with_equal_prompts(token_ids: list, prompt_class) -> tuple | None:
    """The first two classes whose prompt embeddings average to the same class embedding: the same token sequences
    in the same proportions (order does not matter to a mean); None if every class differs."""
    by_class = {}
    for ids, class_id in zip(token_ids, prompt_class):
        by_class.setdefault(int(class_id), Counter())[tuple(ids)] += 1
    seen = {}
    for class_id, counts in by_class.items():
        total = sum(counts.values())
        signature = frozenset((ids, Fraction(count, total)) for ids, count in counts.items())
        if signature in seen:
            return seen[signature], class_id
        seen[signature] = class_id
    return None


def _clipped(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[:most] + "..."
