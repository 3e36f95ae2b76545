"""The docs stay findable and true: every page is listed in docs/README.md, the README stays short, and
every file, folder and module a page names exists (a moved module is a failing test, not a stale page).

What the pages' examples print is checked by ``python -m tools.docscheck`` (cog) in ``make test``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

# A path the pages name starts with one of the repository's top folders...
_PATH = re.compile(r"(?<![\w/.$~<>-])((?:gitmem|api|hooks|tests|bench|tools|docs)/[\w./-]*)")
# ... unless it is a path inside a store's repository or a data home, which the pages also name.
_NOT_IN_THE_REPOSITORY = {"gitmem/index.sqlite3", "gitmem/write.lock", "gitmem/pushes/"}
# A module the pages name: gitmem.a.b (gitmem.api is api/), maybe followed by an attribute.
_MODULE = re.compile(r"(?<![\w./-])(gitmem(?:\.[A-Za-z_]\w*)+)")
# ... that is not a file named like one (the engine's gitmem.py, a clone's gitmem.key).
_NOT_MODULES = {"gitmem.py", "gitmem.key"}
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _names(pattern: re.Pattern[str], page: Path) -> set[str]:
    return {m.group(1).rstrip(".") for m in pattern.finditer(page.read_text())}


def _in_the_repository(name: str) -> Path:
    for installed, actual in (("gitmem/api", "api"), ("gitmem/hooks", "hooks")):
        if name == installed or name.startswith(installed + "/"):
            name = actual + name[len(installed) :]
    return ROOT / name


def test_every_docs_page_is_listed_in_the_docs_index() -> None:
    index = (DOCS / "README.md").read_text()
    listed = {link.split("#")[0] for link in _LINK.findall(index)}
    unlisted = [p.name for p in DOCS.glob("*.md") if p.name != "README.md" and p.name not in listed]
    assert unlisted == []


def test_the_readme_is_short_and_links_the_docs_index() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "(docs/README.md)" in readme


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_a_page_leads_to_a_file(page: Path) -> None:
    local = [link.split("#")[0] for link in _LINK.findall(page.read_text()) if "://" not in link]
    missing = [link for link in local if link and not (page.parent / link).exists()]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    named = _names(_PATH, page) - _NOT_IN_THE_REPOSITORY
    missing = sorted(n for n in named if not _in_the_repository(n).exists())
    assert missing == []


def _module_exists(dotted: str) -> bool:
    """``gitmem.a.b`` is a module, or ``gitmem.a`` a module that defines ``b`` (read from its source, not
    imported: importing the modules the pages name would cost seconds)."""
    parts = dotted.split(".")
    where = ROOT / ("api" if parts[1:2] == ["api"] else "gitmem")
    rest = parts[2:] if parts[1:2] == ["api"] else parts[1:]
    for i, part in enumerate(rest):
        if (where / part).is_dir():
            where = where / part
        elif (where / f"{part}.py").is_file():
            where = where / f"{part}.py"
        else:
            source = (where / "__init__.py" if where.is_dir() else where).read_text()
            defined = re.search(rf"^(?:class |def |async def )?{part}\b", source, re.MULTILINE)
            return i == len(rest) - 1 and defined is not None
    return True


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_a_page_names_exists(page: Path) -> None:
    missing = sorted(n for n in _names(_MODULE, page) - _NOT_MODULES if not _module_exists(n))
    assert missing == []


_CODE_DOC = re.compile(r"docs/([\w-]+\.md)(?:[,\s]+\(?\"([^\"]+)\")?")
_SOURCES = sorted(p for top in ("gitmem", "api", "hooks") for p in (ROOT / top).rglob("*.py"))


def _headings(page: Path) -> list[str]:
    return [re.sub(r"^#+\s+(\d+\.\s+)?", "", line) for line in page.read_text().splitlines() if line.startswith("#")]


def test_every_docs_page_and_section_the_code_names_exists() -> None:
    wrong = []
    for source in _SOURCES:
        for page, section in _CODE_DOC.findall(source.read_text()):
            found = DOCS / page
            if not found.is_file() or (section and not any(h.startswith(section) for h in _headings(found))):
                wrong.append(f"{source.relative_to(ROOT)}: docs/{page} {section}".strip())
    assert wrong == []
