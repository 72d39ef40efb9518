"""The one YAML loader: sweep files, task cards and probe recipes are all parsed by `parse_yaml`.

PyYAML's safe loader keeps the last of two equal keys in a mapping and drops the first without a word: a sweep
file with `models:` written twice ran only the second list, with exit 0. Here a key written twice in one mapping
is an error naming the file, the key and both lines. A key brought in by a merge (`<<: *defaults`) may still be
overridden, which is what merges are for. tests/storage/test_yaml_files.py checks that nothing in evalsuite/
calls yaml.safe_load itself.
"""

from pathlib import Path

import yaml

from evalsuite.errors import EvalsuiteError

_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(Exception):
    def __init__(self, key, first_line: int, second_line: int):
        super().__init__(f"key '{key}' is written twice (lines {first_line} and {second_line})")


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key written twice in one mapping."""

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
