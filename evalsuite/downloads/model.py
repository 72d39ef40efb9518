"""The shape of a download entry: a published file (`Remote`), a dataset fetched from its files or from a hub folder
(`Download`), and a dataset evalsuite cannot fetch for you (`Manual`). The table itself is sources.py."""

from dataclasses import dataclass, field

UNPACK_KINDS = ("zip", "tar.gz", "gz", "file")


@dataclass(frozen=True)
class Remote:
    """One published file and where it lands under --data-root.

    `unpack`: zip or tar.gz (members go under the folder `target`), gz (decompressed to the file `target`), file (the
    download itself is the file `target`). At least one of the checks should be published: `sha256`, `md5`,
    `git_sha1` (a hub file kept in git, not LFS: git's blob id) or `size`; `unpacked_md5` checks a gz's content.
    `facts` says where the URL and the sums come from."""

    url: str
    filename: str  # its name in DIR/.evalsuite-download (may hold folders: a hub file's path)
    unpack: str = "file"
    target: str = "."
    sha256: str | None = None
    md5: str | None = None
    git_sha1: str | None = None
    size: int | None = None
    unpacked_md5: str | None = None
    facts: str = ""
    optional: bool = False  # a file the reader can do without: if it cannot be had, a note instead of an error

    def __post_init__(self):
        if self.unpack not in UNPACK_KINDS:
            raise ValueError(f"{self.filename}: unpack must be one of {', '.join(UNPACK_KINDS)}, not {self.unpack!r}")

    @property
    def published_check(self) -> bool:
        return any((self.sha256, self.md5, self.git_sha1, self.size is not None))


@dataclass(frozen=True)
class HubFolder:
    """A folder of a Hugging Face dataset repository: every file under it matching `include` (a path relative to the
    folder, or a prefix ending in /), with the size and hash the hub's listing publishes for it."""

    repo: str
    folder: str
    include: tuple = ()
    revision: str = "main"
    host: str = "https://huggingface.co"


@dataclass(frozen=True)
class Download:
    """A dataset evalsuite fetches: its files (or a hub folder), with the terms it is published under."""

    title: str
    page: str
    licence: str
    size: str  # roughly, for people: "7.5 GB"
    files: tuple = ()
    hub: HubFolder | None = None
    # Split sizes the data must give after unpacking ({split: n}, or {"folds": k} for a cross-validated reader).
    # None: the card's reader checks its own official counts (check_counts=True); a test gives its fixture's.
    expected_counts: dict | None = None
    note: str = ""


@dataclass(frozen=True)
class Manual:
    """A dataset behind a form, a registration, a login or a licence click: the page and the steps to follow."""

    title: str
    page: str
    licence: str
    size: str
    why: str  # one sentence: why evalsuite does not fetch it
    steps: tuple = field(default_factory=tuple)  # DIR stands for the --data-root the user gives
