"""A slide encoder's text tower (TITAN's, PRISM's) behind the interface the zero-shot probe reads of a vision-language
model's (models/vision_language/towers.py, TextTower): prompts -> embeddings, the logit scale, and the map of the
cached slide embeddings into the text space.

The entry's `extra["text_module"]` names the module (models/slide/<name>.py) that keeps the contract:
  `build_text(spec) -> nn.Module` with `encode_text(ids) -> [prompts, D]`, `image_projection() -> [embed_dim, D]`
    (slide embedding @ it = the slide in the text space, before normalising) and `logit_scale() -> float`;
  `published_text_keys(state) -> state`: the published checkpoint's tensors the text module reads, in its names;
  `text_tokenizer(spec)`: ids in the layout `encode_text` takes, `prompt_token_ids`, `max_prompt_tokens`, `cache_id`,
    and `beside` (the --weights folder, where its files may lie);
  `CLASS_RULE`: how prompts make class scores ("ensemble": the normalised mean embedding per class, as CLIP, CONCH
    and TITAN; "sum_prompt_probabilities": a softmax over every prompt, summed per class, as PRISM).

The text module is built and its weights read from the slide encoder's checkpoint only when a probe asks for a prompt
(a linear-probe run never pays for it), still before any tile is extracted (probes/texts/inputs.py).
"""

import importlib
from pathlib import Path

import numpy as np
import torch

from evalsuite.models import checkpoints
from evalsuite.models.image.architecture import RANDOM_INIT_SEED
from evalsuite.models.vision_language.towers import ImageToJoint, TextTower


def text_module_of(spec):
    """The module of the entry's text side, or None for a slide encoder without one."""
    name = spec.extra.get("text_module")
    return importlib.import_module(f"evalsuite.models.slide.{name}") if name else None


class SlideTextTower(TextTower):
    """TextTower's interface over a slide encoder's text module; shares its prompt checks and NaN refusal."""

    def __init__(self, spec, weights_path: Path | None, weights_id: str):
        # TextTower.__init__ reads a built CLIP model; this one builds its network on first use instead.
        self.module = text_module_of(spec)
        self.spec = spec
        self.model_name = spec.name
        self.weights_path, self.weights_id = weights_path, weights_id
        self.checkpoint = f"checkpoint {weights_path}" if weights_path else \
            f"random weights (--random-init, seed {RANDOM_INIT_SEED})"
        self.tokenizer = self.module.text_tokenizer(spec)
        if weights_path is not None:
            self.tokenizer.beside = weights_path if weights_path.is_dir() else weights_path.parent
        self.context_length_tokens = spec.extra["text"]["context_length_tokens"]
        self.max_prompt_tokens = self.tokenizer.max_prompt_tokens
        self.class_rule = self.module.CLASS_RULE
        self._network = None

    @property
    def tokenizer_id(self) -> str:
        return self.tokenizer.cache_id

    @property
    def network(self) -> torch.nn.Module:
        """The text module with the checkpoint's tensors (key for key), or seeded random ones; built once."""
        if self._network is None:
            network = checkpoints.seeded(lambda: self.module.build_text(self.spec), RANDOM_INIT_SEED)
            if self.weights_path is not None:
                checkpoints.load_key_for_key(network, self.weights_path, prepare=self.module.published_text_keys)
            self._network = network.eval().requires_grad_(False)
        return self._network

    @property
    def logit_scale(self) -> float:
        return float(self.network.logit_scale())

    @property
    def image_to_joint(self) -> ImageToJoint:
        return ImageToJoint(self.network.image_projection())

    @torch.no_grad()
    def encode(self, texts: list[str], device: torch.device) -> np.ndarray:
        """Unnormalised [prompts, D] float32 embeddings, all prompts in one batch: PRISM pads a prompt set to its
        longest prompt and cuts a column after that, so a prompt's ids depend on the batch it is tokenized in."""
        network = self.network.to(device)
        rows = network.encode_text(self.tokenizer(list(texts)).to(device)).float().cpu().numpy()
        self.check_finite(rows, list(texts))
        return rows


def slide_text_tower(spec, weights_path: Path | None, weights_id: str) -> SlideTextTower | None:
    """The entry's text tower, or None where it has none (then no probe may read prompts with it)."""
    return SlideTextTower(spec, weights_path, weights_id) if spec.extra.get("text_module") else None
