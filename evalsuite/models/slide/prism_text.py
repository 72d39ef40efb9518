"""PRISM's text side for zero-shot classification (Shaikovski et al., 2024): the unimodal half of its BioGPT decoder,
the contrastive heads and the temperature, with PRISM's tokenization of a prompt set.

What `Prism.zero_shot(image_embeds, neg_prompts, pos_prompts)` computes (modeling_prism.py, biogpt.py):
- all prompts of all classes are tokenized together, in ONE batch, by `BioGPT.tokenize`: each text + `</s>`, BioGPT's
  tokenizer with special tokens (its leading `</s>`), padded on the right to the longest with `<pad>` (id 1); then
  `[:, :-1]` drops the batch's last column: the longest prompts lose their final `</s>`, the others a pad. A prompt's
  ids, and so its embedding, depend on the other prompts it is tokenized with.
- `BioGPT.forward` appends the class token id 42383 ("madeupword0006</w>", an unused token PRISM re-initialised and
  trained) to every row, after the pads; attention mask = ids != pad id. Positions are BioGPT's learned ones, counted
  over non-pad tokens (`cumsum(mask) * mask - 1`, offset 2): the class token's position is the prompt's real length
  whatever the padding. The decoder is causal, pre-norm, GELU, token embeddings scaled by sqrt(1024).
- the text embedding is `hidden_states[first_x_attn_layer][:, -1]` with `first_x_attn_layer = num_hidden_layers // 2`
  = 12: the class token after the 12 unimodal decoder layers, without the final `layer_norm`; layers 12-23 (with
  cross-attention to the image latents), `layer_norm` and `output_projection` are never reached for it.
- `text_to_latents`: Linear(1024 -> 5120, no bias), then L2-normalised; `img_to_latents`: Linear(1280 -> 5120, no bias)
  on the slide embedding (`image_embedding`, prism.py), normalised; similarity = cosine * exp(temperature); a softmax
  over ALL prompts, each class's prompt probabilities summed (CLASS_RULE).

No code of PRISM is used or copied: the decoder layers are written here in torch (the layer is transformers' BioGPT
layer; PRISM's biogpt_hf.py adds cross-attention to layers >= 12 only), and the tests re-compute the text embedding
with PyPI transformers' BioGptModel. The tokenizer is PyPI transformers' BioGptTokenizer (Moses + BPE; it needs the
PyPI package sacremoses) over microsoft/biogpt's vocab.json and merges.txt, which PRISM reads from `<model_dir>/biogpt`
at revision eb0d815e95434dc9e3b78f464e52b899bee7d923; nothing is downloaded here.

Sources: PRISM's hub repository (paige-ai/Prism), read in the verbatim copy clemsgrs/unicorn_baseline vendors at
commit 34bdb6e8887d29bbb1598f16c17e6e1ad91095bc (src/unicorn_baseline/vision_language/prism/: modeling_prism.py
`Prism.zero_shot`, `EmbedToLatents`; biogpt.py `BioGPT.tokenize`, `BioGPT.forward`; biogpt_hf.py `BioGptModel`,
`BioGptDecoderLayer`, `BioGptLearnedPositionalEmbedding`; config.json's biogpt_config and dim_latents).

Unconfirmed: that the published model.safetensors holds the text tensors under the module tree's names
(`text_decoder.model.biogpt.*`, `text_to_latents.to_latents.weight`, `img_to_latents.to_latents.weight`,
`temperature`; not seen in a published file); that the token embedding is stored as `...biogpt.embed_tokens.weight`
rather than only under its tied twin `text_decoder.model.output_projection.weight` (both are read); that the class
token's row was trained (biogpt.py leaves embed_tokens trainable); microsoft/biogpt's tokenizer_config.json (not read:
the tokenizer is built with BioGptTokenizer's defaults, right padding, as `from_pretrained` gives unless that file
overrides them).
"""

