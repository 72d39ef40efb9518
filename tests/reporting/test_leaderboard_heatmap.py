"""`leaderboard --plot`: a heatmap PNG of the wide table; matplotlib stays out of `run`."""

import subprocess
import sys

from conftest import assert_one_line_error, run_cli
from test_compare import build_board
from test_leaderboard_wide import add_run


def test_plot_writes_a_png_sized_to_the_table(tmp_path):
    board = tmp_path / "leaderboard.csv"
    models = ["uni2_h", "virchow2", "resnet50_imagenet+random-init"]
    for rank, model in enumerate(models):
        for task in ["bach", "crc100k", "mhist"]:
            for seed in range(3):
                add_run(board, model, task, seed, 0.9 - 0.1 * rank + 0.01 * seed)
    add_run(board, "phikon", "bach", 0, 0.75)  # one task only: a grey "no result" cell for the others
    png = tmp_path / "plots" / "heatmap.png"
    result = run_cli("leaderboard", "--out", tmp_path, "--plot", png)
    assert result.returncode == 0, result.stderr
    assert f"heatmap: {png}" in result.stderr
    assert "Warning" not in result.stderr, result.stderr  # matplotlib's deprecations included

    import matplotlib.image

    image = matplotlib.image.imread(png)
    height, width, _ = image.shape
    # 4 model rows and 3 task columns at 150 dpi: wide enough for the labels, one band per model.
    assert 900 < width < 2400 and 400 < height < 1200, image.shape
    assert image[..., :3].std() > 0.1  # not a blank canvas


def test_an_unwritable_plot_format_is_a_one_line_error(tmp_path):
    add_run(tmp_path / "leaderboard.csv", "A", "t1", 0, 0.5)
    assert_one_line_error(run_cli("leaderboard", "--out", tmp_path, "--plot", tmp_path / "x.notaformat"),
                          "cannot write the heatmap", "use a .png name")


def test_the_leaderboard_command_imports_neither_torch_nor_scikit_learn(tmp_path):
    """Issue 29: `leaderboard` took 3.5 s on 2 cores, 1.0 s of it importing scikit-learn (torch it never needed);
    benchmarks/startup.py measures the wall time. Without a clock: neither module is loaded after the command."""
    code = ("import sys; from evalsuite.cli import main; code = main(sys.argv[1:]); "
            "print(code, [m for m in ('torch', 'sklearn') if m in sys.modules])")
    out = tmp_path / "out"
    build_board(out)
    result = subprocess.run([sys.executable, "-c", code, "leaderboard", "--out", str(out)], capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.splitlines()[-1] == "0 []", result.stdout + result.stderr


def test_the_run_command_does_not_import_matplotlib():
    code = "import sys, evalsuite.cli, evalsuite.runner; print('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_heatmap_cells_say_seeds_not_n(tmp_path, monkeypatch):
    """`n=3` read as a sample size; the cell counts seeds (issue 25 item 12): reference text `linear, seeds=3, #1`."""
    from matplotlib.axes import Axes

    from evalsuite.reporting.heatmap import save_heatmap
    from evalsuite.reporting.leaderboard import read_rows
    from evalsuite.reporting.wide import build_wide_table

    for seed in range(3):
        add_run(tmp_path / "leaderboard.csv", "A", "t1", seed, 0.5 + 0.01 * seed)
    texts, real_text = [], Axes.text
    monkeypatch.setattr(Axes, "text", lambda self, x, y, s, **kw: texts.append(s) or real_text(self, x, y, s, **kw))
    save_heatmap(build_wide_table(read_rows(tmp_path / "leaderboard.csv")), tmp_path / "h.png")
    assert texts == ["0.510 ± 0.010\nlinear, seeds=3, #1"]
