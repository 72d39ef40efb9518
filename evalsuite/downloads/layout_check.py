"""The last step of a download: the card's own reader, built on the unpacked data as `evalsuite run` builds it.

By default the reader checks its dataset's official counts itself (`check_counts=True`, the same check a run makes).
A source entry may name the split sizes instead (`Download.expected_counts`): the reader is then built without its
official counts and the sizes it finds are compared with the entry's, which is how tests check small fixtures.
"""

from pathlib import Path

from evalsuite.errors import EvalsuiteError, one_line


def check_layout(card, data_root: Path, expected: dict | None, check_counts: bool = True) -> dict:
    """{split: samples} (or {"folds": k} for a cross-validated reader) the reader finds under `data_root`."""
    from evalsuite.readers import build_reader

    try:
        reader = build_reader(card, str(data_root), check_counts=check_counts and expected is None)
        found = split_sizes(card, reader)
    except EvalsuiteError as exc:
        raise EvalsuiteError(f"the files are in place under {data_root}, but the {card.name} reader refuses them: "
                             f"{one_line(exc)}") from None
    if check_counts and expected is not None:
        wrong = [name for name, count in expected.items() if found.get(name) != count]
        if wrong:
            shown = ", ".join(f"{name} {found.get(name)} (expected {expected[name]})" for name in wrong)
            raise EvalsuiteError(f"the files are in place under {data_root}, but the {card.name} reader finds "
                                 f"{shown}; the source changed, or pass --no-count-check to keep a subset")
    return found


def split_sizes(card, reader) -> dict:
    folds = getattr(reader, "cv_folds", None)
    if folds:
        return {"folds": int(folds)}
    return {split: len(reader.dataset(split, None)) for split in card.splits}
