"""The identifier rule for names the user gives that become folder or file names and table cells: task card names,
sweep names, and model labels (`run --label`, a sweep's `models[].name`).

Up to 100 letters, digits, '_', '.' or '-', starting with a letter or digit. A line break in a label broke every
table, the status grid and the Markdown report; a space or a comma breaks a CSV cell or a column; `.` and `..`
name the current folder and its parent, not a new one; a leading '-' reads as an option and a leading '.' hides
the folder it names. Model labels may also hold '+': the labels a run gives by default are `<model>+random-init` and
`<model>+<weights file stem>`, and a sweep names its models the same way to match them.
"""

import re
from pathlib import Path

from evalsuite.errors import EvalsuiteError

MAX_IDENTIFIER_CHARS = 100
RULE = (f"an identifier of up to {MAX_IDENTIFIER_CHARS} letters, digits, '_', '.' or '-' that starts with a letter "
        "or digit")
LABEL_RULE = RULE.replace("'.' or '-'", "'.', '+' or '-'")


def identifier_problem(name: str, extra: str = "") -> str | None:
    """Why `name` is not an identifier (with the characters `extra` allowed too), in a few words; None when it is."""
    allowed = "A-Za-z0-9_." + extra + "-"  # "-" last: a literal, not a range
    if re.fullmatch(rf"[A-Za-z0-9][{allowed}]{{0,{MAX_IDENTIFIER_CHARS - 1}}}", name):
        return None
    if not name:
        return "it is empty"
    odd = next((char for char in name if not re.fullmatch(rf"[{allowed}]", char)), None)
    if odd is not None:
        return f"it holds {odd!r}"  # repr: a line break shows as '\n', so the message stays one line
    if len(name) > MAX_IDENTIFIER_CHARS:
        return f"it has {len(name)} characters"
    return f"it starts with {name[0]!r}"


def check_identifier(name, where: str, example: str, label: bool = False) -> str:
    """`name` when it is an identifier, else a one-line EvalsuiteError: `where` names the field ("sweep file F:
    name"), `example` is a name that would do. `label`: a model label, which may also hold '+'."""
    name = str(name)
    if name in (".", ".."):
        raise EvalsuiteError(f"{where} {name!r} is refused: '.' and '..' name a folder and its parent, not a new "
                             f"one; choose a name such as {example}")
    problem = identifier_problem(name, "+" if label else "")
    if problem:
        rule = LABEL_RULE if label else RULE
        raise EvalsuiteError(f"{where} must be {rule} (e.g. {example}), got {name!r}: {problem}")
    return name


def weights_label(model: str, weights) -> str:
    """The label a run gives a model with `--weights` and no --label: the model's name and the file's stem."""
    return f"{model}+{Path(weights).stem}"


def check_weights_label(model: str, weights, label_flag: bool = True) -> None:
    """The label `--weights` gives must follow --label's rule: `x<newline>y.safetensors` put a line break into
    leaderboard.csv. `label_flag`: the command has --label to name the model instead."""
    label = weights_label(model, weights)
    problem = identifier_problem(label, "+")
    if problem:
        fix = f"pass --label (e.g. --label {model}+ft) or rename the file" if label_flag else "rename the file"
        raise EvalsuiteError(f"--weights {str(weights)!r}: the model label made of its file name, {label!r}, must be "
                             f"{LABEL_RULE}, but {problem}; {fix}")
