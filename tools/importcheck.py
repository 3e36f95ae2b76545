"""import-linter's contracts (``[tool.importlinter]`` in pyproject.toml) over the package as it installs.

import-linter finds a package's modules by walking its folder, so ``api/`` (installed as ``gitmem.api``)
would be missing from ``gitmem``. The contracts are checked on a copy of the sources laid out as the
wheel lays them out (:mod:`tools.layout`); a report names modules, never files, so the copy is unseen.

    python -m tools.importcheck
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from importlinter import cli

from tools.layout import ROOT, package_sources


def installed_copy(into: Path) -> None:
    for path, name in package_sources():
        target = into.joinpath(*name.split("."))
        target = target / "__init__.py" if path.name == "__init__.py" else target.with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gitmem-layout-") as scratch:
        installed_copy(Path(scratch))
        # lint-imports puts the working folder first on the path: make it the copy.
        os.chdir(scratch)
        sys.path.insert(0, scratch)
        importlib.invalidate_caches()
        for name in [m for m in sys.modules if m == "gitmem" or m.startswith("gitmem.")]:
            del sys.modules[name]
        return cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)


if __name__ == "__main__":
    sys.exit(main())
