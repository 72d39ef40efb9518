"""CONCH v1 (MahmoodLab/CONCH) as a vision-language backbone: both towers composed from timm's VisionTransformer and
open_clip's AttentionalPooler and TextTransformer, under the module names of the published `pytorch_model.bin`, so
that file loads key for key. No code of MahmoodLab's `conch` package is used or copied; the sizes and the forward
below were read from it (GitHub mahmoodlab/CONCH at 141cc09: `conch/open_clip_custom/model_configs/
conch_ViT-B-16.json`, `coca_model.py`, `vision_tower.py`, `transformer.py`, `custom_tokenizer.py`).

- image: `visual.trunk` a timm ViT-B/16 at 448 px (its `forward_features`: all tokens after the final norm), one
  learnt query attending over them (`visual.attn_pool_contrast`, 8 heads, 512 wide), `visual.ln_contrast`, then
  `@ visual.proj_contrast` [512, 512]: `encode_image`, unnormalised as for CLIP. The image probes read the features
  before the projection (CONCH's README: `encode_image(proj_contrast=False, normalize=False)` for linear probes and
  MIL, `forward_no_head` in `vision_tower.py`); zero-shot applies `proj_contrast` to the cached rows.
- text: CONCH's tokenizer gives 127 ids (start, words, end, `<pad>` id 0 after them) plus one placeholder pad;
  `encode_text` drops that placeholder, `text` (a CoCa text tower: 12 layers, 768 wide) appends a learnt class
  embedding and reads it at the last position, through `ln_final` and `text_projection` [768, 512]. open_clip's
  `correct_cls_mask=False` is CONCH's legacy class-token mask; tests/models/test_vlm_conch.py recomputes this
  forward with torch primitives from CONCH's own mask.
- not built: the captioning half of the CoCa model (`text_decoder.*`, `visual.attn_pool_caption.*`,
  `visual.ln_caption.*`). Zero-shot classification and the image embedding never read it, so its tensors are read
  from the checkpoint and dropped by name; every other key must fit exactly.

The tokenizer is CONCH's byte-level BPE file, read with transformers' PreTrainedTokenizerFast as CONCH reads it. It
is not in the hub repository with the weights and is not downloaded here: `ConchTokenizer.file` says where it is
looked for, and it is read when the first prompt is tokenized (an image-only probe never needs it).
"""

import math
from pathlib import Path

import torch
from torch import nn

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.vision_language.extras import install_extra
from evalsuite.models.vision_language.tokenizer_files import TokenizerFile

TOKENIZER_NAME = "conch_byte_level_bpe_uncased.json"
TOKENIZER_ENV = "EVALSUITE_CONCH_TOKENIZER"
TOKENIZER_URL = ("https://github.com/mahmoodlab/CONCH/blob/main/conch/open_clip_custom/tokenizers/"
                 f"{TOKENIZER_NAME}")
SPECIAL_TOKENS = {"pad_token": "<pad>", "bos_token": "<start_of_text>", "eos_token": "<end_of_text>"}
PAD_ID = 0  # the text tower masks this id out of the class token's attention (CONCH's pad_id)
TEXT_TOKENS = 127  # ids per prompt the tokenizer gives; the class embedding makes the 128th position
# Tensors of the CoCa captioning half, in the checkpoint but read by neither zero-shot nor the image embedding.
UNUSED_PREFIXES = ("text_decoder.", "visual.attn_pool_caption.", "visual.ln_caption.")

_IMAGE_PX, _PATCH_PX, _WIDTH, _DEPTH, _HEADS = 448, 16, 768, 12, 12
_EMBED_DIM, _POOLER_HEADS, _VOCAB = 512, 8, 32007


