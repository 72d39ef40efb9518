"""Issue 41 item 6: a run says what it is doing before its first heavy step, and an interrupt says how to resume.

"Within a second" is shown without a clock (the suite has no timed tests): the first line comes before torch is
imported, the seconds-long step every command that computes starts with."""

import subprocess
import sys

from evalsuite import cli, runner

RUN = ["run", "--task", "demo", "--model", "test_vit", "--random-init", "--probes", "knn", "--num-workers", "0"]
# The CLI's entry point with a marker written to stderr the moment torch is first imported.
MARKED_ENTRY = """
import builtins, sys
real_import = builtins.__import__
def marking_import(name, *args, **kwargs):
    if name.split('.')[0] == 'torch' and 'torch' not in sys.modules:
        sys.stderr.write('<<torch import>>\\n')
        sys.stderr.flush()
    return real_import(name, *args, **kwargs)
builtins.__import__ = marking_import
sys.argv = ['evalsuite', *sys.argv[1:]]
from evalsuite.cli import entry_point
entry_point()
"""


def _stderr_lines(*args) -> list:
    result = subprocess.run([sys.executable, "-c", MARKED_ENTRY, *map(str, args)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith(("progress: ", "<<"))]


def test_a_cached_run_names_its_stages_and_speaks_before_importing_torch(tmp_path):
    first = _stderr_lines(*RUN, "--out", tmp_path)
    assert first[0] == "progress: run: task demo, model test_vit: importing torch, building the task and the backbone"
    assert first[1] == "<<torch import>>"
    assert any(line.startswith("progress: features (ram): extracting train (") for line in first)
    cached = _stderr_lines(*RUN, "--out", tmp_path)
    assert cached[:2] == first[:2]
    assert "progress: features (ram): cached: train, val, test" in cached
    assert "progress: probes: 1 fit(s): knn x 1 seed(s); then the test intervals (bootstrap)" in cached


def test_an_interrupted_run_prints_the_command_that_resumes_it(tmp_path, monkeypatch, capsys):
    def interrupted(config, builds=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run", interrupted)
    args = [*RUN, "--out", str(tmp_path / "out dir")]
    assert cli.main(args) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == ("evalsuite: interrupted; finished chunks of the feature caches are kept: `evalsuite run --task "
                    "demo --model test_vit --random-init --probes knn --num-workers 0 --out "
                    f"'{tmp_path / 'out dir'}'` resumes")


def test_an_interrupted_listing_has_nothing_to_resume(monkeypatch, capsys):
    from evalsuite.commands import listing

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(listing, "main", interrupted)
    code = cli.main(["list", "tasks"])
    assert code == 130 and capsys.readouterr().err.strip() == "evalsuite: interrupted"


def test_an_interrupted_sweep_prints_the_command_that_resumes_it(tmp_path, monkeypatch, capsys):
    import yaml

    from evalsuite.sweeps import local

    def interrupted(config, builds=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(local, "run", interrupted)
    sweep = tmp_path / "grid.yaml"
    model = {"model": "test_vit", "random_init": True, "name": "vit"}
    sweep.write_text(yaml.safe_dump({"name": "grid", "models": [model], "tasks": ["demo"], "probes": ["knn"],
                                     "device": "cpu", "num_workers": 0, "out": str(tmp_path / "out")}))
    assert cli.main(["sweep", "run", str(sweep)]) == 130
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].startswith("sweep grid: 1 cells (1 models x 1 tasks, 1 seed(s)): 0 done")
    assert captured.err.strip().splitlines()[-1] == (f"evalsuite: interrupted; finished cells are kept: `evalsuite "
                                                     f"sweep run {sweep}` resumes")


def test_a_terminated_run_prints_the_command_that_resumes_it(tmp_path, monkeypatch, capsys):
    """SIGTERM outside an extraction (which stops after its chunk, exit 75) stopped the process without a word."""
    import os
    import signal

    def terminated(config, builds=None):
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(runner, "run", terminated)
    previous = signal.getsignal(signal.SIGTERM)
    assert cli.main([*RUN, "--out", str(tmp_path)]) == 143
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "evalsuite: terminated (SIGTERM); finished chunks of the feature caches are kept: `evalsuite run --task demo")
    assert signal.getsignal(signal.SIGTERM) is previous  # the handler is the command's only
