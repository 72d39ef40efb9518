"""`evalsuite cache ls|verify|rm`: inspect, check and remove feature caches under --out."""

import re
from pathlib import Path

from evalsuite.config import DEFAULT_OUT

RANDOM_INIT_PREFIX = "random-init"  # the weights id of a --random-init backbone (models/backbones.py)
SHORT_HASH_CHARS = 12
HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def add_parser(commands, common) -> None:
    cache = commands.add_parser("cache", parents=[common], help="list, verify or remove feature caches")
    cache.add_argument("action", choices=["ls", "verify", "rm"])
    cache.add_argument("keys", nargs="*", help="cache keys or key prefixes (rm needs at least one; "
                                               "ls/verify default to all)")
    cache.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default ./{DEFAULT_OUT})")
    cache.add_argument("--all", action="store_true", help="rm: remove every cache a prefix matches (without it, a "
                                                          "prefix matching several caches is refused)")
    cache.set_defaults(handler=main)


def _selected(cache, prefixes: list[str]) -> list[str]:
    from evalsuite.errors import EvalsuiteError

    keys = cache.keys()
    if not prefixes:
        return keys
    chosen = [k for k in keys if any(k.startswith(p) for p in prefixes)]
    if not chosen:
        raise EvalsuiteError(f"no cache under {cache.root} matches {', '.join(prefixes)}; see `evalsuite cache ls`")
    return chosen


def _read_manifest(cache, key: str) -> tuple[dict | None, bool]:
    """(manifest or None, whether it is unreadable): one truncated manifest must not stop a listing of the others."""
    from evalsuite.errors import EvalsuiteError

    try:
        return cache.manifest(key), False
    except EvalsuiteError:
        return None, True


def _status(cache, key: str) -> str:
    manifest, unreadable = _read_manifest(cache, key)
    if unreadable:
        return "CORRUPT manifest"
    if manifest is None:
        return "no-manifest"
    done = sum(c["done"] for c in manifest["chunks"])
    return "complete" if manifest.get("complete") else f"partial {done}/{len(manifest['chunks'])} chunks"


def _checked_rm_prefixes(cache, prefixes: list[str], remove_all: bool) -> None:
    """rm deletes data: an empty prefix (an unset shell variable) or one naming several caches needs care."""
    from evalsuite.errors import EvalsuiteError

    if not prefixes:
        raise EvalsuiteError("cache rm needs keys or key prefixes; see `evalsuite cache ls`")
    if any(not p.strip() for p in prefixes):
        raise EvalsuiteError("cache rm was given an empty key prefix, which would match every cache; "
                             "give keys or prefixes from `evalsuite cache ls`")
    if remove_all:
        return
    for prefix in prefixes:
        matches = _selected(cache, [prefix])
        if len(matches) > 1:
            _ls(cache, matches)
            raise EvalsuiteError(f"key prefix '{prefix}' matches {len(matches)} caches under {cache.root} (listed "
                                 "above); give more of the key, or pass --all to remove them all")


def main(args) -> None:
    from evalsuite.features.cache import FeatureCache

    cache = FeatureCache(Path(args.out) / "cache")
    if args.action == "rm":
        _checked_rm_prefixes(cache, args.keys, args.all)
    ACTIONS[args.action](cache, _selected(cache, args.keys))


def _ls(cache, keys) -> None:
    from evalsuite.features.budget import human_bytes

    print(f"{'key':<26}{'size':>12}  {'status':<22}{'shape':<18}task/split  model (weights, pooling, precision)")
    for key in keys:
        manifest = _read_manifest(cache, key)[0] or {}
        fields = manifest.get("fields", {})
        shape = "x".join(map(str, manifest.get("shape", [])))
        print(f"{key:<26}{human_bytes(cache.size_bytes(key)):>12}  {_status(cache, key):<22}{shape:<18}"
              f"{fields.get('card', '?')}/{fields.get('split', '?')}  {_model_label(fields)}")


def _model_label(fields: dict) -> str:
    """What tells two caches of one model apart (pretrained or random weights, pooling, precision): the key is a
    hash, and the model name alone is the same for all of them."""
    weights = str(fields.get("weights_id", "?"))
    name = fields.get("model", "?") + ("+random-init" if weights.startswith(RANDOM_INIT_PREFIX) else "")
    short = HEX_DIGEST.sub(lambda match: match.group()[:SHORT_HASH_CHARS], weights)
    layers = f", layers {','.join(map(str, fields['layers']))}" if "layers" in fields else ""
    return f"{name} ({short}, pooling {fields.get('pooling', '-')}{layers}, {fields.get('precision', '?')})"


def _verify(cache, keys) -> None:
    from evalsuite.errors import EvalsuiteError
    from evalsuite.features.cache import FEATURES_FILE, MANIFEST_FILE
    from evalsuite.features.cache_checks import corrupt_chunks, first_non_finite_row
    from evalsuite.storage.npy_rows import NpyRows

    problems = []
    for key in keys:
        manifest, unreadable = _read_manifest(cache, key)
        if unreadable:
            verdict = f"CORRUPT manifest ({cache.folder(key) / MANIFEST_FILE} is not valid JSON)"
        elif manifest is None:
            verdict = "no manifest (not an evalsuite cache or never started)"
        elif bad := corrupt_chunks(cache.folder(key), manifest):
            verdict = f"CORRUPT chunks {bad}"
        elif (bad_row := first_non_finite_row(NpyRows(cache.folder(key) / FEATURES_FILE))) is not None:
            verdict = f"CORRUPT NaN/inf features from sample {bad_row}"
        else:
            verdict = _status(cache, key)
        print(f"{key}  {verdict}")
        if verdict != "complete":
            problems.append(key)
    if problems:
        raise EvalsuiteError(f"{len(problems)} cache(s) not complete and intact: {', '.join(problems)}; "
                             "rerun the run to finish them or `evalsuite cache rm KEY`")


def _rm(cache, keys) -> None:
    from evalsuite.features.budget import human_bytes

    for key in keys:
        freed = cache.size_bytes(key)
        cache.remove(key)
        print(f"removed {key} ({human_bytes(freed)})")


ACTIONS = {"ls": _ls, "verify": _verify, "rm": _rm}
