"""TITAN's text side for zero-shot slide classification: its text encoder, the projection of the slide embedding into
the text space, and the tokenizer, under the key names of the published checkpoint.

What TITAN's hub code computes (modeling_titan.py of MahmoodLab/TITAN, read in the copy that
ThucHuynh44/Concept-Distilled-MIL carries, models/titan/modeling_titan.py: `encode_text`, `zero_shot_classifier`,
`zero_shot`; the text tower's sizes from config.json's text_config, read in clemsgrs/unicorn_baseline at 34bdb6e):
- `encode_text(input_ids)`: the last id column dropped ("make space for CLS token"), then `text_encoder`, a CoCa text
  tower built from text_config (context 128, vocab 32007, 12 layers, 12 heads, 768 wide, embed_cls, pad id 0,
  projection 768 -> 768 without bias): CONCH's text tower configuration (conch_ViT-B-16.json's text_cfg) with a
  768-wide projection, built here by models/vision_language/conch.text_transformer.
- `zero_shot_classifier`: each prompt's embedding L2-normalised, the mean over a class's names and templates
  normalised again: the prompt ensembling probes/texts/class_texts.py does for every model (CLASS_RULE).
- `zero_shot(slide_embedding, classifier)`: the slide embedding (what `encode_slide_from_patch_features` returns,
  768 wide, before the projection: the slide-embedding cache's rows) `@ vision_encoder.proj`, normalised, times the
  classifier, then a softmax with no temperature: `logit_scale` is 1.

`published_text_keys` keeps `text_encoder.*` as it is named and `vision_encoder.proj` (as `image_proj`), and drops the
slide ViT (models/slide/titan.py loads it). The tokenizer is CONCH's byte-level BPE file (TITAN's `encode_text`
drops the placeholder column CONCH's tokenizer appends, as CONCH's does), looked for where CONCH's is
(models/vision_language/conch.py) and, beside the weights, also as `tokenizer.json`.
"""

import torch
from torch import nn

from evalsuite.models.vision_language import conch as vlm_conch

TEXT_PREFIX = "text_encoder."
IMAGE_PROJECTION_KEY = "vision_encoder.proj"
CLASS_RULE = "ensemble"  # zero_shot_classifier: normalised mean of the normalised prompt embeddings per class
LOGIT_SCALE = 1.0  # zero_shot: softmax(normalised slide @ classifier), no temperature


class TitanText(nn.Module):
    """TITAN's text encoder and the slide embedding's projection into its space (names as in the checkpoint)."""

    def __init__(self, width: int):
        super().__init__()
        self.text_encoder = vlm_conch.text_transformer(width, model="titan")
        self.image_proj = nn.Parameter(torch.randn(width, width) * width ** -0.5)

    def encode_text(self, token_ids: torch.Tensor) -> torch.Tensor:
        """[prompts, 768] unnormalised text embeddings of the tokenizer's [prompts, 128] ids."""
        return self.text_encoder(token_ids[:, :-1])

    def image_projection(self) -> torch.Tensor:
        """[768, 768]: a slide embedding @ this is TITAN's slide embedding in the text space (before normalising)."""
        return self.image_proj

    def logit_scale(self) -> float:
        return LOGIT_SCALE


def build_text(spec) -> TitanText:
    return TitanText(int(spec.embed_dim)).float().eval()


def published_text_keys(state: dict) -> dict:
    """The text encoder's tensors as they are named, and the image projection as `image_proj`; the rest dropped."""
    kept = {key: tensor for key, tensor in state.items() if key.startswith(TEXT_PREFIX)}
    if IMAGE_PROJECTION_KEY in state:
        kept["image_proj"] = state[IMAGE_PROJECTION_KEY]
    return kept


def text_tokenizer(spec) -> vlm_conch.ConchTokenizer:
    """CONCH's file beside the weights, else a `tokenizer.json` there (TITAN's hub repository loads a tokenizer with
    AutoTokenizer; that it is CONCH's file is not confirmed: the file is checked as CONCH's before use)."""
    return vlm_conch.ConchTokenizer(spec.extra["text"]["tokenizer"], model=spec.name, other_names=("tokenizer.json",))
