"""Probes: estimators trained on cached float16 features (scikit-learn style fit/predict_proba).

Every probe takes features through `evalsuite.probes.batches.iter_float32_batches`, so none ever
holds the whole cache as float32; the slide probes (abmil, meanpool, mizero) read one bag of tiles at a time.
"""

from evalsuite.probes.abmil import ABMILProbe
from evalsuite.probes.fewshot import FewShotProbe
from evalsuite.probes.knn import KNNProbe
from evalsuite.probes.linear import LinearProbe
from evalsuite.probes.meanpool import MeanPoolProbe
from evalsuite.probes.mizero import MIZeroProbe
from evalsuite.probes.retrieval import RetrievalProbe
from evalsuite.probes.ridge import HestRidgeProbe, RidgeProbe
from evalsuite.probes.seg_linear import SegLinearProbe
from evalsuite.probes.seg_masktransformer import SegMaskTransformerProbe
from evalsuite.probes.text_retrieval import TextRetrievalProbe
from evalsuite.probes.zeroshot import ZeroShotProbe

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
}