import hashlib
import math
import os
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from evalsuite.errors import EvalsuiteError
from evalsuite.models.slide.spec import SlideEncoderSpec

# Prism.zero_shot: softmax over every prompt of every class, then each class's prompt probabilities summed
# (modeling_prism.py, `neg_pos_probs`), not CLIP's mean class embedding.
CLASS_RULE = "sum_prompt_probabilities"

# config.json's biogpt_config (and dim_latents); `unimodal_layers` = num_hidden_layers (24) // 2, biogpt_hf.py's
# first_x_attn_layer; `cls_token_id` from biogpt.py. An entry's spec.extra["text"] may override any of them.
TEXT_CONFIG = {"hidden_size": 1024, "num_attention_heads": 16, "intermediate_size": 4096, "unimodal_layers": 12,
               "vocab_size": 42384, "max_position_embeddings": 1024, "pad_token_id": 1, "cls_token_id": 42383,
               "scale_embedding": True, "dim_latents": 5120}
POSITION_OFFSET = 2  # BioGptLearnedPositionalEmbedding: ids shifted by 2, table of max_position_embeddings + 2 rows

DECODER_PREFIX = "text_decoder.model.biogpt."
TIED_EMBEDDING = "text_decoder.model.output_projection.weight"  # tied to embed_tokens (BioGptForCausalLM)
HEAD_KEYS = ("text_to_latents.to_latents.weight", "img_to_latents.to_latents.weight", "temperature")
_LAYER = re.compile(r"layers\.(\d+)\.(.+)")

TOKENIZER_ENV = "EVALSUITE_BIOGPT_TOKENIZER"
TOKENIZER_FILES = ("vocab.json", "merges.txt")
TOKENIZER_REVISION = "eb0d815e95434dc9e3b78f464e52b899bee7d923"
TOKENIZER_URL = f"https://huggingface.co/microsoft/biogpt/tree/{TOKENIZER_REVISION}"
TOKENIZER_NAME = f"BioGPT Moses+BPE (microsoft/biogpt@{TOKENIZER_REVISION[:7]})"


def text_config(spec: SlideEncoderSpec) -> dict:
    return {**TEXT_CONFIG, **spec.extra.get("text", {})}


class SelfAttention(nn.Module):
    """BioGPT's causal multi-head self-attention (q, k, v, out projections with biases)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = (proj(x).reshape(batch, length, self.heads, -1).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.out_proj(attended.transpose(1, 2).reshape(batch, length, dim))


class DecoderLayer(nn.Module):
    """A unimodal BioGPT decoder layer: pre-norm self-attention and GELU feed-forward, both residual (nn.LayerNorm's
    default eps, as biogpt_hf.py; config.json's layer_norm_eps is not read by it)."""

    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(dim)
        self.self_attn = SelfAttention(dim, heads)
        self.final_layer_norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.self_attn_layer_norm(x), allowed)
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class Latents(nn.Module):
    """PRISM's EmbedToLatents projection (the normalisation is applied by its users)."""

    def __init__(self, dim: int, dim_latents: int):
        super().__init__()
        self.to_latents = nn.Linear(dim, dim_latents, bias=False)


