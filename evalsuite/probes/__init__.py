"""Probes: estimators trained on cached float16 features (scikit-learn style fit/predict_proba).

Every probe takes features through `evalsuite.batches.iter_float32_batches`, so none ever
holds the whole cache as float32.
"""

from evalsuite.probes.knn import KNNProbe
from evalsuite.probes.linear import LinearProbe

PROBES = {
    "linear": LinearProbe,
    "knn": KNNProbe,
}
