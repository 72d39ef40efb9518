"""QuiltNet-B-16-PMB (Ikezogwo et al., Quilt-1M, arXiv 2306.11207) composed from timm and transformers, under the
module names of its open_clip checkpoint.

Its `open_clip_config.json` (wisdomik/QuiltNet-B-16-PMB, hub commit 813c35d; the first version, 4e7fc6f, spelt the
two text keys `proj` and `pooler_type`, the names older open_clip read) describes an open_clip `CustomTextCLIP`:

- `visual`: open_clip's `TimmModel` around timm's `vit_base_patch16_224` (`timm_pool ""`, `timm_proj linear`, no
  bias): the trunk keeps timm's default pooling (the class token after the final norm, 768 wide; open_clip resets
  only the classifier) and `head.proj` is Linear(768, 512) without bias; keys `visual.trunk.*`,
  `visual.head.proj.weight`;
- `text`: open_clip's `HFTextEncoder` around transformers' `BertModel` of
  `microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract` (`hf_pooler_type cls_last_hidden_state_pooler`, so built
  without BERT's pooler; `hf_proj_type mlp`: Linear(768, 640), GELU, Linear(640, 512), no biases); it masks the pad
  id (0) out of attention and projects the [CLS] row of the last hidden state; keys `text.transformer.*`,
  `text.proj.0.weight`, `text.proj.2.weight`;
- `logit_scale`, initialised at log(1 / 0.07) (CustomTextCLIP's default).

`encode_image` and `encode_text` are open_clip's unnormalised embeddings (512 wide), as for the other open_clip
entries. open_clip builds the BERT from the hub's config.json and tokenizer, which a run without the hub cannot read:
here the BERT-base sizes are constants (PUBMEDBERT_CONFIG) and the tokenizer is BERT's lower-cased WordPiece over a
`vocab.txt` the user puts next to the weights (the QuiltNet-B-16-PMB repository ships one), 256 tokens padded with
[PAD] as open_clip's HFTokenizer pads them, after open_clip's own whitespace clean. Nothing is downloaded.

Read for it: open_clip 3.3.0 `timm_model.py` (TimmModel), `hf_model.py` (HFTextEncoder, ClsLastHiddenStatePooler),
`model.py` (CLIPVisionCfg, CLIPTextCfg, CustomTextCLIP), `factory.py` (create_model, load_checkpoint, get_tokenizer),
`tokenizer.py` (HFTokenizer); the hub commits 4e7fc6f and 813c35d of wisdomik/QuiltNet-B-16-PMB.
"""

import math
from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn

from evalsuite.errors import EvalsuiteError
from evalsuite.models import checkpoints
from evalsuite.models.vision_language.entries import QUILT_PMB_MODULES
from evalsuite.models.vision_language.extras import install_extra
from evalsuite.models.vision_language.tokenizer_files import TokenizerFile

LIBRARY = QUILT_PMB_MODULES  # the entry's `library`: towers._builders finds `create` and `load` under it
HUB_REPO = "wisdomik/QuiltNet-B-16-PMB"
VIT_ARCHITECTURE = "vit_base_patch16_224"  # open_clip_config.json's timm_model_name
VIT_KWARGS: dict = {}  # what timm.create_model gets beyond the name (none: open_clip passes no size)
# BERT-base sizes of PubMedBERT (BertConfig's keys). Microsoft's own config.json was not readable here; these are the
# values of the fine-tuned copies that name it as their base (e.g. pruas/BENT-PubMedBERT-NER-Bioprocess config.json:
# `_name_or_path` microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract), BERT-base's shapes; a file of other shapes is
# refused key by key at load.
PUBMEDBERT_CONFIG = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                     "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                     "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
                     "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0}
