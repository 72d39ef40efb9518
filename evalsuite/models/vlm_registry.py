"""Vision-language models by the short names users type with `--model` (docs/zeroshot.md).

Each entry names the library that builds both towers (open_clip here: never copied model code), the
architecture config inside it, the checkpoint layout `--weights` must have, the pixels the image tower expects,
the text tokenizer and its context length, the logit scale of the published weights, and licence and access.
The image tower serves every probe like any other backbone; the text tower serves the `zeroshot` probe.

PLIP ships a transformers CLIPModel checkpoint: its keys are renamed into open_clip's CLIP (models/vlm_adapters.py).

Models the issue names that have no entry, and why (docs/zeroshot.md says what each needs): CONCH v1 ships as
MahmoodLab's `conch` package (GitHub only, not on PyPI) with its own CoCa code, MUSK as the `musk` package
(GitHub only) built on timm and torchscale with an XLM-Roberta sentencepiece tokenizer it ships, and KEEP as a
transformers model with `trust_remote_code` (code downloaded from its hub repository at load time).
"""

from dataclasses import dataclass

from evalsuite.models.registry import PretrainedCfg

# OpenAI CLIP's pixel statistics (open_clip.constants.OPENAI_DATASET_MEAN / _STD).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
OPEN_CLIP = "open_clip"
OPEN_CLIP_REPO = "https://github.com/mlfoundations/open_clip"


@dataclass(frozen=True)
class VLMSpec:
    name: str
    library: str  # which package builds the towers: "open_clip"
    architecture: str  # the library's model config name ("ViT-B-16")
    quick_gelu: bool  # OpenAI's CLIP weights were trained with QuickGELU; the same shapes load either way
    pretrained_cfg: PretrainedCfg  # pixels, licence, access (gated) and where the weights live
    context_length_tokens: int  # text tokens per prompt, start and end tokens included
    embed_dim: int  # width of the joint image-text space (the image embedding the probes read)
    published_logit_scale: float | None  # exp(logit_scale) of the published weights (None: not read); runs use the
    # value loaded from --weights
    tokenizer: str  # what tokenizes the prompts (part of the text cache key)
    checkpoint_layout: str  # what `--weights` must hold
    sources: tuple = ()
    unconfirmed: str = ""
    kind: str = "vision-language"


_SPECS = [
    VLMSpec(
        name="clip-vit-b-16",
        library=OPEN_CLIP, architecture="ViT-B-16", quick_gelu=True,
        # hub_id: open_clip's own copy of OpenAI's weights in its state-dict layout (open_clip_pytorch_model.bin).
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:timm/vit_base_patch16_clip_224.openai", input_size_px=224,
                                     mean=CLIP_MEAN, std=CLIP_STD, interpolation="bicubic", licence="MIT",
                                     gated=False),
        context_length_tokens=77, embed_dim=512, published_logit_scale=100.0,
        tokenizer="open_clip SimpleTokenizer (CLIP BPE, bpe_simple_vocab_16e6)",
        checkpoint_layout="open_clip state dict (visual.*, transformer.*, token_embedding.weight, "
                          "positional_embedding, ln_final.*, text_projection, logit_scale)",
        sources=("https://github.com/openai/CLIP", f"{OPEN_CLIP_REPO}/blob/main/src/open_clip/pretrained.py",
                 f"{OPEN_CLIP_REPO}/blob/main/src/open_clip/model_configs/ViT-B-16.json",
                 "https://huggingface.co/timm/vit_base_patch16_clip_224.openai"),
    ),
    VLMSpec(
        name="quiltnet-b-32",
        # QuiltNet-B-32's open_clip_config.json is ViT-B-32 without `quick_gelu` (so open_clip loads it with GELU),
        # preprocess_cfg CLIP's mean/std and open_clip's default bicubic resize.
        library=OPEN_CLIP, architecture="ViT-B-32", quick_gelu=False,
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:wisdomik/QuiltNet-B-32", input_size_px=224, mean=CLIP_MEAN,
                                     std=CLIP_STD, interpolation="bicubic", licence="MIT", gated=None),
        context_length_tokens=77, embed_dim=512, published_logit_scale=None,
        tokenizer="open_clip SimpleTokenizer (CLIP BPE, bpe_simple_vocab_16e6)",
        checkpoint_layout="open_clip state dict (open_clip_pytorch_model.bin: visual.*, transformer.*, "
                          "token_embedding.weight, positional_embedding, ln_final.*, text_projection, logit_scale)",
        sources=("https://huggingface.co/wisdomik/QuiltNet-B-32", "https://arxiv.org/abs/2306.11207",
                 "https://huggingface.co/wisdomik/QuiltNet-B-32/commit/88c3e9fce3fbd77101ad33e17f20fdec0aa21889"),
        unconfirmed="whether the hub repository is gated; its logit scale (read from the file at load); that the "
                    "hub's tokenizer files are CLIP's BPE vocabulary unchanged (the card loads "
                    "open_clip.get_tokenizer of the hub name; vocab 49408 as CLIP's)",
    ),    VLMSpec(
        name="plip",
        # PLIP ships a transformers CLIPModel (ViT-B/32, fine-tuned from OpenAI's CLIP); its keys are renamed into
        # open_clip's CLIP (evalsuite.models.vlm_adapters), the same tensors in the same module.
        library=OPEN_CLIP, architecture="ViT-B-32", quick_gelu=True,
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:vinid/plip", input_size_px=224, mean=CLIP_MEAN, std=CLIP_STD,
                                     interpolation="bicubic", licence="unconfirmed", gated=None),
        context_length_tokens=77, embed_dim=512, published_logit_scale=None,
        tokenizer="open_clip SimpleTokenizer (CLIP BPE, bpe_simple_vocab_16e6)",
        checkpoint_layout="transformers CLIPModel state dict (pytorch_model.bin or model.safetensors of vinid/plip: "
                          "text_model.*, vision_model.*, text_projection.weight, visual_projection.weight, "
                          "logit_scale)",
        sources=("https://huggingface.co/vinid/plip", "https://github.com/PathologyFoundation/plip",
                 "https://www.nature.com/articles/s41591-023-02504-3"),
        unconfirmed="licence and gating of the hub repository; hidden_act quick_gelu and the ViT-B/32 sizes of its "
                    "config.json (assumed from OpenAI's clip-vit-base-patch32, which PLIP fine-tunes); that its "
                    "tokenizer files are CLIP's BPE vocabulary unchanged",
    ),
]

VLMS = {spec.name: spec for spec in _SPECS}
