"""The time a sweep has left, estimated per task (issue 41 item 6): a cheap first cell no longer sets the estimate
of expensive ones."""

from types import SimpleNamespace

import pytest

from evalsuite.sweeps.cell_lines import TimeLeft, headline, task_kind


def _cell(task: str):
    return SimpleNamespace(task=SimpleNamespace(task=task))


def test_each_cell_is_estimated_from_finished_cells_of_its_task_then_its_kind_then_all():
    kinds = (task_kind("demo"), task_kind("pcam"), task_kind("demo_seg"))
    assert kinds == ("classification", "classification", "segmentation")
    left = TimeLeft()
    assert left.seconds([_cell("demo")]) == 0.0  # nothing finished: no estimate yet
    left.finished(_cell("demo"), 10.0)
    left.finished(_cell("demo"), 20.0)
    left.finished(_cell("demo_seg"), 300.0)
    # demo: its own mean 15 s; pcam: the classification kind's mean 15 s; demo_seg: its own 300 s; a card that does not
    # load: the mean of all finished cells, 110 s.
    rest = [_cell("demo"), _cell("pcam"), _cell("demo_seg"), _cell("no-such-card")]
    assert left.seconds(rest) == pytest.approx(15 + 15 + 300 + 110)


def test_the_headline_is_each_probes_mean_test_score_over_its_seeds():
    record = {"task": {"selection_metric": "pearson_mean"},
              "probes": [{"probe": "ridge", "metrics": {"test": {"pearson_mean": 0.5}}},
                         {"probe": "ridge", "metrics": {"test": {"pearson_mean": 0.7}}},
                         {"probe": "knn", "metrics": {"test": {}}}]}
    assert headline(record) == "test pearson_mean: ridge 0.6000"