CONTEXT_TOKENS = 256  # open_clip_config.json's text_cfg.context_length: the tokenizer pads/cuts to it
INITIAL_LOGIT_SCALE = 1 / 0.07  # CustomTextCLIP's init_logit_scale (log of it stored)
VOCAB_FILE = "vocab.txt"
SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                  "mask_token": "[MASK]"}  # BERT's, as BertTokenizer names them
# Buffers transformers' BERT derives from its config; transformers before 4.31 saved position_ids (open_clip's
# load_checkpoint drops that key for the same reason).
_DERIVED_BUFFERS = ("text.transformer.embeddings.position_ids", "text.transformer.embeddings.token_type_ids")


class TimmImageTower(nn.Module):
    """open_clip's TimmModel for `timm_pool ""`, `timm_proj linear`: timm's ViT (its own pooling, no classifier),
    then a bias-free Linear to the joint width under `head.proj`."""

    def __init__(self, embed_dim: int, vit_kwargs: dict):
        super().__init__()
        timm, _ = _import_libraries()
        self.trunk = timm.create_model(VIT_ARCHITECTURE, pretrained=False, num_classes=0, **vit_kwargs)
        # Dropout(0) as open_clip's head has it: no weights, kept so the module reads as open_clip's.
        self.head = nn.Sequential(OrderedDict(drop=nn.Dropout(0.0),
                                              proj=nn.Linear(self.trunk.num_features, embed_dim, bias=False)))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(images))


class BertTextTower(nn.Module):
    """open_clip's HFTextEncoder for `hf_pooler_type cls_last_hidden_state_pooler`, `hf_proj_type mlp`: a BertModel
    without pooler, the [CLS] row of its last hidden state, and a bias-free Linear-GELU-Linear to the joint width."""

    def __init__(self, embed_dim: int, bert_config: dict):
        super().__init__()
        _, transformers = _import_libraries()
        config = transformers.BertConfig(**bert_config)
        self.pad_id = config.pad_token_id
        self.transformer = transformers.BertModel(config, add_pooling_layer=False)
        hidden = (config.hidden_size + embed_dim) // 2  # HFTextEncoder's MLP width
        self.proj = nn.Sequential(nn.Linear(config.hidden_size, hidden, bias=False), nn.GELU(),
                                  nn.Linear(hidden, embed_dim, bias=False))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids != self.pad_id).long()
        hidden = self.transformer(input_ids=ids, attention_mask=mask).last_hidden_state
        return self.proj(hidden[:, 0])


class QuiltPmbModel(nn.Module):
    """QuiltNet-B-16-PMB's towers under its checkpoint's names (visual, text, logit_scale)."""

    def __init__(self, tokenizer: "PubMedBertTokenizer", embed_dim: int, vit_kwargs: dict, bert_config: dict):
        super().__init__()
        self.visual = TimmImageTower(embed_dim, vit_kwargs)
        self.text = BertTextTower(embed_dim, bert_config)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(INITIAL_LOGIT_SCALE)))
        self.tokenizer = tokenizer  # not a module: told where its vocabulary lies when weights load

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        return self.visual(images)

    def encode_text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text(ids)


