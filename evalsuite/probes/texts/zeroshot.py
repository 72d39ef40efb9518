"""Zero-shot probe: class probabilities from a vision-language model's text tower, nothing trained.

logits = logit_scale x cosine(image embedding, class text embedding), probabilities = their softmax; the image
embeddings are the float16 cache's rows (upcast a batch at a time) mapped into the joint space by the class texts'
`image_to_joint` (the model's image projection where its cache holds the features before it, as CONCH's and MUSK's
do; else unchanged), the class embeddings come from the card's prompts (evalsuite.probes.texts.class_texts). The train
split is never read: a zero-shot probe has nothing to fit. Val is read only when the card offers several prompt sets,
to choose one by the card's selection metric, as other probes choose hyper-parameters. The kind's scorer then gives
the same metrics, intervals, calibration and stored test predictions as for the linear and kNN probes.
"""

import numpy as np
import torch

from evalsuite.metrics.classification import METRICS
from evalsuite.probes._validate import check_features_labels, require_texts
from evalsuite.probes.base import PROMPT_SETS, FittedProbe
from evalsuite.probes.batches import iter_float32_batches

# How prompts make class scores (a text tower's `class_rule`): the normalised mean embedding per class (CLIP, CONCH,
# TITAN), or a softmax over every prompt with each class's probabilities summed (PRISM's zero_shot).
ENSEMBLE = "ensemble"
SUM_PROMPT_PROBABILITIES = "sum_prompt_probabilities"

ZERO_SHOT = "nothing (zero-shot)"  # selected_params' `trained_on`: how results tell a zero-shot row


class ZeroShotProbe(FittedProbe):
    reads_class_texts = True  # the runner hands it the card's class text embeddings (probes/texts/class_texts.py)
    maps_images_to_joint = True  # applies class_texts.image_to_joint to every batch of cached rows
    targets = ("class",)
    # Val is a choice between prompt sets only where a card offers several; with one set it is never read, nor
    # extracted (base.splits_read): a run of this probe alone embeds the test split only.
    chooses_on_val = False
    learns_from_train = False
    val_chooses_among = (PROMPT_SETS,)

    def __init__(self, num_classes: int, batch_size: int = 4096, class_texts=None,
                 device: torch.device = torch.device("cpu"), seed: int = 0):
        self.class_texts = require_texts(class_texts, "zeroshot")
        self.num_classes = num_classes
        self.batch_size = int(batch_size)
        self.device = torch.device(device)
        self.seed = seed  # deterministic; kept for the uniform probe interface

    def fit(self, features, labels, val_features, val_labels, selection_metric: str = "balanced_accuracy"):
        """Chooses a prompt set on val when the card has several; `features`/`labels` (train) are not read."""
        names = list(self.class_texts.embeddings)
        scores = {}
        if len(names) > 1:
            val_labels = check_features_labels(val_features, val_labels, self.num_classes, "zeroshot probe val split")
            for name in names:
                self.prompt_set_ = name
                scores[name] = float(METRICS[selection_metric](val_labels, self.predict_proba(val_features)))
        self.prompt_set_ = max(names, key=lambda n: scores.get(n, 0.0))
        self.selected_params_ = {**self.class_texts.params_of(self.prompt_set_),
                                 **({f"val_{selection_metric}": scores[self.prompt_set_],
                                     "val_by_prompt_set": scores} if scores else {})}
        return self

    def logits(self, features) -> np.ndarray:
        """[N, rows] float32: logit_scale x cosine of each image embedding with each row of the chosen set's
        embeddings (classes; prompts where the model sums prompt probabilities per class)."""
        texts = torch.from_numpy(self.class_texts.embeddings[self.prompt_set_]).to(self.device)
        out = np.empty((len(features), len(texts)), dtype=np.float32)
        for rows, batch in iter_float32_batches(features, np.arange(len(features)), self.batch_size, self.device):
            joint = self.class_texts.image_to_joint(batch)
            cosine = torch.nn.functional.normalize(joint, dim=1) @ texts.T
            out[rows] = (self.class_texts.logit_scale * cosine).cpu().numpy()
        return out

    def predict_proba(self, features) -> np.ndarray:
        probabilities = torch.softmax(torch.from_numpy(self.logits(features)), dim=1).numpy()
        if self.class_texts.rule != SUM_PROMPT_PROBABILITIES:
            return probabilities
        # PRISM's zero_shot: one softmax over every prompt, each class's prompts' probabilities summed.
        prompt_class = self.class_texts.prompt_class[self.prompt_set_]
        return probabilities @ np.eye(self.num_classes, dtype=np.float32)[prompt_class]


def chance_level_note(record: dict) -> str | None:
    """What a zero-shot run with random weights means, said where its numbers are printed: untrained towers are
    not aligned, so every score is chance level and checks the pipeline, not a model."""
    random_weights = str(record["model"]["weights_id"]).startswith("random-init")
    # Every probe that compares images with texts untrained (zeroshot, text_retrieval) marks itself so.
    names = sorted({p["probe"] for p in record["probes"]
                    if p.get("selected_params", {}).get("trained_on") == ZERO_SHOT})
    if not random_weights or not names:
        return None
    return (f"{', '.join(names)} ran with random weights (--random-init): the image and text towers are untrained "
            "and not aligned, so its numbers are chance level (they test the pipeline, not the model); for real "
            "numbers pass --weights with the model's checkpoint (docs/zeroshot.md)")
