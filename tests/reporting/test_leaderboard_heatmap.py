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

    from evalsuite.reporting.table.wide import build_wide_table
    from evalsuite.reporting.views.heatmap import save_heatmap
    from evalsuite.results.leaderboard import read_rows

    for seed in range(3):
        add_run(tmp_path / "leaderboard.csv", "A", "t1", seed, 0.5 + 0.01 * seed)
    texts, real_text = [], Axes.text
    monkeypatch.setattr(Axes, "text", lambda self, x, y, s, **kw: texts.append(s) or real_text(self, x, y, s, **kw))
    save_heatmap(build_wide_table(read_rows(tmp_path / "leaderboard.csv")), tmp_path / "h.png")
    assert texts == ["0.510 ± 0.010\nlinear, seeds=3, #1"]


def _cell_luminance(tmp_path, monkeypatch) -> dict:
    """{(model, task): perceived luminance of the cell's colour} of the heatmap of tmp_path's leaderboard."""
    from matplotlib.axes import Axes

    from evalsuite.reporting.table.wide import build_wide_table
    from evalsuite.reporting.views.heatmap import save_heatmap
    from evalsuite.results.leaderboard import read_rows

    shown, real_imshow = [], Axes.imshow
    monkeypatch.setattr(Axes, "imshow", lambda self, data, **kw: shown.append((data, real_imshow(self, data, **kw)))
                        or shown[-1][1])
    table = build_wide_table(read_rows(tmp_path / "leaderboard.csv"))
    save_heatmap(table, tmp_path / "h.png")
    (data, image), = shown
    luminance = {}
    for y, row in enumerate(table.rows):
        for x, task in enumerate(table.tasks):
            red, green, blue, _ = image.cmap(image.norm(data[y][x]))
            luminance[row.model, task] = 0.299 * red + 0.587 * green + 0.114 * blue
    return luminance


def test_the_best_cell_is_the_bright_one_for_an_error_metric(tmp_path, monkeypatch):
    add_run(tmp_path / "leaderboard.csv", "low_error", "t1", 0, 0.2, headline="mse")
    add_run(tmp_path / "leaderboard.csv", "high_error", "t1", 0, 0.5, headline="mse")
    luminance = _cell_luminance(tmp_path, monkeypatch)
    assert luminance["low_error", "t1"] > luminance["high_error", "t1"]


def test_tasks_of_different_metrics_are_each_coloured_worst_to_best(tmp_path, monkeypatch):
    """A is best on both tasks: higher balanced accuracy on t1, lower mse on t2 (on a scale of its own)."""
    board = tmp_path / "leaderboard.csv"
    add_run(board, "A", "t1", 0, 0.9)
    add_run(board, "B", "t1", 0, 0.5)
    add_run(board, "A", "t2", 0, 10.0, headline="mse")
    add_run(board, "B", "t2", 0, 60.0, headline="mse")
    luminance = _cell_luminance(tmp_path, monkeypatch)
    assert luminance["A", "t1"] > luminance["B", "t1"] and luminance["A", "t2"] > luminance["B", "t2"]
    assert luminance["A", "t1"] == luminance["A", "t2"] and luminance["B", "t1"] == luminance["B", "t2"]
