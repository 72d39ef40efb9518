"""Files a run writes beside its run JSON: per-item test predictions and, with --plots, reliability diagrams.

They are written before the leaderboard append and removed again if it fails, so no file names a run that is not
on the leaderboard (the run JSON names them).
"""

import contextlib
from pathlib import Path

import numpy as np

from evalsuite.results.commit import RowsWrittenError
from evalsuite.results.predictions import prediction_key, save_predictions
from evalsuite.results.run_json import RUNS_FOLDER

# A probe result's per-item test outputs while the run is scored, never in its JSON: class probabilities,
# per-image confusion counts (segmentation), predicted targets (regression).
PER_ITEM_OUTPUTS = ("test_proba", "test_confusions", "test_predictions")


class _Written(list):
    keep = False


def popped_outputs(probe_results: list) -> dict:
    """{output name: {"probe/seed<seed>": array}} of PER_ITEM_OUTPUTS, taken out of the probe results."""
    return {name: {prediction_key(r["probe"], r["seed"]): r.pop(name) for r in probe_results if name in r}
            for name in PER_ITEM_OUTPUTS}


@contextlib.contextmanager
def written_beside_run(config, record: dict, test_labels, test_clusters, probe_results: list, reader=None):
    """The probe results' per-item test outputs (PER_ITEM_OUTPUTS, for `leaderboard --compare`, popped from them)
    and, with --plots, reliability diagrams; the run record names them. Files are removed when the block fails.
    `reader`: the run's reader, whose `item_ids("test")` name the stored items (asked only when there are some to
    store: a cross-validated run stores none)."""
    written = _Written()
    outputs = popped_outputs(probe_results)
    test_probas, test_confusions, test_predictions = (outputs[name] for name in PER_ITEM_OUTPUTS)
    try:
        if test_probas or test_confusions or test_predictions:
            unit, clusters = test_clusters
            # Masks: the counts stand for them; regression: the targets [N, T].
            labels = np.asarray(test_labels) if test_probas or test_predictions else None
            path = save_predictions(config.out_dir, record["run_id"], labels, clusters, test_probas, unit,
                                    confusions=test_confusions, class_names=record["task"]["classes"],
                                    predictions=test_predictions, item_ids=_test_item_ids(reader))
            written.append(path)
            record["predictions"] = {"file": path.name,
                                     "keys": sorted({**test_probas, **test_confusions, **test_predictions})}
        if config.plots and test_probas:
            first = len(written)
            _reliability_plots(config, record, test_labels, test_probas, written)
            record["plots"] = [str(path) for path in written[first:]]
        yield written
    except RowsWrittenError:
        written.keep = True  # the rows count, and the run JSON the next process moves into place names these files
        raise
    finally:
        if not written.keep:
            for path in written:
                with contextlib.suppress(OSError):  # a read-only --out: EROFS must not hide the one-line error
                    Path(path).unlink(missing_ok=True)


def _test_item_ids(reader) -> list | None:
    return reader.item_ids("test") if reader is not None else None


def _reliability_plots(config, record: dict, test_labels, test_probas: dict, written: list) -> None:
    """One diagram per probe and seed, each added to `written` as soon as it is on disk: a later one failing (a full
    disk) must not leave the earlier ones behind, named by no run JSON."""
    from evalsuite.results.reliability import save_reliability_diagram  # matplotlib: only when asked

    folder = Path(config.out_dir) / RUNS_FOLDER
    for key, proba in test_probas.items():
        written.append(save_reliability_diagram(np.asarray(test_labels), proba,
                                                folder / f"{record['run_id']}.{key.replace('/', '.')}.reliability.png",
                                                f"{record['task']['name']} / {record['model']['name']} / {key} (test)"))
