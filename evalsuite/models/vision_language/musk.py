"""MUSK (Xiang et al., Nature 2025) as a vision-language backbone: torchscale's BEiT-3 encoder and two bias-free heads
under the module names of the published `model.safetensors` (hub xiangjx/musk), so that file loads key for key.

No code of lilab-stanford/MUSK is used or copied; its sizes and forward were read from `musk/modeling.py` at commit
714b666 (`_get_large_config`, `musk_large_patch16_384`, `MUSK.forward`), and its text layout from `musk/utils.py`
(`xlm_tokenizer`). torchscale 0.3.0 from PyPI computes the BEiT-3 MUSK vendors (docs/zeroshot.md). It pins timm<1.0,
so it is installed outside pip's resolver: `pip install --no-deps torchscale==0.3.0 fairscale==0.4.0` (its encoder
imports `fairscale.nn` at import time).

- image: `beit3(visual_tokens=...)`, the CLS token of the last layer through `vision_head` (`with_head=True`,
  `ms_aug=False`, MUSK's zero-shot settings); text: `beit3(textual_tokens=..., text_padding_position=...)`, its CLS
  token through `language_head`. Both unnormalised (the probes normalise; MUSK's `out_norm=True` does the same).
  The image probes read the CLS token before `vision_head` (`with_head=False`, which MUSK's README prescribes for
  linear probes and MIL); zero-shot applies the head's weight to the cached rows. MUSK's `ms_aug` (a second,
  upsampled scale concatenated, also prescribed there) is not built.
- the checkpoint is read strictly at 384 px. MUSK's loader interpolates the image position table when the model's
  size differs from the file's; the entry builds MUSK's own 384 px model, so a table of another size is refused
  (wrong shape) rather than resampled.
- tokenizer: XLM-RoBERTa's sentencepiece tokenizer over MUSK's `tokenizer.spm` (in the hub repository beside the
  weights, and in the `musk` package), read with transformers' XLMRobertaTokenizer from a folder where it is named
  `sentencepiece.bpe.model`; `<s>`, at most 98 pieces, `</s>`, `<pad>` up to 100 ids, a padding mask of 1 at pads.
"""

import math
import shutil
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.vision_language.extras import install_extra
from evalsuite.models.vision_language.tokenizer_files import TokenizerFile

INSTALL = "pip install --no-deps torchscale==0.3.0 fairscale==0.4.0"
# _get_large_config(img_size=384) of musk/modeling.py; torchscale's defaults for the rest (subln, 1024 text positions).
ENCODER_CONFIG = {"img_size": 384, "patch_size": 16, "vocab_size": 64010, "multiway": True,
                  "layernorm_embedding": False, "normalize_output": True, "no_output_layer": True,
                  "drop_path_rate": 0.0, "encoder_embed_dim": 1024, "encoder_attention_heads": 16,
                  "encoder_ffn_embed_dim": 4096, "encoder_layers": 24}
TOKENIZER_NAME = "tokenizer.spm"
TEXT_TOKENS = 100  # xlm_tokenizer's max_len: <s>, at most 98 pieces, </s>, padding


class Musk(nn.Module):
    """MUSK's BEiT-3 (`beit3.*`), `vision_head`, `language_head` and `logit_scale`, as its checkpoint names them."""

    def __init__(self, tokenizer: "MuskTokenizer | None" = None):
        super().__init__()
        beit3, encoder_config = import_torchscale()
        config = encoder_config(**ENCODER_CONFIG)
        self.beit3 = beit3(config)
        width = config.encoder_embed_dim
        self.vision_head = nn.Linear(width, width, bias=False)
        self.language_head = nn.Linear(width, width, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))  # MUSK's initial value
        self.tokenizer = tokenizer  # told where the checkpoint lies (tokenizer.spm sits beside it)

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return self.vision_head(self.encode_image_before_projection(images))

    def encode_image_before_projection(self, images: torch.Tensor) -> torch.Tensor:
        """The last layer's CLS token, MUSK's `with_head=False` (what it prescribes for linear probes and MIL)."""
        return self.beit3(visual_tokens=images)["encoder_out"][:, 0]

    def image_projection(self) -> torch.Tensor:
        """[1024, 1024]: encode_image = encode_image_before_projection @ this (vision_head is bias-free)."""
        return self.vision_head.weight.T

    def encode_text(self, tokens: dict) -> torch.Tensor:
        out = self.beit3(textual_tokens=tokens["input_ids"], text_padding_position=tokens["padding_mask"])
        return self.language_head(out["encoder_out"][:, 0])


