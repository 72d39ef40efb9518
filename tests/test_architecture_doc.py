"""docs/architecture.md names real files (issue 50): every path it puts in backticks exists, its four "Where to add"
recipes are there and each names a file to touch, and every folder of the package has its line in the table."""

import re

from conftest import REPO

DOC = REPO / "docs" / "architecture.md"
PATH = re.compile(r"`((?:evalsuite/|datasets/|probes/|tests/|docs/)?[\w/]+\.(?:py|yaml|md))(?:::\w+)?`")
RECIPES = ("A model", "A task", "A probe", "A metric")


def _where(name: str) -> list:
    """The places a backticked path may mean: as written from the repository root, or inside evalsuite/."""
    return [REPO / name, REPO / "evalsuite" / name]


def test_every_file_the_page_names_exists():
    named = {match.group(1) for match in PATH.finditer(DOC.read_text())}
    templated = {name for name in named if "<" in name or "/" not in name}  # a bare name is relative to its sentence
    missing = sorted(name for name in named - templated if not any(place.exists() for place in _where(name)))
    assert len(named) > 20 and not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_the_four_recipes_each_name_a_file_that_exists():
    text = DOC.read_text()
    section = text[text.index("## Where to add"):text.index("## Import rule")]
    for recipe in RECIPES:
        start = section.index(f"**{recipe}.**")
        body = section[start:section.find("\n\n", start)]
        files = [m.group(1) for m in PATH.finditer(body) if "<" not in m.group(1)]
        assert files and all(any(place.exists() for place in _where(name)) for name in files), (recipe, files)


def test_every_package_folder_has_its_line():
    text = DOC.read_text()
    folders = sorted(path.name for path in (REPO / "evalsuite").iterdir()
                     if path.is_dir() and (path / "__init__.py").exists() and path.name not in {"cards", "recipes"})
    assert [folder for folder in folders if f"`{folder}/`" not in text] == []
