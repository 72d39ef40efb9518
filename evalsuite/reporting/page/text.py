"""The report's overview as text: a Markdown table (for a README or an issue) and a LaTeX booktabs table (for a
paper). Both come from the same `Report` as the HTML page: best per column in bold, `◆` (LaTeX `$^\\diamond$`) on
each cell in the column's 95 % model confidence set, `?` on a column that could not be tested, each random-init
row saying whose floor it is (report_words.floor_label), the rules in a footnote, the precision the cells' backbones
computed in and the columns the overall ranking runs over (two or more models); LaTeX keeps each cell's rank and rank
interval, as Markdown does."""

import math

from evalsuite.reporting.page.data import Report
from evalsuite.reporting.page.words import floor_label, overall_rule
from evalsuite.reporting.table.markdown import escape_markdown
from evalsuite.reporting.table.precisions import precision_summary

IN_SET, UNTESTED = "◆", "?"
RULES = ("bold: the best mean of the column; ◆: in the column's 95 % model confidence set, the models that cannot be "
         "told apart from the best (Hansen, Lunde and Nason 2011, on the test items' bootstrap draws); no mark: "
         "outside it; ?: the column could not be tested (the report's notes say why); [lo, hi]: the 95 % bootstrap "
         "interval of the mean shown (†: the report's notes say how to read it); #r (lo-hi): rank and 95 % bootstrap "
         "rank interval; the header says how many clusters (patients, slides, items) each column rests on")
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _value(number: float | None, digits: int = 3) -> str:
    return "–" if number is None or (isinstance(number, float) and math.isnan(number)) else f"{number:.{digits}f}"


def _rank(cell) -> str:
    if math.isnan(cell.rank):  # a column with no finite score is not ranked
        return "#–"
    if cell.rank_interval is None:
        return f"#{cell.rank:g}"
    low, high = cell.rank_interval
    return f"#{cell.rank:g} ({low:g}-{high:g})"


def _best_ranks(report: Report) -> dict:
    """task -> the column's best rank (1, or 1.5 when two models share the top mean)."""
    return {task: min(c.rank for (_, t), c in report.cells.items() if t == task) for task in report.tasks
            if any(t == task for _, t in report.cells)}


def _markdown_cell(cell, best_rank) -> str:
    if cell is None:
        return "–"
    text = _value(cell.mean)
    text = f"**{text}**" if cell.rank == best_rank else text
    mark = {True: f" {IN_SET}", False: ""}.get(cell.best_set, f" {UNTESTED}" if cell.untested else "")
    noted = "†" if cell.interval_note else ""
    interval = f" [{_value(cell.interval[0])}, {_value(cell.interval[1])}]{noted}" if cell.interval else ""
    return f"{text}{mark}{interval} {_rank(cell)}"


def markdown_report(report: Report) -> str:
    header = ["model", *(f"{task} ({report.metrics[task]}{_clusters(report, task)})" for task in report.tasks)]
    lines = ["| " + " | ".join(map(escape_markdown, header)) + " |", "|" + "---|" * len(header)]
    best = _best_ranks(report)
    for model in report.models:
        cells = [_markdown_cell(report.cells.get((model, task)), best.get(task)) for task in report.tasks]
        floor = floor_label(report, model)
        label = escape_markdown(model) + (f" *({escape_markdown(floor)})*" if floor else "")
        lines.append("| " + " | ".join([label, *cells]) + " |")
    lines += ["", RULES + "."]
    if report.overall:
        lines += ["", f"Overall (mean rank {escape_markdown(overall_rule(report))}; 95 % bootstrap interval): "
                  + ", ".join(f"{escape_markdown(model)} {rank:.2f}{_overall_interval(interval)}"
                              for model, rank, interval in report.overall) + "."]
    published = published_lines(report)
    if published:
        lines += ["", escape_markdown(published[0]), *(f"- {escape_markdown(line)}" for line in published[1:])]
    precision = precision_line(report)
    return "\n".join(lines + (["", escape_markdown(precision) + "."] if precision else []))


def published_lines(report: Report) -> list[str]:
    """One line per shown cell with a peer's published figure (results/published.py), after a heading line; [] when
    none: a figure is never a row of the table, so it goes under it with its source and how the protocol differs."""
    lines = []
    for model in report.models:
        for task in report.tasks:
            figure, cell = report.published.get((model, task)), report.cells.get((model, task))
            if figure is not None and cell is not None:
                lines.append(f"{model} on {task}: yours {_value(cell.mean)}, published {figure.value_text} "
                             f"({figure.source()}; differs: {figure.difference()})")
    return ["Published figures beside your rows (not ranked, not in any mean or best set):", *lines] if lines else []


def precision_line(report: Report) -> str:
    """What the cells' backbones computed in (reporting/table/precisions.py); "" when no run recorded it."""
    by_model = {}
    for model in report.models:
        by_model[model] = {task: report.cells[(model, task)].precision for task in report.tasks
                           if (model, task) in report.cells}
    return precision_summary(by_model)


def _clusters(report: Report, task: str) -> str:
    """", 14 patients": what the column's intervals and marks rest on."""
    if task not in report.clusters:
        return ""
    count, unit = report.clusters[task]
    return f", {count} {unit}{'s' if count != 1 else ''}"


def _overall_interval(interval) -> str:
    return f" ({interval[0]:.2f}-{interval[1]:.2f})" if interval else ""


def _latex_floor(label: str | None) -> str:
    return f" \\textit{{({_latex_escape(label)})}}" if label else ""


def _latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text)


def _latex_cell(cell, best_rank) -> str:
    if cell is None:
        return "--"
    text = _value(cell.mean)
    text = f"\\textbf{{{text}}}" if cell.rank == best_rank else text
    mark = {True: r"$^{\diamond}$", False: ""}.get(cell.best_set, r"$^{?}$" if cell.untested else "")
    interval = f" {{\\scriptsize [{_value(cell.interval[0])}, {_value(cell.interval[1])}]}}" if cell.interval else ""
    rank = _rank(cell).replace("#", r"\#").replace("-", "--")  # a paper's reader wants the ranks too (issue 41)
    return f"{text}{mark}{interval} {{\\scriptsize {rank}}}"


def latex_report(report: Report) -> str:
    """A booktabs table (needs \\usepackage{booktabs}); the rules go into the caption."""
    columns = "l" + "c" * len(report.tasks)
    header = " & ".join(["Model", *(f"{_latex_escape(task)} ({_latex_escape(report.metrics[task])}"
                                    f"{_latex_escape(_clusters(report, task))})" for task in report.tasks)])
    best = _best_ranks(report)
    body = [" & ".join([_latex_escape(model) + _latex_floor(floor_label(report, model)),
                        *(_latex_cell(report.cells.get((model, task)), best.get(task)) for task in report.tasks)])
            + r" \\" for model in report.models]
    lines = [r"\begin{table}[t]", r"\centering", f"\\begin{{tabular}}{{{columns}}}", r"\toprule", header + r" \\",
             r"\midrule", *body]
    caption = _latex_escape(RULES.replace(IN_SET, "DIAMOND").replace(f"{UNTESTED}:", "UNTESTED:"))
    caption = caption.replace("DIAMOND", r"$\diamond$").replace("UNTESTED:", r"$?$:")
    published = " ".join(_latex_escape(line) for line in published_lines(report))
    caption += f". {published}" if published else ""
    lines += [r"\bottomrule", r"\end{tabular}", f"\\caption{{{caption}.}}", r"\end{table}"]
    return "\n".join(lines)
