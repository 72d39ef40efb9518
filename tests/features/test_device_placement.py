"""A GPU run's first forward found the backbone still on the CPU (found by benchmarks/gpu_check.py on an H100: every
uncached `evalsuite run` and `evalsuite budget` without data stopped with "Input type (c10::BFloat16) and bias type
(float) should be the same"). The CPU cannot show a weight on the wrong device, so the order is checked: every
forward of a run, and the budget's blank pass, comes after `place_on_device` put the backbone on the run's device."""

from evalsuite import cli
from evalsuite.features import card_plan, extract, prepare
from evalsuite.models.backbones import Backbone

VIT = ["--model", "test_vit", "--random-init", "--num-workers", "0"]


def _record_order(monkeypatch) -> list:
    events, place = [], extract.place_on_device

    def placed(backbone, device):
        events.append(("placed", device.type))
        return place(backbone, device)

    def recorded(features):
        def forwarded(self, images, *args, **kwargs):
            events.append(("forward", images.device.type))
            return features(self, images, *args, **kwargs)
        return forwarded

    for module in (extract, prepare, card_plan):
        monkeypatch.setattr(module, "place_on_device", placed)
    for name in ("pooled_features", "dense_features"):  # tile and segmentation tasks
        monkeypatch.setattr(Backbone, name, recorded(getattr(Backbone, name)))
    return events


def test_a_run_places_the_backbone_on_its_device_before_its_first_forward(tmp_path, monkeypatch):
    events = _record_order(monkeypatch)
    assert cli.main(["run", "--task", "demo", "--probes", "knn", *VIT, "--out", str(tmp_path)]) == 0
    forwards = [index for index, event in enumerate(events) if event[0] == "forward"]
    assert forwards and events[0] == ("placed", "cpu") and forwards[0] > 0


def test_a_budget_without_data_places_the_backbone_before_its_blank_pass(tmp_path, monkeypatch):
    events = _record_order(monkeypatch)
    assert cli.main(["budget", "--task", "pannuke", *VIT, "--out", str(tmp_path), "--mem", "64G"]) == 0
    assert events[:2] == [("placed", "cpu"), ("forward", "cpu")]
