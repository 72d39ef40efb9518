"""The one YAML loader: sweep files, task cards and probe recipes are all parsed by `parse_yaml`.

PyYAML's safe loader keeps the last of two equal keys in a mapping and drops the first without a word: a sweep
file with `models:` written twice ran only the second list, with exit 0. Here a key written twice in one mapping
is an error naming the file, the key and both lines. A key brought in by a merge (`<<: *defaults`) may still be
overridden, which is what merges are for.

YAML 1.1 (PyYAML) also reads `12:00:00` unquoted as the base-60 integer 43200: a sweep's `slurm.time` became
43200 minutes, 30 days. YAML 1.2 dropped base 60, and so does this loader: such a value stays text.
tests/storage/test_yaml_files.py checks that nothing in evalsuite/ calls yaml.safe_load itself.
"""

from pathlib import Path

import yaml

from evalsuite.errors import EvalsuiteError

_MERGE_TAG = "tag:yaml.org,2002:merge"
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_TEXT_TAG = "tag:yaml.org,2002:str"


class DuplicateKeyError(Exception):
    def __init__(self, key, first_line: int, second_line: int):
        super().__init__(f"key '{key}' is written twice (lines {first_line} and {second_line})")


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key written twice in one mapping and reads no base-60 numbers."""

    def resolve(self, kind, value, implicit):
        tag = super().resolve(kind, value, implicit)
        if tag in _NUMBER_TAGS and ":" in value:  # only base 60 puts a ':' in a YAML 1.1 number
            return _TEXT_TAG
        return tag

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self._check_unique_keys(node)
        return super().construct_mapping(node, deep=deep)

    def _check_unique_keys(self, node: yaml.MappingNode) -> None:
        first_line_of = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:  # an unhashable key: SafeLoader itself refuses it with its own message
                continue
            line = key_node.start_mark.line + 1  # marks count from 0, editors from 1
            if key in first_line_of:
                raise DuplicateKeyError(key, first_line_of[key], line)
            first_line_of[key] = line


def parse_yaml(data, path: Path, kind: str):
    """The YAML document in `data` (text or bytes read from `path`); `kind` ("sweep file", "task card") words the
    one-line errors, which name `path`."""
    try:
        return yaml.load(data, Loader=UniqueKeyLoader)  # UniqueKeyLoader is a SafeLoader: no arbitrary objects
    except DuplicateKeyError as exc:
        raise EvalsuiteError(f"{kind} {path}: {exc}; keep one (YAML would silently keep only the last)") from None
    except yaml.YAMLError as exc:
        raise EvalsuiteError(f"{kind} {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except ValueError as exc:  # a value YAML types but Python cannot hold: a 5000-digit integer, 2001-13-45
        raise EvalsuiteError(f"{kind} {path}: a value cannot be read ({str(exc).splitlines()[0]}); quote it if it is "
                             "text, else correct it") from None