class PrismText(nn.Module):
    """PRISM's text tower up to its text latents, and the slide embedding's projection into the same space."""

    def __init__(self, config: dict, image_dim: int):
        super().__init__()
        dim = config["hidden_size"]
        self.pad_id, self.cls_id = config["pad_token_id"], config["cls_token_id"]
        self.embed_scale = math.sqrt(dim) if config["scale_embedding"] else 1.0
        self.embed_tokens = nn.Embedding(config["vocab_size"], dim)
        self.embed_positions = nn.Embedding(config["max_position_embeddings"] + POSITION_OFFSET, dim)
        self.layers = nn.ModuleList(
            DecoderLayer(dim, config["num_attention_heads"], config["intermediate_size"])
            for _ in range(config["unimodal_layers"]))
        self.text_to_latents = Latents(dim, config["dim_latents"])
        self.img_to_latents = Latents(image_dim, config["dim_latents"])
        self.temperature = nn.Parameter(torch.tensor(math.log(1 / 0.07)))  # PRISM's init; the checkpoint's replaces it

    def encode_text(self, token_ids: torch.Tensor) -> torch.Tensor:
        """[prompts, L] ids as `text_tokenizer` gives them (already cut by one column) -> the L2-normalised text
        latents [prompts, dim_latents] (`text_to_latents(text_embedding)` in Prism.zero_shot)."""
        cls = torch.full((len(token_ids), 1), self.cls_id, dtype=token_ids.dtype, device=token_ids.device)
        ids = torch.cat([token_ids, cls], dim=1)
        real = (ids != self.pad_id).long()
        positions = torch.cumsum(real, dim=1) * real - 1 + POSITION_OFFSET  # pads: position row 1
        x = self.embed_tokens(ids) * self.embed_scale + self.embed_positions(positions)
        length = ids.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril()
        # Causal and no pad keys; the diagonal always, so a row of pads from the start has no empty softmax (NaN).
        # It only changes pad rows, which no other row reads.
        allowed = (causal & real.bool()[:, None, None, :]) | torch.eye(length, dtype=torch.bool, device=ids.device)
        for layer in self.layers:
            x = layer(x, allowed)
        return F.normalize(self.text_to_latents.to_latents(x[:, -1]), dim=-1)

    def image_projection(self) -> torch.Tensor:
        """[image_dim, dim_latents]: slide embedding @ it = img_to_latents before its normalisation."""
        return self.img_to_latents.to_latents.weight.T

    def logit_scale(self) -> float:
        return float(self.temperature.detach().exp())


def build_text(spec: SlideEncoderSpec) -> PrismText:
    return PrismText(text_config(spec), spec.embed_dim).float().eval()


def published_text_keys(state: dict) -> dict:
    """PRISM's checkpoint in PrismText's names: `text_decoder.model.biogpt.` removed from the token and position
    embeddings and the unimodal layers (those below num_hidden_layers // 2, counted in the file), the contrastive
    heads and `temperature` kept as named; the image resampler, the cross-attention layers, the decoder's `layer_norm`
    and `output_projection` dropped (the latter read as the token embedding where the file keeps only that name of the
    tied pair)."""
    decoder = {key.removeprefix(DECODER_PREFIX): tensor for key, tensor in state.items()
               if key.startswith(DECODER_PREFIX)}
    depth = 1 + max((int(m[1]) for m in map(_LAYER.fullmatch, decoder) if m), default=-1)
    first_x_attn_layer = depth // 2
    kept = {key: state[key] for key in HEAD_KEYS if key in state}
    for name, tensor in decoder.items():
        match = _LAYER.fullmatch(name)
        if name.startswith("embed_") or (match and int(match[1]) < first_x_attn_layer):
            if match and match[2].startswith("x_attn"):
                raise EvalsuiteError(f"PRISM checkpoint: '{DECODER_PREFIX}{name}' is a cross-attention in layer "
                                     f"{match[1]}, but PRISM's first {first_x_attn_layer} of {depth} decoder layers "
                                     "have none; not PRISM's text decoder")
            kept[name] = tensor
    if "embed_tokens.weight" not in kept and TIED_EMBEDDING in state:
        kept["embed_tokens.weight"] = state[TIED_EMBEDDING]
    return kept