class ConchVisual(nn.Module):
    """`visual.*`: timm ViT trunk -> attentional pooler (1 query) -> LayerNorm -> projection."""

    def __init__(self):
        super().__init__()
        from timm.models.vision_transformer import VisionTransformer

        self.trunk = VisionTransformer(img_size=_IMAGE_PX, patch_size=_PATCH_PX, embed_dim=_WIDTH, depth=_DEPTH,
                                       num_heads=_HEADS, mlp_ratio=4, num_classes=0, dynamic_img_size=True)
        # CONCH's pooler normalises with a LayerNorm that casts back to the input dtype: open_clip's default.
        pooler = _open_clip_transformer().AttentionalPooler
        self.attn_pool_contrast = pooler(d_model=_EMBED_DIM, context_dim=_WIDTH, n_head=_POOLER_HEADS, n_queries=1)
        self.ln_contrast = nn.LayerNorm(_EMBED_DIM)
        self.proj_contrast = nn.Parameter(_WIDTH ** -0.5 * torch.randn(_EMBED_DIM, _EMBED_DIM))

    def forward_before_projection(self, images: torch.Tensor) -> torch.Tensor:
        """[batch, 512]: CONCH's `forward_no_head` (`encode_image(proj_contrast=False, normalize=False)`)."""
        pooled = self.attn_pool_contrast(self.trunk.forward_features(images))[:, 0]
        return self.ln_contrast(pooled)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.forward_before_projection(images) @ self.proj_contrast


class Conch(nn.Module):
    """CONCH v1's contrastive towers and logit scale, with the checkpoint's module names."""

    def __init__(self, tokenizer: "ConchTokenizer"):
        super().__init__()
        self.visual = ConchVisual()
        # context 127 + the appended class embedding: positional_embedding [128, 768] as in the checkpoint.
        self.text = text_transformer(_EMBED_DIM)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))  # CoCa's initial value
        self.tokenizer = tokenizer  # told where the checkpoint lies (the tokenizer file may sit beside it)

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return self.visual(images)

    def encode_image_before_projection(self, images: torch.Tensor) -> torch.Tensor:
        """What CONCH prescribes for linear probes and MIL: the pooled, LayerNorm-ed embedding, not projected."""
        return self.visual.forward_before_projection(images)

    def image_projection(self) -> torch.Tensor:
        """[512, 512]: encode_image = encode_image_before_projection @ this (no bias)."""
        return self.visual.proj_contrast

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.text(tokens[:, :-1])  # the placeholder pad makes way for the class embedding


class ConchTokenizer(TokenizerFile):
    """CONCH's tokenizer: prompts -> [prompts, 128] ids (127 padded/truncated ids + one placeholder pad)."""

    max_prompt_tokens = TEXT_TOKENS  # ids a prompt may have before it is cut; the tower appends the 128th itself

    def __init__(self, spec_tokenizer: str, vocab_size: int | None = None, model: str = "conch", other_names=()):
        super().__init__(spec_tokenizer, TOKENIZER_NAME, "conch", "open_clip_custom/tokenizers", env=TOKENIZER_ENV,
                         other_names=other_names)
        self.vocab_size = vocab_size or _VOCAB  # rows of the text tower's token embedding: every id must be below
        self.model = model  # the registry entry whose prompts it tokenizes (CONCH's, or TITAN's), named in errors

    def read(self, path: Path | None):
        return read_tokenizer(path, self.vocab_size, self.model)

    def __call__(self, texts: list[str]) -> torch.Tensor:
        ids = self.loaded()(list(texts), max_length=TEXT_TOKENS, add_special_tokens=True, truncation=True,
                            padding="max_length", return_token_type_ids=False, return_tensors="pt")["input_ids"]
        return nn.functional.pad(ids, (0, 1), value=PAD_ID)

    def prompt_token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each prompt's ids, start and end included, neither padded nor cut (models/vision_language/towers.py, TextTower)."""
        return self.loaded()(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]


def read_tokenizer(path: Path | None, vocab_size: int | None = None, model: str = "conch"):
    """transformers' PreTrainedTokenizerFast from CONCH's tokenizer file, with CONCH's special tokens, after checking
    the file itself (transformers adds special tokens a file lacks, so its vocabulary always has them)."""
    if path is None:
        raise EvalsuiteError(
            f"model '{model}' needs CONCH's tokenizer file {TOKENIZER_NAME} (not downloaded, also with --random-init): "
            f"get it from {TOKENIZER_URL} and put it next to the --weights file or set {TOKENIZER_ENV}=PATH "
            "(or install MahmoodLab's conch package); docs/zeroshot.md")
    try:
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        raise EvalsuiteError("CONCH's tokenizer needs transformers: pip install transformers") from None
    try:
        check_tokenizer_file(Tokenizer.from_file(str(path)), path, vocab_size or _VOCAB)
        return PreTrainedTokenizerFast(tokenizer_file=str(path), **SPECIAL_TOKENS)
    except EvalsuiteError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parse failure means the same: not a tokenizer file
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise EvalsuiteError(f"cannot read CONCH's tokenizer {path}: {reason}") from None


