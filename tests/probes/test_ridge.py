"""The ridge probes against scikit-learn: the val-chosen ridge, and HEST-Benchmark's StandardScaler + PCA + lsqr
ridge."""

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.linear_model import Ridge
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from evalsuite.errors import EvalsuiteError
from evalsuite.probes.pooled.ridge import HestRidgeProbe, RidgeProbe


def _regression_data(rng, items: int, dim: int, targets: int, offset: float = 0.0):
    features = (rng.normal(size=(items, dim)) * rng.uniform(0.2, 3.0, size=dim) + offset).astype(np.float16)
    weights = rng.normal(size=(dim, targets)) / np.sqrt(dim)
    values = np.log1p(np.abs(features.astype(np.float64) @ weights * 4 + rng.normal(size=(items, targets))))
    return features, values


def test_hest_ridge_equals_scikit_learn_re_implementation_of_hest_train_test_reg():
    """HEST benchmark.py: Pipeline(StandardScaler, PCA(256, random_state=seed)) fit on train, outputs as float32
    tensors; trainer.py train_test_reg: Ridge(solver='lsqr', alpha=100 / (dim x genes), fit_intercept=False,
    max_iter=1000, random_state=seed). 300 features and 3,200 spots make scikit-learn's PCA exact
    (covariance_eigh), as ours is."""
    rng = np.random.default_rng(0)
    features, targets = _regression_data(rng, 4000, 300, 50, offset=2.0)
    train, test = slice(0, 3200), slice(3200, None)
    probe = HestRidgeProbe(seed=1, batch_size=700).fit(features[train], targets[train])
    ours = probe.predict(features[test])

    pipe = Pipeline([("scaler", StandardScaler()), ("PCA", PCA(n_components=256, random_state=1))])
    x_train = pipe.fit_transform(features[train].astype(np.float64)).astype(np.float32)
    x_test = pipe.transform(features[test].astype(np.float64)).astype(np.float32)
    reference = Ridge(solver="lsqr", alpha=100 / (256 * 50), random_state=1, fit_intercept=False,
                      max_iter=1000).fit(x_train, targets[train].astype(np.float32)).predict(x_test)
    np.testing.assert_allclose(ours, reference, atol=1e-6, rtol=0)
    assert probe.selected_params_ == {"alpha": 100 / (256 * 50), "components": 256}


def test_hest_ridge_takes_fewer_components_when_train_is_smaller_than_256():
    rng = np.random.default_rng(1)
    features, targets = _regression_data(rng, 120, 40, 3)
    probe = HestRidgeProbe().fit(features, targets)
    assert probe.selected_params_["components"] == 40
    assert probe.predict(features).shape == (120, 3)


def test_ridge_chooses_alpha_on_val_and_equals_scikit_learn_ridge_on_standardised_features():
    rng = np.random.default_rng(2)
    features, targets = _regression_data(rng, 900, 30, 4, offset=50.0)  # a large mean: the shifted sums hold
    train, val, test = slice(0, 500), slice(500, 700), slice(700, None)
    probe = RidgeProbe(alpha=[0.01, 1.0, 100.0], batch_size=64).fit(features[train], targets[train], features[val],
                                                                     targets[val], "pearson")
    alpha = probe.selected_params_["alpha"]
    scaler = StandardScaler().fit(features[train].astype(np.float64))
    # Ours minimises mean squared error + alpha ||w||^2: scikit-learn's summed loss with alpha x rows.
    reference = Ridge(alpha=alpha * 500).fit(scaler.transform(features[train].astype(np.float64)), targets[train])
    np.testing.assert_allclose(probe.predict(features[test]),
                               reference.predict(scaler.transform(features[test].astype(np.float64))), atol=1e-8)
    assert probe.selected_params_["val_pearson"] == pytest.approx(max(
        np.mean([np.corrcoef(t, p)[0, 1] for t, p in zip(targets[val].T, _val_predictions(features, targets, a).T)])
        for a in (0.01, 1.0, 100.0)), abs=1e-9)


def _val_predictions(features, targets, alpha: float) -> np.ndarray:
    scaler = StandardScaler().fit(features[:500].astype(np.float64))
    model = Ridge(alpha=alpha * 500).fit(scaler.transform(features[:500].astype(np.float64)), targets[:500])
    return model.predict(scaler.transform(features[500:700].astype(np.float64)))


def test_a_target_constant_on_train_is_a_one_line_error():
    rng = np.random.default_rng(3)
    features, targets = _regression_data(rng, 50, 8, 3)
    targets[:, 1] = 0.0
    for probe in (RidgeProbe(), HestRidgeProbe()):
        with pytest.raises(EvalsuiteError, match="constant") as error:
            probe.fit(features, targets, features, targets)
        assert "\n" not in str(error.value)
