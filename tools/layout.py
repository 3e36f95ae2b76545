"""Where each source file of the repository lives in the installed package.

``api/`` installs as ``gitmem.api`` and ``hooks/`` as ``gitmem/hooks`` (``[tool.setuptools]`` in
pyproject.toml), so the static checkers, which read files rather than import them, are told the same
mapping here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# repository folder -> the package it installs as
PACKAGES = {"gitmem": "gitmem", "api": "gitmem.api", "hooks": "gitmem.hooks"}


def module_name(path: Path, folder: str) -> str:
    """``api/routers/stores/memories.py`` -> ``gitmem.api.routers.stores.memories``."""
    parts = path.relative_to(ROOT / folder).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGES[folder], *parts))


def package_sources() -> Iterator[tuple[Path, str]]:
    """Every module of the installed package: its file and its name."""
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path, module_name(path, folder)
