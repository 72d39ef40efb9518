"""`evalsuite download TASK --data-root DIR`: a public benchmark's files, fetched, checked against their published
checksums, unpacked into the layout the card reads and checked by the card's reader (docs/download.md).

A dataset behind a form, a registration or a login prints its page and steps and writes nothing (exit 2).
`evalsuite download --list` says for every card how its data is had.
"""

import os
import sys
from pathlib import Path

from evalsuite.errors import EvalsuiteError

MIRROR_ENV = "EVALSUITE_DOWNLOAD_MIRROR"  # the same name as evalsuite.downloads.transfer.MIRROR_ENV


def add_parser(commands, common) -> None:
    parser = commands.add_parser(
        "download", parents=[common], help="fetch a public benchmark into the layout its task card reads",
        description="Download a task's dataset from where it is published, resumably, check it against the published "
                    "checksums, unpack it under --data-root in the layout the card's reader reads, and check it "
                    "with that reader's official counts. Datasets behind a form or a login print their page and steps.")
    parser.add_argument("task", nargs="?", metavar="TASK", help="a task card name (see --list) or a card .yaml")
    parser.add_argument("--data-root", metavar="DIR",
                        help="where the data goes: the folder `evalsuite run --task TASK --data-root DIR` then reads")
    parser.add_argument("--mirror", metavar="URL",
                        help=f"a mirror replacing the scheme and host of every source URL, e.g. http://mirror:8080 "
                             f"(default: ${MIRROR_ENV}); HTTP(S)_PROXY are honoured as usual")
    parser.add_argument("--retries", type=int, default=3, metavar="N",
                        help="times a transfer that stops early is resumed before giving up (default 3); the partial "
                             "file is kept either way and the same command goes on from it")
    parser.add_argument("--keep-archives", action="store_true",
                        help="keep the downloaded archives in DIR/.evalsuite-download after unpacking them")
    parser.add_argument("--no-count-check", action="store_true",
                        help="check the layout with the card's reader but not the dataset's official counts")
    parser.add_argument("--list", action="store_true", help="list every task card and how its data is had")
    parser.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.downloads.model import Manual
    from evalsuite.downloads.sources import source_for
    from evalsuite.tasks.cards import load_card

    if args.list:
        print("\n".join(listing()))
        return
    if not args.task:
        raise EvalsuiteError("name a task: `evalsuite download TASK --data-root DIR` (`evalsuite download --list` "
                             "shows every task)")
    card = load_card(args.task)
    source = source_for(card)
    if source is None:
        print(f"task '{card.name}' ships its data with evalsuite ({card.data_root}): there is nothing to download; "
              f"run `evalsuite run --task {card.name}`")
        return
    if isinstance(source, Manual):
        print("\n".join(manual_screen(card.name, source, args.data_root)), file=sys.stderr)
        raise EvalsuiteError(f"{card.name} cannot be downloaded by evalsuite: follow the steps above (nothing was "
                             "written)")
    if args.retries < 0:
        raise EvalsuiteError(f"--retries must be 0 or more, got {args.retries}")
    if not args.data_root:
        raise EvalsuiteError(f"pass --data-root DIR: the folder {card.name}'s files go into, which `evalsuite run "
                             f"--task {card.name} --data-root DIR` then reads")
    data_root = Path(args.data_root).expanduser()
    if data_root.exists() and not data_root.is_dir():
        raise EvalsuiteError(f"--data-root {data_root} is a file; give a folder (it is created if missing)")
    from evalsuite.downloads.fetch import download
    from evalsuite.downloads.transfer import check_mirror

    mirror = check_mirror(args.mirror or os.environ.get(MIRROR_ENV))
    download(card, source, data_root, mirror=mirror, retries=args.retries, keep_archives=args.keep_archives,
             check_counts=not args.no_count_check)


def manual_screen(task: str, manual, data_root: str | None) -> list:
    """The few lines for a dataset evalsuite does not fetch: why, the page, the terms, the steps, then the run."""
    folder = data_root or "DIR"
    steps = [step.replace("DIR", folder) for step in manual.steps]
    steps.append(f"evalsuite run --task {task} --data-root {folder}")
    return ([f"evalsuite: {task}: {manual.title} is not downloaded by evalsuite: {manual.why}.",
             f"  page     {manual.page}",
             f"  licence  {manual.licence}; {manual.size}"]
            + [f"  {number}. {step}" for number, step in enumerate(steps, start=1)])


def listing() -> list:
    """One line per shipped card: how its data is had (download, a page's steps, shipped, your own), size, licence."""
    from evalsuite.downloads.model import Manual
    from evalsuite.downloads.sources import OWN_DATA_READERS, source_for
    from evalsuite.tasks.cards import load_card
    from evalsuite.tasks.resources import cards_dir, yaml_names

    rows = [("task", "how its data is had", "size", "licence")]
    for name in yaml_names(cards_dir()):
        card = load_card(name)
        try:
            source = source_for(card)
        except EvalsuiteError:
            own = card.reader in OWN_DATA_READERS
            rows.append((name, "your own data (nothing to download)" if own else "no download known", "", ""))
            continue
        if source is None:
            rows.append((name, "ships with evalsuite", "", ""))
        elif isinstance(source, Manual):
            rows.append((name, "by hand (`evalsuite download TASK` shows how)", source.size,
                         source.licence.split(" (")[0]))
        else:
            rows.append((name, "evalsuite download", source.size, source.licence.split(" (")[0]))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}".rstrip() for row in rows]
