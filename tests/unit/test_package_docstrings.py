"""Every package's docstring is its table of contents: it names (``:mod:`.x```) each module and
sub-package that lives in it, and no module that does not, so a move that leaves a docstring behind
fails here (as ``engine``, ``git`` and ``crypto`` once listed modules that lived elsewhere).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tools.layout import ROOT, package_sources

_MOD = re.compile(r":mod:`~?([\w.]+)`")
SOURCES = {name: path for path, name in package_sources()}
PACKAGES = {name: path.parent for name, path in SOURCES.items() if path.name == "__init__.py"}


def _docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def _modules(package: Path) -> set[str]:
    """What lives in a package: its modules and sub-packages, private ones and ``__main__`` aside."""
    found = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}
    return found | {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}


@pytest.mark.parametrize("name", sorted(PACKAGES), ids=str)
def test_a_package_docstring_names_only_modules_that_exist(name: str) -> None:
    named = [ref if not ref.startswith(".") else name + ref for ref in _MOD.findall(_docstring(PACKAGES[name]))]
    assert [ref for ref in named if ref not in SOURCES] == []


@pytest.mark.parametrize("name", sorted(PACKAGES), ids=str)
def test_a_package_docstring_names_every_module_in_it(name: str) -> None:
    named = {ref.lstrip(".").split(".")[0] for ref in _MOD.findall(_docstring(PACKAGES[name])) if ref.startswith(".")}
    named |= {ref.removeprefix(name + ".").split(".")[0] for ref in _MOD.findall(_docstring(PACKAGES[name]))}
    assert sorted(_modules(PACKAGES[name]) - named) == [], f"{PACKAGES[name].relative_to(ROOT)}/__init__.py"
