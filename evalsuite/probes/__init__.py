"""Probes: estimators trained on cached float16 features (scikit-learn style fit/predict_proba).

Every probe takes features through `evalsuite.probes.batches.iter_float32_batches`, so none ever
holds the whole cache as float32; the slide probes (abmil, meanpool, mizero) read one bag of tiles at a time.

Grouped by what a probe reads: pooled/ ([N, D] vectors), tokens/ (token grids), bags/ (a bag of tiles per slide or
patient), texts/ (images beside texts, and the text inputs themselves). PROBES maps a recipe's `probe:` to its class;
a new probe is a class in the folder of what it reads and one line here.
"""

from evalsuite.probes.bags.abmil import ABMILProbe
from evalsuite.probes.bags.meanpool import MeanPoolProbe
from evalsuite.probes.bags.mizero import MIZeroProbe
from evalsuite.probes.pooled.cox import CoxProbe
from evalsuite.probes.pooled.fewshot import FewShotProbe
from evalsuite.probes.pooled.knn import KNNProbe
from evalsuite.probes.pooled.linear import LinearProbe
from evalsuite.probes.pooled.logreg import LogisticRegressionProbe
from evalsuite.probes.pooled.retrieval import RetrievalProbe
from evalsuite.probes.pooled.ridge import HestRidgeProbe, RidgeProbe
from evalsuite.probes.texts.text_retrieval import TextRetrievalProbe
from evalsuite.probes.texts.zeroshot import ZeroShotProbe
from evalsuite.probes.tokens.seg_linear import SegLinearProbe
from evalsuite.probes.tokens.seg_masktransformer import SegMaskTransformerProbe

PROBES = {
    "linear": LinearProbe,
    "knn": KNNProbe,
    "fewshot": FewShotProbe,
    "retrieval": RetrievalProbe,
    "seg_linear": SegLinearProbe,
    "seg_masktransformer": SegMaskTransformerProbe,
    "abmil": ABMILProbe,
    "meanpool": MeanPoolProbe,
    "ridge": RidgeProbe,
    "ridge_hest": HestRidgeProbe,
    "zeroshot": ZeroShotProbe,
    "text_retrieval": TextRetrievalProbe,
    "mizero": MIZeroProbe,
    "logreg": LogisticRegressionProbe,
    "cox": CoxProbe,
}