class PubMedBertTokenizer(TokenizerFile):
    """BERT's lower-cased WordPiece over the vocab.txt beside the weights: prompts -> [prompts, 256] ids, [PAD]-padded
    (the text cache keys it by the file's hash)."""

    max_prompt_tokens = CONTEXT_TOKENS  # [CLS] and [SEP] included

    def __init__(self, spec_tokenizer: str, vocab_size: int):
        # No package ships PubMedBERT's vocabulary: `file` looks only beside the weights.
        super().__init__(spec_tokenizer, VOCAB_FILE, package="", package_dir="")
        self.vocab_size = vocab_size  # rows of the BERT's token embedding: every id must be below

    def file(self) -> Path | None:
        path = self.beside / VOCAB_FILE if self.beside else None
        return path if path is not None and path.is_file() else None

    def read(self, path: Path | None):
        if path is None:
            where = f"in {self.beside}" if self.beside else "(none with --random-init)"
            raise EvalsuiteError(f"model 'quiltnet-b-16-pmb' needs PubMedBERT's vocabulary: no {VOCAB_FILE} {where}; "
                                 f"put {VOCAB_FILE} of {HUB_REPO} next to the --weights file (it is not downloaded; "
                                 "docs/zeroshot.md)")
        tokens = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if not tokens or len(tokens) > self.vocab_size or tokens[0] != "[PAD]":
            raise EvalsuiteError(f"{path} is not PubMedBERT's {VOCAB_FILE}: it has {len(tokens)} lines (at most "
                                 f"{self.vocab_size}, [PAD] first, as the text tower embeds them); get {VOCAB_FILE} "
                                 f"of {HUB_REPO}")
        _, transformers = _import_libraries()
        from tokenizers import BertWordPieceTokenizer, Tokenizer

        # BERT's uncased WordPiece pipeline over this file alone (the one AutoTokenizer builds for Microsoft's
        # vocab.txt and {"do_lower_case": true}); built through `tokenizers`, whose API transformers 4 and 5 share.
        try:
            pipeline = Tokenizer.from_str(BertWordPieceTokenizer(str(path), lowercase=True).to_str())
        except Exception as exc:  # noqa: BLE001 - any parse failure means the same: not a WordPiece vocabulary
            raise EvalsuiteError(f"cannot read {path} as a WordPiece vocabulary ({type(exc).__name__}); get "
                                 f"{VOCAB_FILE} of {HUB_REPO}") from None
        return transformers.PreTrainedTokenizerFast(tokenizer_object=pipeline, **SPECIAL_TOKENS)

    def __call__(self, texts: list[str]) -> torch.Tensor:
        return self.loaded()(_cleaned(texts), max_length=CONTEXT_TOKENS, padding="max_length", truncation=True,
                             return_tensors="pt")["input_ids"]

    def prompt_token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each prompt's ids, [CLS] and [SEP] included, neither padded nor cut (models/vision_language/towers.py)."""
        return self.loaded()(_cleaned(texts), truncation=False, verbose=False)["input_ids"]


def _cleaned(texts: list[str]) -> list[str]:
    """open_clip's HFTokenizer clean ('whitespace': ftfy, HTML unescape, runs of whitespace to one space)."""
    try:
        from open_clip.tokenizer import get_clean_fn
    except ImportError:
        raise EvalsuiteError(f"model 'quiltnet-b-16-pmb' needs open_clip (open-clip-torch) for its prompt cleaning: "
                             f"{install_extra()}") from None
    clean = get_clean_fn("whitespace")
    return [clean(text) for text in texts]


def create(spec, seed: int):
    """(QuiltPmbModel with seeded random weights, its tokenizer), built offline."""
    tokenizer = PubMedBertTokenizer(spec.tokenizer, PUBMEDBERT_CONFIG["vocab_size"])
    model = checkpoints.seeded(lambda: QuiltPmbModel(tokenizer, spec.embed_dim, VIT_KWARGS, PUBMEDBERT_CONFIG), seed)
    return model, tokenizer


def load(model: QuiltPmbModel, weights) -> str:
    """Fill `model` from open_clip_pytorch_model.bin key for key (derived BERT buffers dropped); the tokenizer reads
    vocab.txt from the same folder. Returns the weights id (content hash of the file)."""
    def without_derived_buffers(state: dict) -> dict:
        return {key: value for key, value in state.items() if key not in _DERIVED_BUFFERS}

    weights_id, model.tokenizer.beside = checkpoints.load_key_for_key(model, weights, without_derived_buffers)
    return weights_id


def _import_libraries():
    try:
        import timm
        import transformers
    except ImportError:
        raise EvalsuiteError(f"model 'quiltnet-b-16-pmb' needs timm and transformers: {install_extra()}") from None
    return timm, transformers
