"""A run JSON as `evalsuite report` reads it: the fields its provenance uses, checked before they are used.

A run JSON is written whole (staged and renamed), so one that does not parse, or whose sections have the wrong
type (`{"config": 5}`, a list instead of an object), was damaged or edited by hand: that is one line naming the
file, the field and what to do, never an internal error. A section that is null or missing reads as not recorded
(as `evalsuite show` prints it); a missing file gives a cell without provenance.
"""

import json
from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.storage.fsio import fs_error

# section -> the JSON type the report reads it as
SECTION_TYPES = {"config": dict, "task": dict, "versions": dict, "cache": dict, "probes": list, "seeds": list}
CONFIG_TEXT = ("task", "model")  # config fields the reproduce command quotes as words
_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number",
               bool: "true or false", type(None): "null"}
_FIX = ("restore it from a copy, rerun that run, or move the file aside (the report then shows the cell without "
        "its provenance)")


def read_run_fields(path: Path) -> dict:
    """The run JSON at `path` with its null sections dropped; {} when there is no such file."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:  # unreadable, a folder in its place: the user's file system, not a bug
        raise fs_error("read the run JSON", path, exc) from None
    try:
        record = json.loads(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise EvalsuiteError(f"run JSON {path} is damaged ({_first_line(exc)}); {_FIX}") from None
    return checked_fields(record, path)


def checked_fields(record, path) -> dict:
    if not isinstance(record, dict):
        raise _wrong(path, "the file", record, dict)
    record = {key: value for key, value in record.items() if value is not None}
    for section, expected in SECTION_TYPES.items():
        if section in record and not isinstance(record[section], expected):
            raise _wrong(path, f"field '{section}'", record[section], expected)
    for index, seed in enumerate(record.get("seeds", [])):
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise _wrong(path, f"field 'seeds' item {index}", seed, int)
    config = record.get("config", {})
    for name in CONFIG_TEXT:
        if config.get(name) is not None and not isinstance(config[name], str):
            raise _wrong(path, f"field 'config.{name}'", config[name], str)
    probes = config.get("probes")
    if probes is not None and not (isinstance(probes, list) and all(isinstance(p, str) for p in probes)):
        raise EvalsuiteError(f"run JSON {path}: field 'config.probes' is not a list of probe names; the file was "
                             f"edited or damaged: {_FIX}")
    return record


def _wrong(path, what: str, value, expected: type) -> EvalsuiteError:
    found = _TYPE_NAMES.get(type(value), type(value).__name__)
    return EvalsuiteError(f"run JSON {path}: {what} is {found}, not {_TYPE_NAMES[expected]}; the file was edited or "
                          f"damaged: {_FIX}")


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
