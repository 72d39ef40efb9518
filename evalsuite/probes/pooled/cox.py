"""Cox probe on slide (or patient) embeddings: the mean-pool probe's linear Cox model (probes/bags/meanpool.py: the
vectors standardised on train, an L2 grid of Adam-trained heads, the best val c-index kept) on vectors a slide encoder
made, one row per patient. Patho-Bench fits scikit-survival's CoxnetSurvivalAnalysis instead (an elastic net, alpha
0.01/0.02/0.07 with l1_ratio 0.5 on raw embeddings: advanced_usage/configs/coxnet/coxnet.yaml at 660e770);
docs/slide_encoders.md says how the two differ."""

import numpy as np

from evalsuite.probes.bags.cox import check_train_val
from evalsuite.probes.bags.meanpool import MeanPoolProbe


class CoxProbe(MeanPoolProbe):
    inputs = "vectors"
    targets = ("survival",)

    def fit(self, features, targets, val_features, val_targets, selection_metric: str = "c_index"):
        self.survival_, targets, val_targets = check_train_val("cox", features, targets, val_features, val_targets,
                                                                self.num_classes)
        self._require(survival=True)
        self._fit_cox(np.asarray(features), targets, np.asarray(val_features), val_targets, selection_metric)
        return self

    def predict_risk(self, features) -> np.ndarray:
        """float32 [items]: higher = shorter expected survival."""
        self._require(survival=True)
        return self._risks(np.asarray(features), self.cox_weight_[:, None])[:, 0]