class MuskTokenizer(TokenizerFile):
    """prompts -> {"input_ids": [prompts, 100], "padding_mask": [prompts, 100]} in MUSK's layout."""

    def __init__(self, spec_tokenizer: str):
        super().__init__(spec_tokenizer, TOKENIZER_NAME, "musk", "models")

    def read(self, path: Path | None):
        return read_tokenizer(path)

    max_prompt_tokens = TEXT_TOKENS  # <s> and </s> included

    def prompt_token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each prompt's ids, <s> and </s> included, neither padded nor cut (models/vision_language/towers.py, TextTower)."""
        return [self.loaded().encode(text, verbose=False) for text in texts]

    def __call__(self, texts: list[str]) -> dict:
        xlmr = self.loaded()
        ids = torch.full((len(texts), TEXT_TOKENS), xlmr.pad_token_id, dtype=torch.long)
        padding_mask = torch.ones((len(texts), TEXT_TOKENS), dtype=torch.long)
        for row, text in enumerate(texts):
            pieces = xlmr.encode(text)[1:-1][:TEXT_TOKENS - 2]  # without the <s> and </s> encode adds
            tokens = [xlmr.bos_token_id, *pieces, xlmr.eos_token_id]
            ids[row, :len(tokens)] = torch.tensor(tokens)
            padding_mask[row, :len(tokens)] = 0
        return {"input_ids": ids, "padding_mask": padding_mask}


def read_tokenizer(path: Path | None):
    """transformers' XLMRobertaTokenizer over MUSK's sentencepiece file (copied as sentencepiece.bpe.model)."""
    if path is None:
        raise EvalsuiteError(f"model 'musk' needs MUSK's tokenizer file {TOKENIZER_NAME} (not downloaded, also with "
                             "--random-init): download it from the hub repository xiangjx/musk and put it next to "
                             "the --weights file; docs/zeroshot.md")
    try:
        import google.protobuf  # noqa: F401 - transformers converts the sentencepiece model through it
        import sentencepiece  # noqa: F401
        from transformers import XLMRobertaTokenizer
    except ImportError:
        raise EvalsuiteError(f"MUSK's tokenizer needs transformers, sentencepiece and protobuf: {install_extra()}") \
            from None
    with tempfile.TemporaryDirectory() as folder:
        shutil.copyfile(path, Path(folder) / "sentencepiece.bpe.model")
        try:
            return XLMRobertaTokenizer.from_pretrained(folder, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any parse failure means the same: not a sentencepiece model
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise EvalsuiteError(f"cannot read MUSK's tokenizer {path}: {reason}") from None


def import_torchscale():
    """(torchscale's BEiT3, EncoderConfig), or one line with the install command."""
    try:
        with warnings.catch_warnings():  # its drop path imports timm.models.layers, which timm 1.0 deprecates
            warnings.filterwarnings("ignore", "Importing from timm.models.layers", FutureWarning)
            from torchscale.architecture.config import EncoderConfig
            from torchscale.model.BEiT3 import BEiT3
    except ImportError:
        raise EvalsuiteError(f"model 'musk' needs torchscale, which pins timm<1.0 and so is no extra: {INSTALL}") \
            from None
    return BEiT3, EncoderConfig


def create(spec, seed: int):
    """(MUSK with seeded random weights, its tokenizer), offline."""
    tokenizer = MuskTokenizer(spec.tokenizer)
    return checkpoints.seeded(lambda: Musk(tokenizer), seed), tokenizer


def load(model: Musk, weights) -> str:
    """Fill `model` from MUSK's `model.safetensors` key for key; returns the weights id (content hash of the file)."""
    weights_id, model.tokenizer.beside = checkpoints.load_key_for_key(model, weights)
    return weights_id
