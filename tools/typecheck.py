"""mypy over the package as it installs (``api/`` as ``gitmem.api``), the tests and the benchmarks.

mypy derives a module's name from its path, which would make ``api/app.py`` the module ``api.app``;
here every file is handed to mypy with the name it has once installed (:mod:`tools.layout`), and the
errors still name the file in the repository. Options come from ``[tool.mypy]`` in pyproject.toml.

    python -m tools.typecheck
"""

from __future__ import annotations

import sys

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

from tools.layout import ROOT, package_sources

CHECKED_TOO = ("tools", "tests", "bench")  # checked as strictly as the package


def sources() -> list[BuildSource]:
    found = [BuildSource(str(path), name) for path, name in package_sources()]
    for folder in CHECKED_TOO:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found.append(BuildSource(str(path), name))
    return found


def main() -> int:
    _, options = process_options(["--config-file", str(ROOT / "pyproject.toml"), "placeholder.py"])
    checked = sources()
    try:
        result = build.build(checked, options)
    except CompileError as exc:
        print("\n".join(exc.messages), file=sys.stderr)
        return 2
    for line in result.errors:
        print(line)
    if result.errors:
        print(f"mypy: {sum(': error:' in e for e in result.errors)} errors", file=sys.stderr)
        return 1
    print(f"mypy: no issues in {len(checked)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
