"""MI-Zero probe: slide-level zero-shot classification by top-K pooling of tile-text cosines, nothing trained.

MI-Zero (Lu et al., CVPR 2023) as CONCH's code release implements it (mahmoodlab/CONCH at 141cc09,
conch/downstream/zeroshot_path.py, `topj_pooling` and `run_mizero`): per slide, every tile embedding is
L2-normalised and compared with each class's text embedding (cosine, [tiles, classes]); for each class separately
the K highest tile cosines are averaged (K clipped to the slide's tile count), the slide's class is the argmax of
these pooled cosines and its probabilities are softmax(logit_scale x pooled cosines). CONCH reports every K of
(1, 5, 10, 50, 100); here K is one hyper-parameter chosen on val by the card's selection metric, together with the
prompt set when a card offers several (docs/zeroshot.md, "Slide-level zero-shot (MI-Zero)").

Bags are read one slide at a time from the float16 cache, upcast on the device and mapped into the joint space by
the class texts' `image_to_joint` (CONCH's `forward_project` of stored tile features; the identity where the cache
holds the joint embedding). `fit` never reads the train split (nothing is fitted); the runner scores it afterwards
for the train row, as for the tile zeroshot probe.
"""

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.classification import METRICS
from evalsuite.probes._validate import require_texts
from evalsuite.probes.bags.cox import check_slide_targets
from evalsuite.probes.base import PROMPT_SETS, FittedProbe

DEFAULT_TOPJ = (1, 5, 10, 50, 100)  # CONCH's run_mizero default


def topj_pooled_cosines(cosines: torch.Tensor, topj) -> torch.Tensor:
    """[len(topj), columns]: for each j of `topj`, each column's mean of its j highest values of `cosines`
    [tiles, columns], j clipped to the number of tiles. One sort serves every j: a running mean of the sorted
    column gives all of them."""
    most = min(max(topj), cosines.shape[0])
    top = cosines.topk(most, dim=0).values  # each column sorted on its own, highest first
    counts = torch.arange(1, most + 1, device=cosines.device, dtype=top.dtype)[:, None]
    running_means = top.cumsum(dim=0) / counts
    return running_means[[min(int(j), most) - 1 for j in topj]]


def _checked_topj(topj) -> tuple:
    values = tuple(topj) if isinstance(topj, (list, tuple)) else (topj,)
    if not values or not all(isinstance(j, int) and not isinstance(j, bool) and j > 0 for j in values) \
            or len(set(values)) != len(values):
        raise EvalsuiteError(f"probe mizero: topj must be distinct positive tile counts, e.g. [1, 5, 10, 50, 100]; "
                             f"got {topj!r}")
    return values


class MIZeroProbe(FittedProbe):
    inputs = "bags"  # features.bags.SlideBags: one bag of tile embeddings per slide
    targets = ("class",)
    reads_class_texts = True  # the runner hands it the card's class text embeddings (probes/texts/class_texts.py)
    maps_images_to_joint = True  # applies class_texts.image_to_joint to each bag, as CONCH's forward_project
    chooses_on_val = True  # K (and the prompt set) are chosen on val
    learns_from_train = False
    val_chooses_among = (PROMPT_SETS, "topj")  # one prompt set and one K: val is neither read nor extracted

    def __init__(self, num_classes: int, topj: int | list[int] = DEFAULT_TOPJ, class_texts=None,
                 device: torch.device | str = "cpu", seed: int = 0):
        self.class_texts = require_texts(class_texts, "mizero")
        self.num_classes = num_classes
        self.topj = _checked_topj(topj)
        self.device = torch.device(device)
        self.seed = seed  # deterministic; kept for the uniform probe interface

    def fit(self, bags, targets, val_bags, val_targets, selection_metric: str = "balanced_accuracy"):
        """Chooses (prompt set, K) on val by `selection_metric`, the first best in the card's set order and the
        recipe's K order; val is not read when there is one of each. `bags`/`targets` (train) are not read."""
        sets = list(self.class_texts.embeddings)
        grid = [(name, j) for name in sets for j in self.topj]
        scores = {}
        if len(grid) > 1:
            labels = check_slide_targets(val_bags, val_targets, self.num_classes, "mizero probe val split",
                                         training=False)
            pooled = self._pooled(val_bags, sets, self.topj)  # [slides, sets, K, classes]
            for s, name in enumerate(sets):
                for k, j in enumerate(self.topj):
                    scores[(name, j)] = float(METRICS[selection_metric](labels, self._softmax(pooled[:, s, k])))
        self.prompt_set_, self.topj_ = max(grid, key=lambda cell: scores.get(cell, 0.0))
        self.selected_params_ = self._selected_params(selection_metric, scores)
        return self

    def _selected_params(self, selection_metric: str, scores: dict) -> dict:
        texts = self.class_texts
        by_cell = {name: {str(j): scores[(name, j)] for j in self.topj} for name in texts.embeddings} if scores else {}
        return {**texts.params_of(self.prompt_set_), "topj": self.topj_,
                **({f"val_{selection_metric}": scores[(self.prompt_set_, self.topj_)],
                    "val_by_prompt_set_and_topj": by_cell} if scores else {})}

    def pooled_cosines(self, bags) -> np.ndarray:
        """float32 [slides, classes]: each slide's top-K pooled cosines with the chosen prompt set's classes."""
        return self._pooled(bags, [self.prompt_set_], (self.topj_,))[:, 0, 0]

    def predict_proba(self, bags) -> np.ndarray:
        """float32 [slides, classes]: softmax(logit_scale x pooled cosines), as CONCH's run_mizero."""
        return self._softmax(self.pooled_cosines(bags))

    def _softmax(self, pooled: np.ndarray) -> np.ndarray:
        logits = torch.from_numpy(np.ascontiguousarray(pooled)) * self.class_texts.logit_scale
        return torch.softmax(logits, dim=1).numpy()

    @torch.no_grad()
    def _pooled(self, bags, sets: list, topj: tuple) -> np.ndarray:
        """float32 [slides, sets, K, classes]. Every set's class embeddings are columns of one matrix, so one
        product per bag serves all sets; a bag is upcast alone, never the split."""
        classes = torch.from_numpy(np.concatenate([self.class_texts.embeddings[n] for n in sets])).to(self.device)
        out = np.empty((len(bags), len(sets), len(topj), self.num_classes), dtype=np.float32)
        for index in range(len(bags)):
            tiles = torch.from_numpy(np.asarray(bags.bag(index))).to(self.device).float()
            tiles = self.class_texts.image_to_joint(tiles)
            cosines = torch.nn.functional.normalize(tiles, dim=1) @ classes.T  # [tiles, sets x classes]
            pooled = topj_pooled_cosines(cosines, topj).reshape(len(topj), len(sets), self.num_classes)
            out[index] = pooled.transpose(0, 1).cpu().numpy()
        return out
