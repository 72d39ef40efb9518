"""Issue 38: the interval beside a mean over seeds is the interval of that mean, and `show`, `leaderboard` and the
report page give the same bounds for the same number. Two real runs of the demo (random-init ViT, linear probe,
5 seeds each); the interval is recomputed here from the stored test predictions by a route of its own: the
item bootstrap's draws rebuilt from the task's seed (as metrics/bootstrap.draw_weights draws them), each seed scored
with scikit-learn's balanced accuracy under those item weights, the mean over seeds per draw read for K clusters
(docs/significance.md, scipy's t), its percentiles."""

import hashlib
import re

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli
from scipy import stats
from sklearn.metrics import balanced_accuracy_score

from evalsuite.results.predictions import load_predictions

SEEDS = (0, 1, 2, 3, 4)
DRAWS = 1000


def _recomputed(labels: np.ndarray, probas: list) -> tuple[float, float]:
    """The demo task's draws (its seed: the first 4 bytes of SHA-256 of "evalsuite draws demo"), each item its own
    cluster; each draw's mean over seeds moved as docs/significance.md's t(K - 1) reading says, then percentiles."""
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(b"evalsuite draws demo").digest()[:4], "big"))
    items = len(labels)
    means = []
    for _ in range(DRAWS):
        weights = np.bincount(rng.integers(0, items, size=items), minlength=items)
        kept = weights > 0
        means.append(np.mean([balanced_accuracy_score(labels[kept], p.argmax(axis=1)[kept],
                                                      sample_weight=weights[kept]) for p in probas]))
    observed = np.mean([balanced_accuracy_score(labels, p.argmax(axis=1)) for p in probas])
    drawn = np.array(means)
    se = np.sqrt(np.mean((drawn - observed) ** 2))
    z = (drawn - observed) / se
    read = observed + se * np.sign(z) * np.sqrt(items / (items - 1)) * stats.t.isf(stats.norm.sf(np.abs(z)), items - 1)
    return tuple(np.percentile(read, [2.5, 97.5]))


def _show_interval(out, run_id: str) -> str:
    shown = run_cli("show", run_id, "--out", out)
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if line.split()[:2] == ["linear", "balanced_accuracy"])
    return re.search(r"\[(\S+), (\S+)\]\s*$", row).group(0)


@pytest.mark.slow
def test_show_leaderboard_and_report_give_the_interval_of_the_five_seed_mean(tmp_path):
    out = tmp_path / "out"
    for pooling in ("cls", "mean_patch"):
        result = run_cli("run", "--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0",
                         "--seeds", ",".join(map(str, SEEDS)), "--probes", "linear", "--pooling", pooling,
                         "--out", out)
        assert result.returncode == 0, result.stderr
    board = pd.read_csv(out / "leaderboard.csv")
    model = "test_vit+random-init+pooling=cls"
    run_id = board.loc[board["model"] == model, "run_id"].iloc[0]
    stored = load_predictions(out, run_id)
    probas = [stored.probas[f"linear/seed{seed}"] for seed in SEEDS]
    assert len({float(p.argmax(axis=1).mean()) for p in probas}) > 1  # the seeds disagree: their mean is not one seed
    low, high = _recomputed(stored.labels, probas)
    expected = f"[{low:.4f}, {high:.4f}]"

    assert _show_interval(out, run_id) == expected
    wide = run_cli("leaderboard", "--out", out, "--format", "csv")
    assert wide.returncode == 0, wide.stderr
    written = pd.read_csv(out / "leaderboard_wide.csv").set_index("model")
    assert (written.loc[model, "demo_ci_low"], written.loc[model, "demo_ci_high"]) == pytest.approx((low, high),
                                                                                                    abs=1e-6)
    assert expected in run_cli("leaderboard", "--out", out).stdout
    assert run_cli("report", "--out", out).returncode == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    cell = re.search(rf'data-model="{re.escape(model)}".*?</td>', page, re.DOTALL).group(0)
    assert expected in cell
    # The envelope of the seeds' own intervals, what `show` printed before, is wider than the mean's.
    seeds = board[(board["model"] == model) & (board["split"] == "test") & (board["metric"] == "balanced_accuracy")]
    assert seeds["ci_low"].min() < low and high < seeds["ci_high"].max()
