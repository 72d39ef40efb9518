"""Vision-language models by the short names users type with `--model` (docs/zeroshot.md).

Each entry names the library that builds both towers (open_clip here: never copied model code), the
architecture config inside it, the checkpoint layout `--weights` must have, the pixels the image tower expects,
the text tokenizer and its context length, the logit scale of the published weights, and licence and access.
The image tower serves every probe like any other backbone; the text tower serves the `zeroshot` probe.
`probe_features` says which image output the image probes read and the cache holds: the joint embedding, or, where
the model prescribes it for linear probes and MIL (CONCH, MUSK), the features before its linear image projection,
which the text-reading probes then apply to the cached rows (docs/zeroshot.md, "Which feature each probe reads").

PLIP ships a transformers CLIPModel checkpoint: its keys are renamed into open_clip's CLIP (models/vision_language/adapters.py).

MUSK's code (lilab-stanford/MUSK, GitHub only) is torchscale's BEiT-3 encoder with two bias-free heads; PyPI's
torchscale 0.3.0 computes the same network, so the entry builds it from torchscale under MUSK's names
(models/vision_language/musk.py). torchscale pins timm<1.0 and is installed outside pip's resolver (no extra can hold it):
`pip install --no-deps torchscale==0.3.0 fairscale==0.4.0`.

KEEP ships its model code in its hub repository (`trust_remote_code`); that code only composes timm's ViT-L/16,
an MLP head and transformers' BertModel, so the entry builds the same parts from those libraries under KEEP's
module names (models/vision_language/keep.py), and never runs or downloads the hub's code.

CONCH v1's code (MahmoodLab's `conch` package, GitHub only) is a CoCa model whose contrastive half is timm's
ViT-B/16, an attentional pooler and a text transformer that open_clip also provides: the entry composes those
parts under the module names of CONCH's checkpoint (models/vision_language/conch.py) and reads its tokenizer with
transformers from a file the user supplies; the captioning half is not built (zero-shot does not use it).
"""

from dataclasses import dataclass

from evalsuite.models.image.entries import IMAGENET_MEAN, IMAGENET_STD, PretrainedCfg

# OpenAI CLIP's pixel statistics (open_clip.constants.OPENAI_DATASET_MEAN / _STD).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
OPEN_CLIP = "open_clip"
OPEN_CLIP_REPO = "https://github.com/mlfoundations/open_clip"
CLIP_BPE = "open_clip SimpleTokenizer (CLIP BPE, bpe_simple_vocab_16e6)"  # CLIP, QuiltNet and PLIP prompts
TORCHSCALE = "torchscale"  # MUSK: torchscale's BEiT3 and two heads under MUSK's names (models/vision_language/musk.py)
MUSK_REPO = "https://github.com/lilab-stanford/MUSK/blob/714b666"  # the commit read for the entry
CONCH_MODULES = "conch (timm + open_clip modules)"  # CONCH v1 composed from the libraries (models/vision_language/conch.py)
CONCH_REPO = "https://github.com/mahmoodlab/CONCH/blob/141cc09"  # the commit read for the entry
TIMM_BERT = "timm+transformers"  # KEEP: timm's ViT and transformers' BertModel under KEEP's names (models/vision_language/keep.py)
# QuiltNet-B-16-PMB: timm's ViT-B/16, transformers' BertModel under open_clip's names (vision_language/quilt_pmb.py)
QUILT_PMB_MODULES = "timm+transformers (open_clip CustomTextCLIP names)"
# Which image output the feature cache holds and the image probes (linear, kNN, ABMIL, ...) read; the probes that
# compare images with texts (zeroshot, mizero, text_retrieval) map the cached rows into the joint space
# (models/vision_language/towers.py, ImageToJoint). docs/zeroshot.md, "Which feature each probe reads", cites each model's instructions.
# The two state-dict layouts of a CLIP checkpoint the open_clip entries read (models/vision_language/adapters.py).
OPEN_CLIP_LAYOUT = "open_clip"  # visual.*, transformer.*, token_embedding.weight, ...
HF_CLIP_LAYOUT = "transformers CLIPModel"  # text_model.*, vision_model.*, text_projection.weight, ...
# exp(logit_scale) of a trained CLIP lies in [1, 100]: its training clamps the stored log scale to [0, ln 100]
# after every step (the CLIP paper; open_clip's `training/train.py`; KEEP's `training/path_training/
# train_hierarchy.py` at 0ee1fb2 does the same; QuiltNet and CONCH were trained with open_clip-based code, not read
# here). A value outside it (NaN, inf, an exp that overflows) is a broken or foreign checkpoint.
CLAMPED_LOGIT_SCALE = 100.0
JOINT_EMBEDDING = "joint_embedding"  # `encode_image`: the cache already holds the joint-space embedding
BEFORE_PROJECTION = "before_projection"  # the features before a linear, bias-free image projection into the joint space


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
    # What the image probes read (JOINT_EMBEDDING or BEFORE_PROJECTION), as the model's own instructions prescribe for
    # linear probes and MIL; BEFORE_PROJECTION needs the model's `encode_image_before_projection` and
    # `image_projection` (encode_image = before_projection @ image_projection).
    probe_features: str = JOINT_EMBEDDING
    # The largest exp(logit_scale) a checkpoint of this entry may hold (CLAMPED_LOGIT_SCALE where its training clamps
    # it); None where that is not confirmed: then only a non-finite or overflowing scale is refused (models/vision_language/towers.py).
    max_logit_scale: float | None = CLAMPED_LOGIT_SCALE
    # The state-dict layouts `--weights` may have (open_clip entries; the others read their own model's names).
    checkpoint_layouts: tuple = (OPEN_CLIP_LAYOUT,)


