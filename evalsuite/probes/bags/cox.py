"""The Cox proportional-hazards loss of the slide probes, and how a slide probe tells its objective from its targets.

Loss: the negative Cox partial log-likelihood with Breslow's handling of tied times, averaged over
the events: -1/E * sum over events i of (risk_i - log sum_{j: time_j >= time_i} exp(risk_j)).
Sorting by descending time turns each risk set into a prefix, so its log-sum-exp is one
logcumsumexp (stable for any risk scale); tied times share the prefix up to the last of the tie,
Breslow's risk set. On a mini-batch the risk sets are the batch's, the usual deep-survival
approximation (DeepSurv); a batch without an event has no term and gives a zero loss.
"""

import numpy as np
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.survival import check_survival_targets
from evalsuite.probes._validate import check_features_labels


def cox_loss(risk: torch.Tensor, time: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
    """Mean negative partial log-likelihood of `risk` [b] (a scalar) or of each column of `risk` [b, heads]
    (a vector [heads]), for `time` [b] and `event` [b] (1 observed, 0 censored)."""
    order = torch.argsort(time, descending=True, stable=True)
    risk_sorted, time_sorted = risk[order], time[order]
    log_risk_set = torch.logcumsumexp(risk_sorted, dim=0)
    # Breslow: every slide tied at time t is in the risk set of t, so each row takes its tie's last prefix.
    _, tie_sizes = torch.unique_consecutive(time_sorted, return_counts=True)
    last_of_tie = (torch.cumsum(tie_sizes, dim=0) - 1).repeat_interleave(tie_sizes)
    log_risk_set = log_risk_set[last_of_tie]
    observed = event[order].to(risk.dtype)
    if risk.ndim == 2:
        observed = observed[:, None]
    # No event: every term is multiplied by 0, which keeps a graph whose gradient is zero.
    log_likelihood = ((risk_sorted - log_risk_set) * observed).sum(dim=0)
    return -log_likelihood / observed.sum(dim=0).clamp(min=1)


def is_survival(targets) -> bool:
    """2-D targets are (time, event) rows; 1-D ones are class ids."""
    return np.ndim(targets) == 2


def check_slide_targets(bags, targets, num_classes: int, what: str, training: bool) -> np.ndarray:
    """Checked targets of `len(bags)` slides: float64 [S, 2] (time, event) or int64 class ids [S]."""
    if len(np.asarray(targets)) != len(bags):
        raise EvalsuiteError(f"{what}: {len(bags)} slides but {len(np.asarray(targets))} targets; the split's "
                             "cache and its targets disagree: remove the task's cache and rerun")
    if is_survival(targets):
        return check_survival_targets(targets, what, training=training)
    if np.ndim(targets) != 1:
        raise EvalsuiteError(f"{what}: targets must be class ids [slides] or (time, event) rows [slides, 2], "
                             f"got shape {np.shape(targets)}")
    # The class check takes a feature array only for its shape: an empty [slides, 0] one stands in for the bags.
    return check_features_labels(np.empty((len(bags), 0), np.float16), targets, num_classes, what)


def check_train_val(probe: str, bags, targets, val_bags, val_targets, num_classes: int) -> tuple:
    """(survival?, checked train targets, checked val targets) of a slide probe's fit."""
    return (is_survival(targets),
            check_slide_targets(bags, targets, num_classes, f"{probe} probe train split", training=True),
            check_slide_targets(val_bags, val_targets, num_classes, f"{probe} probe val split", training=False))
