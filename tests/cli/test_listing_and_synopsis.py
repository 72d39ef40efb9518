"""`evalsuite list tasks` shows each card's kind and whether it needs --data-root; the README synopsis names every
`run` option; Slurm logs are ignored by git (issue 25 item 12)."""

import re
import shutil
import subprocess

import pytest
from conftest import REPO, run_cli


def _task_rows(stdout: str) -> dict:
    """{task name: (kind heading it is listed under, its row's cells after the name)}."""
    rows, kind = {}, None
    for line in stdout.splitlines():
        if re.match(r"^  [a-z_]+ \(\d+\):$", line):
            kind = line.split()[0]
        elif line.startswith("    ") and line.split()[0] != "name" and set(line.strip()) != {"-", " "}:
            rows[line.split()[0]] = (kind, line.split()[1:])
    return rows


def test_list_tasks_groups_by_kind_and_says_how_to_get_the_data():
    result = run_cli("list", "tasks")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[2].split() == ["name", "data", "get", "it"]
    rows = _task_rows(result.stdout)
    # Reference: the shipped cards' kind and data_root (datasets/*.yaml) and their entries in downloads/sources.py.
    assert rows["demo"] == ("classification", ["shipped", "with", "evalsuite", "-"])
    assert rows["demo_seg"][0] == "segmentation"
    assert rows["demo_slide"] == ("slide", ["built", "offline", "on", "first", "use", "-"])
    assert rows["pannuke"][0] == "segmentation"
    assert " ".join(rows["pannuke"][1]).startswith("needs --data-root DIR `evalsuite download pannuke --data-root DIR`")
    assert "by hand from https://bmirds.github.io/MHIST/" in " ".join(rows["mhist"][1])  # a form: the page
    assert "your own cohort" in " ".join(rows["tile_csv"][1])
    assert rows["slide_survival_csv"][0] == "survival"
    assert "docs/tasks.md" in result.stdout and "docs/slides.md" in result.stdout


def test_readme_synopsis_names_every_run_option():
    """Reference: `evalsuite run --help`; --no-autocast is the old spelling of --precision fp32 (named in the text)."""
    result = run_cli("run", "--help")
    flags = set(re.findall(r"--[a-z][a-z-]*", result.stdout)) - {"--help", "--no-autocast"}
    readme = (REPO / "README.md").read_text()
    synopsis = readme[readme.index("evalsuite run --task TASK"):readme.index("evalsuite robustness --task")]
    assert sorted(flag for flag in flags if flag not in synopsis) == []
    assert "--pooling cls|cls+mean_patch|mean_patch" in synopsis


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs a git checkout")
def test_slurm_job_logs_are_ignored_by_git():
    done = subprocess.run(["git", "check-ignore", "-q", "slurm-123456.out"], cwd=REPO)
    assert done.returncode == 0  # 1: not ignored


def test_readme_states_the_torch_bounds_of_pyproject_and_the_cpu_install():
    """Issue 25 item 11. Reference: pyproject.toml's dependency lower bounds, and the pair CI tests (.ci/run)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = [d for d in dependencies if re.match(r"torch(vision)?>=", d)]
    readme = (REPO / "README.md").read_text()
    assert len(bounds) == 2 and all(f"`{bound}`" in readme for bound in bounds), bounds
    cpu_install = next(line for line in readme.splitlines() if "--index-url" in line)
    assert "https://download.pytorch.org/whl/cpu" in cpu_install
    ci = (REPO / ".ci" / "run").read_text()
    pins = re.findall(r"'(torch(?:vision)?==[0-9.]+)'", cpu_install)
    assert len(pins) == 2 and all(pin in ci for pin in pins)  # the CPU command installs the pair CI tests


def test_every_shipped_card_and_registry_model_has_a_docs_row():
    """Issue 52: docs/tasks.md (slides: docs/slides.md) names every card, docs/models.md (vision-language:
    docs/zeroshot.md; slide encoders: docs/slide_encoders.md) every registry model."""
    from evalsuite.models.registry import REGISTRY
    from evalsuite.tasks.resources import cards_dir, yaml_names

    docs = REPO / "docs"
    task_docs = (docs / "tasks.md").read_text() + (docs / "slides.md").read_text()
    model_docs = "".join((docs / name).read_text() for name in ("models.md", "zeroshot.md", "slide_encoders.md"))
    assert [name for name in yaml_names(cards_dir()) if f"`{name}`" not in task_docs] == []
    assert [name for name in REGISTRY if f"`{name}`" not in model_docs] == []
