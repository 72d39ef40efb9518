"""KEEP (Zhou et al., arXiv 2412.13126) composed from timm and transformers, with the published module names.

KEEP's own model code is a small transformers `PreTrainedModel` in its hub repository (`modeling_keep.py` of
Astaxanthin/KEEP, run there with `trust_remote_code`; the same class is in MAGIC-AI4Med/KEEP,
`quick_start/keep_inference.py` and `WSI_evaluation/load_keep.py`). It holds four things, and the checkpoint's keys
are their names:

- `visual.*`: timm's `vit_large_patch16_224` (224 px, patch 16, LayerScale `init_values=1e-5`, no classifier,
  `dynamic_img_size`), whose output is the class token after the final norm (1024 wide);
- `visual_head.*`: Linear(1024, 768), GELU, Linear(768, 768) (keys `visual_head.0.*` and `visual_head.2.*`);
- `text.*`: a transformers `BertModel` built from the config's `text_config` (BERT-base sizes, vocabulary 30522,
  its pooler kept);
- `logit_scale`: the log of the scale, initialised at log(1 / 0.04).

`encode_image` is the L2-normalised `visual_head(visual(x))`, `encode_text` the L2-normalised `pooler_output` of
the BERT (no text projection). Here the same parts come from timm and transformers themselves and only the
composition is ours, so `model.safetensors` of the hub repository loads key for key without running its code.
The tokenizer is BERT's WordPiece over the repository's `vocab.txt` (lower-cased), 256 tokens padded, as KEEP's
inference code calls it; it is read from the folder of `--weights`, never downloaded.
"""

import math
from pathlib import Path

import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.vision_language.extras import install_extra

# What KEEP's model code passes to timm.create_model (besides pretrained=False).
VIT_ARCHITECTURE = "vit_large_patch16_224"
VIT_KWARGS = {"img_size": 224, "patch_size": 16, "init_values": 1e-5, "num_classes": 0, "dynamic_img_size": True}
# text_config of the hub repository's config.json (BertConfig's keys).
BERT_CONFIG = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
               "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
               "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
               "initializer_range": 0.02, "layer_norm_eps": 1e-12}
PROJECTION_DIM = 768  # config.json's projection_dim: the visual head's width, equal to the BERT's
INITIAL_LOGIT_SCALE = 1 / 0.04  # KEEP's initial temperature 0.04 (its training config's LOGIT_SCALE)
CONTEXT_TOKENS = 256  # max_length of KEEP's tokenizer calls, padded to it
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json")
# Buffers transformers' BERT derives from its config; older transformers wrote position_ids into checkpoints.
_DERIVED_BUFFERS = ("text.embeddings.position_ids", "text.embeddings.token_type_ids")


class KeepModel(torch.nn.Module):
    """KEEP's towers under the published module names (visual, visual_head, text, logit_scale)."""

    def __init__(self):
        super().__init__()
        timm, transformers = _import_libraries()
        self.visual = timm.create_model(VIT_ARCHITECTURE, pretrained=False, **VIT_KWARGS)
        width = self.visual.num_features
        self.visual_head = torch.nn.Sequential(torch.nn.Linear(width, PROJECTION_DIM), torch.nn.GELU(),
                                               torch.nn.Linear(PROJECTION_DIM, PROJECTION_DIM))
        self.text = transformers.BertModel(transformers.BertConfig(**BERT_CONFIG))
        self.logit_scale = torch.nn.Parameter(torch.tensor(math.log(INITIAL_LOGIT_SCALE)))
        self.tokenizer = KeepTokenizer()  # not a module: told where its vocabulary lies when weights load

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(self.visual_head(self.visual(images)), dim=-1)

    def encode_text(self, tokens: dict) -> torch.Tensor:
        return torch.nn.functional.normalize(self.text(**tokens).pooler_output, dim=-1)


class KeepTokenizer:
    """BERT WordPiece over KEEP's vocab.txt (lower-cased; tokenizer.json where the folder has one), each prompt
    padded or cut to 256 tokens; gives input_ids, token_type_ids and attention_mask."""

    def __init__(self, folder: Path | None = None):
        self.folder = folder
        self._tokenizer = None

    def use_folder(self, folder: Path) -> None:
        self.folder, self._tokenizer = Path(folder), None

    max_prompt_tokens = CONTEXT_TOKENS  # [CLS] and [SEP] included

    def __call__(self, texts: list[str]) -> dict:
        tokens = self._load()(list(texts), max_length=CONTEXT_TOKENS, padding="max_length", truncation=True,
                              return_tensors="pt")
        return dict(tokens)

    def prompt_token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each prompt's ids, [CLS] and [SEP] included, neither padded nor cut (models/vision_language/towers.py, TextTower)."""
        return self._load()(list(texts), truncation=False, verbose=False)["input_ids"]

    def _load(self):
        if self._tokenizer is None:
            if self.folder is None or not any((self.folder / name).is_file() for name in TOKENIZER_FILES):
                where = f"in {self.folder}" if self.folder else "(none with --random-init)"
                raise EvalsuiteError(f"KEEP's text tower needs its tokenizer: no vocab.txt or tokenizer.json {where}; "
                                     "put vocab.txt and tokenizer_config.json of Astaxanthin/KEEP next to the "
                                     "--weights file (docs/zeroshot.md)")
            _, transformers = _import_libraries()
            self._tokenizer = transformers.BertTokenizerFast.from_pretrained(str(self.folder), local_files_only=True,
                                                                             do_lower_case=True)
        return self._tokenizer


def create_keep(spec, seed: int):
    """(KeepModel with seeded random weights, its tokenizer), built offline."""
    model = checkpoints.seeded(KeepModel, seed)
    return model, model.tokenizer


def load_keep_weights(model: KeepModel, weights: str | Path) -> str:
    """Fill `model` from KEEP's checkpoint (the file, or the downloaded hub folder) key for key; the tokenizer reads
    its vocabulary from the same folder. Returns the weights id (content hash of the file)."""
    def without_derived_buffers(state: dict) -> dict:
        return {key: value for key, value in state.items() if key not in _DERIVED_BUFFERS}

    weights_id, folder = checkpoints.load_key_for_key(model, weights, without_derived_buffers)
    model.tokenizer.use_folder(folder)
    return weights_id


def _import_libraries():
    try:
        import timm
        import transformers
    except ImportError:
        raise EvalsuiteError(f"KEEP needs timm and transformers: {install_extra()}") from None
    return timm, transformers