def check_tokenizer_file(file_tokenizer, path: Path, vocab_size: int) -> None:
    """The file's own vocabulary has CONCH's special tokens (<pad> id 0), wraps a prompt in <start_of_text> ...
    <end_of_text> as CONCH's file does (its TemplateProcessing), and every id indexes the text tower's token
    embedding (CONCH's file: ids 0-32006, the tower's 32007 rows); else prompts would be encoded without the end
    token the class token is trained to follow, or fail inside the forward."""
    vocab = file_tokenizer.get_vocab(with_added_tokens=True)
    missing = [token for token in SPECIAL_TOKENS.values() if token not in vocab]
    not_conch = f"{path} is not CONCH's tokenizer"
    if missing or vocab.get(SPECIAL_TOKENS["pad_token"]) != PAD_ID:
        found = f"it lacks {', '.join(missing)}" if missing else f"its <pad> is id {vocab['<pad>']}"
        raise EvalsuiteError(f"{not_conch}: {found} (CONCH's has {', '.join(SPECIAL_TOKENS.values())}, <pad> id "
                             f"{PAD_ID}); get {TOKENIZER_URL}")
    ids = file_tokenizer.encode("a").ids
    start, end = vocab[SPECIAL_TOKENS["bos_token"]], vocab[SPECIAL_TOKENS["eos_token"]]
    if not ids or ids[0] != start or ids[-1] != end:
        raise EvalsuiteError(f"{not_conch}: it does not wrap a prompt in <start_of_text> ... <end_of_text> (its "
                             f"post_processor), as CONCH's does; get {TOKENIZER_URL}")
    largest = max(vocab.values())
    if largest >= vocab_size:
        raise EvalsuiteError(f"{not_conch}: it has token ids up to {largest}, but CONCH's text tower embeds "
                             f"{vocab_size} (ids 0-{vocab_size - 1}); get {TOKENIZER_URL}")


def text_transformer(output_dim: int, model: str = "conch") -> nn.Module:
    """CONCH's CoCa text tower (12 layers, 768 wide, a class embedding appended after 127 ids) projecting to
    `output_dim`; TITAN's text encoder has the same configuration with a 768-wide projection
    (models/slide/titan_text.py)."""
    return _open_clip_transformer(model).TextTransformer(
        context_length=TEXT_TOKENS, vocab_size=_VOCAB, width=_WIDTH, heads=_HEADS, layers=_DEPTH, output_dim=output_dim,
        embed_cls=True, pad_id=PAD_ID, pool_type="last", correct_cls_mask=False, act_layer=nn.GELU,
        norm_layer=nn.LayerNorm)


def _open_clip_transformer(model: str = "conch"):
    try:
        from open_clip import transformer
    except ImportError:
        raise EvalsuiteError(f"model '{model}' needs open_clip (open-clip-torch): {install_extra()}") from None
    return transformer


def create(spec, seed: int):
    """(CONCH with seeded random weights, its tokenizer), offline."""
    tokenizer = ConchTokenizer(spec.tokenizer, vocab_size=_VOCAB)
    return checkpoints.seeded(lambda: Conch(tokenizer), seed), tokenizer


def load(model: Conch, weights) -> str:
    """Fill `model` from CONCH's `pytorch_model.bin` (the captioning tensors dropped by name, everything else key for
    key); returns the weights id (content hash of the file)."""
    def without_captioning(state: dict) -> dict:
        return {key: value for key, value in state.items() if not key.startswith(UNUSED_PREFIXES)}

    weights_id, model.tokenizer.beside = checkpoints.load_key_for_key(model, weights, without_captioning)
    return weights_id
