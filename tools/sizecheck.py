"""The sizes one person can hold: a folder of at most 15 modules, a module of at most 400 lines, a
function of at most 60 (``make test`` runs it over the package as it installs: gitmem/ and api/).

A room that outgrows these is split by what it holds, not in arbitrary chunks; ``ALLOWED`` names the
rare exception and says why, so an exception is a decision somebody made and can read.

    python -m tools.sizecheck
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

from tools.layout import ROOT, package_sources

MODULES_A_FOLDER = 15  # besides its __init__.py
LINES_A_MODULE = 400
LINES_A_FUNCTION = 60
ALLOWED: dict[str, str] = {}  # "path" or "path::function" -> why it may be larger


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def oversized() -> list[str]:
    """One line for every folder, module and function over its size, unless ALLOWED."""
    found: dict[str, str] = {}  # what -> by how much
    modules_in: Counter[Path] = Counter()
    for path, _name in package_sources():
        rel = path.relative_to(ROOT)
        if path.name != "__init__.py":
            modules_in[rel.parent] += 1
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > LINES_A_MODULE:
            found[str(rel)] = f"{lines} lines (at most {LINES_A_MODULE} a module)"
        for function in _functions(ast.parse(text)):
            length = (function.end_lineno or function.lineno) - function.lineno + 1
            if length > LINES_A_FUNCTION:
                found[f"{rel}::{function.name}"] = f"{length} lines (at most {LINES_A_FUNCTION} a function)"
    for folder, count in sorted(modules_in.items()):
        if count > MODULES_A_FOLDER:
            found[f"{folder}/"] = f"{count} modules (at most {MODULES_A_FOLDER} a folder)"
    return [f"{what}: {size}" for what, size in found.items() if what not in ALLOWED]


def main() -> int:
    found = oversized()
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} too large: split each by what it holds (tools/sizecheck.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