_SPECS = [
    VLMSpec(
        name="clip-vit-b-16",
        library=OPEN_CLIP, architecture="ViT-B-16", quick_gelu=True,
        # hub_id: open_clip's own copy of OpenAI's weights in its state-dict layout (open_clip_pytorch_model.bin).
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:timm/vit_base_patch16_clip_224.openai", input_size_px=224,
                                     mean=CLIP_MEAN, std=CLIP_STD, interpolation="bicubic", licence="MIT",
                                     gated=False),
        context_length_tokens=77, embed_dim=512, published_logit_scale=100.0,
        tokenizer=CLIP_BPE,
        checkpoint_layout="open_clip state dict (visual.*, transformer.*, token_embedding.weight, "
                          "positional_embedding, ln_final.*, text_projection, logit_scale)",
        # OpenAI's weights also come as a transformers CLIPModel (openai/clip-vit-base-patch16, quick_gelu): the same
        # model, renamed on load.
        checkpoint_layouts=(OPEN_CLIP_LAYOUT, HF_CLIP_LAYOUT),
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
        tokenizer=CLIP_BPE,
        checkpoint_layout="open_clip state dict (open_clip_pytorch_model.bin: visual.*, transformer.*, "
                          "token_embedding.weight, positional_embedding, ln_final.*, text_projection, logit_scale)",
        sources=("https://huggingface.co/wisdomik/QuiltNet-B-32", "https://arxiv.org/abs/2306.11207",
                 "https://huggingface.co/wisdomik/QuiltNet-B-32/commit/88c3e9fce3fbd77101ad33e17f20fdec0aa21889"),
        unconfirmed="whether the hub repository is gated; its logit scale (read from the file at load); that the "
                    "hub's tokenizer files are CLIP's BPE vocabulary unchanged (the card loads "
                    "open_clip.get_tokenizer of the hub name; vocab 49408 as CLIP's)",
    ),
    VLMSpec(
        name="quiltnet-b-16",
        # QuiltNet-B-16's open_clip_config.json (hub commit 42d3269) is open_clip's ViT-B-16 (joint width 512; image
        # 224 px, 12 layers, 768 wide, patch 16; text context 77, vocab 49408, 512 wide, 8 heads, 12 layers) without
        # `quick_gelu` (GELU), preprocess_cfg CLIP's mean/std (open_clip's default bicubic resize).
        library=OPEN_CLIP, architecture="ViT-B-16", quick_gelu=False,
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:wisdomik/QuiltNet-B-16", input_size_px=224, mean=CLIP_MEAN,
                                     std=CLIP_STD, interpolation="bicubic", licence="MIT", gated=None),
        context_length_tokens=77, embed_dim=512, published_logit_scale=None,
        tokenizer=CLIP_BPE,
        checkpoint_layout="open_clip state dict (open_clip_pytorch_model.bin: visual.*, transformer.*, "
                          "token_embedding.weight, positional_embedding, ln_final.*, text_projection, logit_scale)",
        sources=("https://huggingface.co/wisdomik/QuiltNet-B-16",
                 "https://huggingface.co/wisdomik/QuiltNet-B-16/commit/42d3269f0cdb466531282b5272e6b2cf7ca111d9",
                 "https://github.com/wisdomikezogwo/quilt1m/blob/20a58247190f5d6d09c581967850952a0b07af48/README.md",
                 "https://arxiv.org/abs/2306.11207"),
        unconfirmed="whether the hub repository is gated; its logit scale (read from the file at load); that the "
                    "hub's tokenizer files are CLIP's BPE vocabulary unchanged (the card loads open_clip.get_tokenizer "
                    "of the hub name; vocab 49408 as CLIP's); the transformers-format pytorch_model.bin and config.json "
                    "added to the hub repository later (Nov 2023) were not read, so only the open_clip file is taken",
    ),
    VLMSpec(
        name="quiltnet-b-16-pmb",
        # open_clip_config.json (hub commit 813c35d): timm vit_base_patch16_224 (timm_pool "", timm_proj linear),
        # the BERT of microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract (hf_proj_type mlp, hf_pooler_type
        # cls_last_hidden_state_pooler, context 256), joint width 512, CLIP mean/std; composed offline from timm and
        # transformers under open_clip's module names (models/vision_language/quilt_pmb.py).
        library=QUILT_PMB_MODULES, architecture="timm vit_base_patch16_224 + BertModel (PubMedBERT-base)",
        quick_gelu=False,
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:wisdomik/QuiltNet-B-16-PMB", input_size_px=224, mean=CLIP_MEAN,
                                     std=CLIP_STD, interpolation="bicubic", licence="MIT", gated=None),
        context_length_tokens=256, embed_dim=512, published_logit_scale=None,
        tokenizer="BertTokenizerFast (PubMedBERT's vocab.txt, lower-cased), 256 tokens",
        checkpoint_layout="open_clip CustomTextCLIP state dict (open_clip_pytorch_model.bin of "
                          "wisdomik/QuiltNet-B-16-PMB: visual.trunk.* timm ViT-B/16, visual.head.proj.weight, "
                          "text.transformer.* BertModel without pooler, text.proj.0.weight, text.proj.2.weight, "
                          "logit_scale), with the repository's vocab.txt beside it",
        sources=("https://huggingface.co/wisdomik/QuiltNet-B-16-PMB",
                 "https://huggingface.co/wisdomik/QuiltNet-B-16-PMB/commit/813c35d85013ba9374397e9201335741083436a0",
                 "https://huggingface.co/wisdomik/QuiltNet-B-16-PMB/commit/4e7fc6f0de676be0837b2286cac539b1cb48a700",
                 f"{OPEN_CLIP_REPO}/blob/v3.3.0/src/open_clip/hf_model.py",
                 f"{OPEN_CLIP_REPO}/blob/v3.3.0/src/open_clip/timm_model.py", "https://arxiv.org/abs/2306.11207"),
        unconfirmed="Microsoft's PubMedBERT config.json (BERT-base sizes and vocab 30522 taken from fine-tuned copies "
                    "naming it as base); that the repository's vocab.txt is Microsoft's (open_clip reads Microsoft's); "
                    "the file's key list (read from open_clip's code; the 784 MB file size fits it); the trained logit "
                    "scale (read from the file at load); gating; config.json and preprocessor_config.json added to "
                    "the hub repository in Mar 2024 were not read",
    ),
    VLMSpec(
        name="plip",
        # PLIP ships a transformers CLIPModel (ViT-B/32, fine-tuned from OpenAI's CLIP); its keys are renamed into
        # open_clip's CLIP (evalsuite.models.vision_language.adapters), the same tensors in the same module.
        library=OPEN_CLIP, architecture="ViT-B-32", quick_gelu=True,
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:vinid/plip", input_size_px=224, mean=CLIP_MEAN, std=CLIP_STD,
                                     interpolation="bicubic", licence="unconfirmed", gated=None),
        context_length_tokens=77, embed_dim=512, published_logit_scale=None,
        tokenizer=CLIP_BPE,
        # Only a transformers file: an open_clip-layout ViT-B/32 file (QuiltNet's, LAION's) is a GELU model whose
        # tensors load key for key into this QuickGELU one and give wrong embeddings (models/vision_language/adapters.py).
        checkpoint_layouts=(HF_CLIP_LAYOUT,),
        checkpoint_layout="transformers CLIPModel state dict (pytorch_model.bin or model.safetensors of vinid/plip: "
                          "text_model.*, vision_model.*, text_projection.weight, visual_projection.weight, "
                          "logit_scale)",
        sources=("https://huggingface.co/vinid/plip", "https://github.com/PathologyFoundation/plip",
                 "https://www.nature.com/articles/s41591-023-02504-3"),
        unconfirmed="licence and gating of the hub repository; hidden_act quick_gelu and the ViT-B/32 sizes of its "
                    "config.json (assumed from OpenAI's clip-vit-base-patch32, which PLIP fine-tunes); that its "
                    "tokenizer files are CLIP's BPE vocabulary unchanged",
    ),
    VLMSpec(
        name="keep",
        # KEEP's modeling_keep.py composes timm's ViT-L/16 (UNI's kwargs), an MLP visual head and transformers'
        # BertModel; evalsuite.models.vision_language.keep builds the same parts from timm and transformers under its names.
        library=TIMM_BERT, architecture="vit_large_patch16_224 + visual_head MLP + BertModel (BERT-base)",
        quick_gelu=False,
        # Its preprocessing: resize the short side to 224 (bicubic), centre crop 224, ImageNet mean/std.
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:Astaxanthin/KEEP", input_size_px=224, mean=IMAGENET_MEAN,
                                     std=IMAGENET_STD, interpolation="bicubic", licence="MIT", gated=None),
        context_length_tokens=256, embed_dim=768, published_logit_scale=None,
        tokenizer="BertTokenizerFast (KEEP's vocab.txt, lower-cased), 256 tokens",
        checkpoint_layout="KEEP's state dict (visual.* timm ViT-L/16, visual_head.0.*, visual_head.2.*, text.* "
                          "BertModel with pooler, logit_scale), with the repository's vocab.txt beside it",
        sources=("https://huggingface.co/Astaxanthin/KEEP/blob/e6083675bedca07963774907fadbf019b0f983ac/modeling_keep.py",
                 "https://huggingface.co/Astaxanthin/KEEP/blame/9ab05d7b22bd0a94e6e5733e36e8198a7df32450/config.json",
                 "https://huggingface.co/Astaxanthin/KEEP/blob/e6083675bedca07963774907fadbf019b0f983ac/"
                 "tokenizer_config.json",
                 "https://github.com/MAGIC-AI4Med/KEEP/blob/56d1905e56a1db0b2620838466cc35fc0478638c/"
                 "WSI_evaluation/load_keep.py",
                 "https://github.com/MAGIC-AI4Med/KEEP/blob/9483a766e97097c73467acbbe845ff3f458bceaf/"
                 "quick_start/keep_inference.py",
                 "https://github.com/MAGIC-AI4Med/KEEP/blob/2a5fa901dc2b226b8952feaaf88fa1966900d96a/"
                 "training/configs/keep_config.yml", "https://arxiv.org/abs/2412.13126"),
        unconfirmed="the hub's later modeling_keep.py revisions (605f24b, 9ab05d7, 06471d0: the GitHub copies of the "
                    "class, read, agree with d5e7cfd) and config.json at main; the weight file's name and dtype and "
                    "whether it holds text.embeddings.position_ids (dropped if present); the trained logit scale "
                    "(read from the file at load); gating (a third-party table lists it as open); which class "
                    "AutoTokenizer resolves for the hub folder (vocab.txt + do_lower_case read; BERT WordPiece "
                    "assumed)",
    ),
    VLMSpec(
        name="conch",
        # CONCH v1 (conch_ViT-B-16.json of its code): timm ViT-B/16 at 448 px, a 1-query attentional pooler (8 heads,
        # 512 wide), LayerNorm and a 512x512 projection; a CoCa text tower (12 layers, 768 wide, class embedding
        # appended, context 128). Its transform: resize the short side to 448 (bicubic), centre crop, CLIP mean/std.
        library=CONCH_MODULES, architecture="conch_ViT-B-16 (contrastive towers)", quick_gelu=False,
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:MahmoodLab/CONCH", input_size_px=448, mean=CLIP_MEAN,
                                     std=CLIP_STD, interpolation="bicubic", licence="CC-BY-NC-ND-4.0", gated=True),
        context_length_tokens=128, embed_dim=512, published_logit_scale=None,
        tokenizer="CONCH byte-level BPE, uncased (conch_byte_level_bpe_uncased.json, transformers "
                  "PreTrainedTokenizerFast), 127 tokens + class embedding",
        checkpoint_layout="CONCH's pytorch_model.bin of MahmoodLab/CONCH: visual.trunk.* (timm ViT-B/16), "
                          "visual.attn_pool_contrast.*, visual.ln_contrast.*, visual.proj_contrast, text.*, "
                          "logit_scale (text_decoder.*, visual.attn_pool_caption.*, visual.ln_caption.* are dropped)",
        sources=("https://huggingface.co/MahmoodLab/CONCH",
                 f"{CONCH_REPO}/conch/open_clip_custom/model_configs/conch_ViT-B-16.json",
                 f"{CONCH_REPO}/conch/open_clip_custom/coca_model.py",
                 f"{CONCH_REPO}/conch/open_clip_custom/vision_tower.py",
                 f"{CONCH_REPO}/conch/open_clip_custom/transformer.py",
                 f"{CONCH_REPO}/conch/open_clip_custom/custom_tokenizer.py",
                 f"{CONCH_REPO}/conch/open_clip_custom/transform.py",
                 "https://www.nature.com/articles/s41591-024-02856-4"),
        unconfirmed="that pytorch_model.bin holds exactly the key names and shapes CONCH's code gives its CoCa "
                    "model (read from the code, not from the file); the trained logit scale (read from the file at "
                    "load)",
        # CONCH's README ("Using the model as an vision encoder"): `encode_image(proj_contrast=False,
        # normalize=False)` for linear probes and MIL, the projected embedding for zero-shot and retrieval.
        probe_features=BEFORE_PROJECTION,
    ),
    VLMSpec(
        name="musk",
        # musk_large_patch16_384 of MUSK's modeling.py: torchscale BEiT-3 (1024 wide, 24 multiway layers, 16 heads,
        # FFN 4096, patch 16, 384 px, vocabulary 64010), bias-free vision_head and language_head (1024x1024). Its
        # transform: resize the short side to 384 (bicubic, antialias), centre crop, timm's IMAGENET_INCEPTION_MEAN/STD.
        library=TORCHSCALE, architecture="torchscale BEiT3 (musk_large_patch16_384) + vision_head/language_head",
        quick_gelu=False,
        pretrained_cfg=PretrainedCfg(hub_id="hf-hub:xiangjx/musk", input_size_px=384, mean=(0.5, 0.5, 0.5),
                                     std=(0.5, 0.5, 0.5), interpolation="bicubic", licence="CC-BY-NC-ND-4.0",
                                     gated=True),
        context_length_tokens=100, embed_dim=1024, published_logit_scale=None,
        tokenizer="XLMRobertaTokenizer (MUSK's tokenizer.spm), <s> + 98 pieces + </s>, padded to 100 with a mask",
        checkpoint_layout="MUSK's model.safetensors of xiangjx/musk (beit3.* torchscale BEiT3, multiway .A. image "
                          "and .B. text; vision_head.weight, language_head.weight, logit_scale), with the "
                          "repository's tokenizer.spm beside it",
        sources=("https://huggingface.co/xiangjx/musk", f"{MUSK_REPO}/musk/modeling.py",
                 f"{MUSK_REPO}/musk/utils.py", f"{MUSK_REPO}/README.md",
                 f"{MUSK_REPO}/benchmarks/clip_benchmark/cli.py",
                 f"{MUSK_REPO}/benchmarks/clip_benchmark/metrics/zeroshot_classification.py",
                 "https://pypi.org/project/torchscale/0.3.0/", "https://www.nature.com/articles/s41586-024-08378-w"),
        unconfirmed="the hub file's key list (MUSK's code loads it non-strictly; read from the code: 974 keys) and "
                    "that its image position table is for 384 px (a table of another size is refused, not "
                    "interpolated as MUSK's loader does); gating as the hub page shows it (the README says users "
                    "agree to terms); the trained logit scale (read from the file at load); that the hub's "
                    "tokenizer.spm is the GitHub package's (sha256 6f5e2fef...43f4, on which the ids were checked)",
        # MUSK's README (lines 97-106): `with_head=False` for linear probes and MIL, the head for zero-shot; its
        # benchmark's linear probe the same (linear_probe.py line 69). Its `ms_aug` features are not built.
        probe_features=BEFORE_PROJECTION,
        # MUSK's training code (BEiT-3 retrieval) was not seen clamping logit_scale, and its benchmark scales by a
        # fixed 100: only a non-finite or overflowing scale is refused.
        max_logit_scale=None,
    ),
]

VLMS = {spec.name: spec for spec in _SPECS}
