"""Files a run writes beside its run JSON: per-item test predictions and, with --plots, reliability diagrams.

They are written before the leaderboard append and removed again if it fails, so no file names a run that is not
on the leaderboard (the run JSON names them).
"""

import contextlib
from pathlib import Path

import numpy as np

from evalsuite.reporting.commit import RowsWrittenError
from evalsuite.reporting.predictions import save_predictions
from evalsuite.reporting.results import RUNS_FOLDER


class _Written(list):
    keep = False


@contextlib.contextmanager
def written_beside_run(config, record: dict, test_labels, test_clusters, test_probas: dict,
                        test_confusions: dict | None = None):
    """Per-item test probabilities or per-image confusion counts (for `leaderboard --compare`) and, with --plots,
    reliability diagrams; the run record names them. Files are removed when the block fails."""
    written, test_confusions = _Written(), test_confusions or {}
    try:
        if test_probas or test_confusions:
            unit, clusters = test_clusters
            labels = np.asarray(test_labels) if test_probas else None  # masks: the counts stand for them
            path = save_predictions(config.out_dir, record["run_id"], labels, clusters, test_probas, unit,
                                    confusions=test_confusions, class_names=record["task"]["classes"])
            written.append(path)
            record["predictions"] = {"file": path.name, "keys": sorted({**test_probas, **test_confusions})}
        if config.plots and test_probas:
            record["plots"] = [str(p) for p in _reliability_plots(config, record, test_labels, test_probas)]
            written.extend(Path(p) for p in record["plots"])
        yield written
    except RowsWrittenError:
        written.keep = True  # the rows count, and the run JSON the next process moves into place names these files
        raise
    finally:
        if not written.keep:
            for path in written:
                with contextlib.suppress(OSError):  # a read-only --out: EROFS must not hide the one-line error
                    Path(path).unlink(missing_ok=True)


def _reliability_plots(config, record: dict, test_labels, test_probas: dict) -> list:
    from evalsuite.reporting.reliability import save_reliability_diagram  # matplotlib: only when asked

    folder = Path(config.out_dir) / RUNS_FOLDER
    return [save_reliability_diagram(np.asarray(test_labels), proba,
                                     folder / f"{record['run_id']}.{key.replace('/', '.')}.reliability.png",
                                     f"{record['task']['name']} / {record['model']['name']} / {key} (test)")
            for key, proba in test_probas.items()]
