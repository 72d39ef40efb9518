"""The one YAML loader: sweep files, task cards and probe recipes are all parsed by `parse_yaml`.

PyYAML's safe loader keeps the last of two equal keys in a mapping and drops the first without a word: a sweep
file with `models:` written twice ran only the second list, with exit 0. Here a key written twice in one mapping
is an error naming the file, the key and both lines. A key brought in by a merge (`<<: *defaults`) may still be
overridden, which is what merges are for.

YAML 1.1 (PyYAML) also reads `12:00:00` unquoted as the base-60 integer 43200: a sweep's `slurm.time` became
43200 minutes, 30 days. YAML 1.2 dropped base 60, and so does this loader: such a value stays text.

An alias (`*name`) repeats an anchored value (`&name`) without copying it, so ten lines of aliases of aliases can
stand for 10^9 values: PyYAML builds them as shared objects, but a card's hash (json.dumps) writes every one out and
ate the host's memory (MemoryError). The shipped cards and recipes use no aliases and sweep files a few merges, so
aliases may add at most ALIAS_NODES_MAX nodes to a document once expanded, counted on the composed node graph before
anything is built; an alias inside its own anchor (a value that contains itself) is refused too.
tests/storage/test_yaml_files.py checks that nothing in evalsuite/ calls yaml.safe_load itself.
"""

from pathlib import Path

import yaml

from evalsuite.errors import EvalsuiteError

_MERGE_TAG = "tag:yaml.org,2002:merge"
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_TEXT_TAG = "tag:yaml.org,2002:str"
ALIAS_NODES_MAX = 10_000  # values aliases may add: a merge of a few defaults into each of many runs stays far below
_EXPANDED_CAP = 10**15


class AliasExpansionError(Exception):
    pass


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

    def construct_document(self, node):
        _check_alias_expansion(node)
        return super().construct_document(node)

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


def _check_alias_expansion(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand it by more than ALIAS_NODES_MAX nodes, or that contains itself.

    Each distinct node's expanded size is counted once (depth first, without recursion: a deep document must not
    overflow the stack here), so the check costs one visit per node written, however large the expansion."""
    expanded, open_nodes = {}, set()  # id(node) -> its expanded size; the nodes whose children are being counted
    stack = [(root, False)]
    while stack:
        node, counted = stack.pop()
        key = id(node)
        if counted:
            open_nodes.discard(key)
            # capped far above any file's own node count: a bomb's true size can have hundreds of digits
            expanded[key] = min(1 + sum(expanded[id(child)] for child in _children(node)), _EXPANDED_CAP)
        elif key in open_nodes:
            raise AliasExpansionError("an alias (*name) sits inside its own anchor (&name), a value that contains "
                                      "itself")
        elif key not in expanded:
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))
    if expanded[id(root)] - len(expanded) > ALIAS_NODES_MAX:
        raise AliasExpansionError(f"its aliases (*name) expand it by more than {ALIAS_NODES_MAX} values (the "
                                  "shape of a YAML alias bomb)")


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return node.value if isinstance(node, yaml.SequenceNode) else []


def parse_yaml(data, path: Path, kind: str):
    """The YAML document in `data` (text or bytes read from `path`); `kind` ("sweep file", "task card") words the
    one-line errors, which name `path`."""
    try:
        return yaml.load(data, Loader=UniqueKeyLoader)  # UniqueKeyLoader is a SafeLoader: no arbitrary objects
    except DuplicateKeyError as exc:
        raise EvalsuiteError(f"{kind} {path}: {exc}; keep one (YAML would silently keep only the last)") from None
    except AliasExpansionError as exc:
        raise EvalsuiteError(f"{kind} {path}: {exc}; write the values out, or alias fewer of them") from None
    except RecursionError:  # PyYAML composes and builds nested values recursively
        raise EvalsuiteError(f"{kind} {path}: values nested too deeply to read; flatten them") from None
    except yaml.YAMLError as exc:
        raise EvalsuiteError(f"{kind} {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except ValueError as exc:  # a value YAML types but Python cannot hold: a 5000-digit integer, 2001-13-45
        raise EvalsuiteError(f"{kind} {path}: a value cannot be read ({str(exc).splitlines()[0]}); quote it if it is "
                             "text, else correct it") from None
