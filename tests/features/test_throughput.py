"""Throughput figures: the forward clock (CUDA events on a GPU, no synchronisation per forward) and the summary
arithmetic."""

import pytest
import torch

from evalsuite.features import throughput
from evalsuite.features.throughput import ForwardClock, load_split_record, save_split_record, split_record, summarise


def test_forward_clock_counts_images_and_passes_arguments_through():
    clock = ForwardClock(lambda images, layers=(): images.sum(dim=1) + len(layers), torch.device("cpu"))
    out = clock(torch.ones(3, 4), layers=(1, 2))
    clock(torch.ones(5, 4))
    assert out.tolist() == [6.0, 6.0, 6.0]
    assert clock.images == 8 and clock.seconds > 0


class FakeEvent:
    """torch.cuda.Event as the clock uses it: recorded in order, 5 ms apart; `query` says whether it has happened
    (here: every event but the newest), `synchronize` waits for it."""

    recorded = []

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.waited = False

    def record(self):
        FakeEvent.recorded.append(self)
        self.at_ms = 5.0 * len(FakeEvent.recorded)

    def query(self):
        return self is not FakeEvent.recorded[-1]

    def synchronize(self):
        self.waited = True

    def elapsed_time(self, end):
        return end.at_ms - self.at_ms


def test_forward_clock_on_a_gpu_times_with_events_and_never_synchronises_the_device(monkeypatch):
    """Issue 39: no host-device synchronisation per batch. Two events a forward; the ones that have happened are
    added up as the forwards go (none waited on), and reading `seconds` waits for the last one only."""
    FakeEvent.recorded = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: pytest.fail("the clock synchronised the device"))
    clock = ForwardClock(lambda images: images, torch.device("cuda", 1))
    for _ in range(4):
        clock(torch.ones(2, 3))
    assert len(FakeEvent.recorded) == 8 and clock.images == 8
    assert len(clock._pending) == 1  # the newest forward is still running
    assert clock.seconds == pytest.approx(4 * 0.005) and FakeEvent.recorded[-1].waited


def test_device_name_asks_cuda_for_a_gpu_and_names_the_cpu_otherwise(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: f"NVIDIA A100-SXM4-80GB ({d})")
    assert throughput.device_name(torch.device("cuda", 0)) == "NVIDIA A100-SXM4-80GB (cuda:0)"
    assert throughput.device_name(torch.device("cpu"))  # /proc/cpuinfo's model name, or the platform's


def test_summary_rates_and_device_hours():
    per_split = {"train": split_record(300, 10.0, 6.0, "cpu X", 1), "val": split_record(100, 5.0, 2.0, "cpu X", 1),
                 "test": None}  # a split cached before throughput was recorded
    summary = summarise(per_split, total_images=600)
    assert summary["throughput_img_s"] == pytest.approx(400 / 15, abs=1e-3)
    assert summary["forward_img_s"] == pytest.approx(400 / 8, abs=1e-3)
    # 600 images at 26.67 img/s on one device: 22.5 s.
    assert summary["device_hours_est"] == pytest.approx(22.5 / 3600, abs=1e-6)
    assert summary["device_name"] == "cpu X"


def test_summary_of_two_ranks_counts_both_devices():
    # Rank 0 forwarded half of 400 images in 10 s; its peer did the other half at the same time.
    summary = summarise({"train": split_record(200, 10.0, 8.0, "gpu", 2)}, total_images=400)
    assert summary["throughput_img_s"] == pytest.approx(40.0)
    assert summary["device_hours_est"] == pytest.approx(400 / 40 / 3600 * 2, abs=1e-6)


def test_summary_without_figures_is_all_null():
    summary = summarise({"train": None, "val": None, "test": None}, total_images=10)
    assert summary["throughput_img_s"] is None and summary["device_hours_est"] is None
    assert summary["device_name"] is None and summary["host_load_1m"] is None


def test_stored_record_round_trips_and_a_damaged_one_is_ignored(tmp_path):
    record = split_record(10, 1.0, 0.5, "cpu", 1)
    save_split_record(tmp_path, record)
    assert load_split_record(tmp_path) == record
    (tmp_path / throughput.THROUGHPUT_FILE).write_text("{not json")
    assert load_split_record(tmp_path) is None
    assert load_split_record(tmp_path / "absent") is None


def test_a_refused_write_of_the_figures_does_not_fail(tmp_path):
    assert save_split_record(tmp_path / "no such folder", split_record(1, 1.0, 1.0, "cpu", 1)) is False


def test_rates_record_the_host_load_they_were_measured_under(monkeypatch):
    """Issue 41: a rate measured on a busy host is not the device's rate; the busiest split's load goes with it."""
    loads = iter([(3.5, 2.0, 1.0), (0.25, 0.2, 0.1)])
    monkeypatch.setattr(throughput.os, "getloadavg", lambda: next(loads))
    per_split = {"train": split_record(300, 10.0, 6.0, "cpu X", 1), "val": split_record(100, 5.0, 2.0, "cpu X", 1)}
    assert per_split["train"]["host_load_1m"] == 3.5 and per_split["train"]["host_cpus"] >= 1
    summary = summarise(per_split, total_images=600)
    assert summary["host_load_1m"] == 3.5 and "gpu_hours_est" not in summary