class PrismTokenizer:
    """BioGPT's tokenizer laid out as Prism.zero_shot does: prompts -> [prompts, longest - 1] ids."""

    def __init__(self, spec: SlideEncoderSpec | None = None):
        config = text_config(spec) if spec is not None else TEXT_CONFIG
        # The longest prompt loses its final `</s>` to the cut and gains the class token: n ids take n positions
        # (a shorter prompt keeps its `</s>`: n + 1 <= the longest's n). So a prompt fits if n <= the positions.
        self.max_prompt_tokens = config["max_position_embeddings"]
        self.vocab_size = config["vocab_size"]
        self.beside: Path | None = None  # the --weights folder (or the weights file's folder), set by the caller
        self._loaded = None

    def folder(self) -> Path | None:
        """The folder with vocab.json and merges.txt: $EVALSUITE_BIOGPT_TOKENIZER, else <beside>/biogpt (where PRISM
        reads them), else <beside>; None where none has both."""
        env = os.environ.get(TOKENIZER_ENV)
        if env:
            path = Path(env).expanduser()
            missing = [name for name in TOKENIZER_FILES if not (path / name).is_file()]
            if missing:
                raise EvalsuiteError(f"{TOKENIZER_ENV}={path} lacks {' and '.join(missing)}; point it at a folder "
                                     f"with microsoft/biogpt's vocab.json and merges.txt ({TOKENIZER_URL})")
            return path
        candidates = [self.beside / "biogpt", self.beside] if self.beside else []
        return next((c for c in candidates if all((c / name).is_file() for name in TOKENIZER_FILES)), None)

    @property
    def cache_id(self) -> str:
        """The tokenizer as the text cache keys it: its name and, where the files are found, their hash."""
        folder = self.folder()
        if folder is None:
            return TOKENIZER_NAME
        digest = hashlib.sha256()
        for name in TOKENIZER_FILES:
            digest.update((folder / name).read_bytes())
        return f"{TOKENIZER_NAME}; sha256:{digest.hexdigest()}"

    def loaded(self):
        """transformers' BioGptTokenizer over the files, read once at the first prompt."""
        if self._loaded is None:
            folder = self.folder()
            if folder is None:
                where = f"in {self.beside}/biogpt or {self.beside}" if self.beside else "(none with --random-init)"
                raise EvalsuiteError(f"model 'prism' needs BioGPT's tokenizer files vocab.json and merges.txt, found "
                                     f"none {where}: get them from {TOKENIZER_URL} and put them in a biogpt/ folder "
                                     f"beside the --weights file or set {TOKENIZER_ENV}=FOLDER")
            try:
                import sacremoses  # noqa: F401 - BioGptTokenizer's Moses tokenization
                from transformers import BioGptTokenizer
            except ImportError as exc:
                raise EvalsuiteError(f"PRISM's tokenizer (transformers' BioGptTokenizer) needs {exc.name}: "
                                     f"pip install {exc.name}") from None
            tokenizer = BioGptTokenizer(vocab_file=str(folder / "vocab.json"), merges_file=str(folder / "merges.txt"))
            if len(tokenizer) > self.vocab_size:
                raise EvalsuiteError(f"{folder}: BioGPT's tokenizer there has {len(tokenizer)} tokens, more than "
                                     f"PRISM's {self.vocab_size} token embeddings; get {TOKENIZER_URL}")
            self._loaded = tokenizer
        return self._loaded

    def _encode(self, texts: list[str], **kwargs):
        tokenizer = self.loaded()
        # BioGPT.tokenize: each text + eos, special tokens added (BioGPT puts `</s>` first)
        return tokenizer([text + tokenizer.eos_token for text in texts], add_special_tokens=True,
                         return_token_type_ids=False, return_attention_mask=False, **kwargs)["input_ids"]

    def __call__(self, texts: list[str]) -> torch.Tensor:
        """All texts in one batch, right-padded, then the last column dropped (Prism.zero_shot's `[:, :-1]`)."""
        return self._encode(list(texts), padding=True, return_tensors="pt")[:, :-1]

    def prompt_token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each prompt's ids as BioGPT.tokenize lays them out (`</s>` ... `</s>`), neither padded nor cut."""
        return [list(ids) for ids in self._encode(list(texts))]


def text_tokenizer(spec: SlideEncoderSpec) -> PrismTokenizer:
    return PrismTokenizer(spec)
