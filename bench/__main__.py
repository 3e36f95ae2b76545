"""``python -m bench [NAME ...]``: run every benchmark module in ``bench/`` (or the named ones)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

FIRST = ["engine"]  # the engine's numbers first; the rest in name order


def available() -> list[str]:
    names = [m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_")]
    return [n for n in FIRST if n in names] + sorted(n for n in names if n not in FIRST)


def main(argv: list[str]) -> int:
    names = available()
    chosen = argv or names
    unknown = [n for n in chosen if n not in names]
    if unknown or any(a.startswith("-") for a in chosen):
        print(
            f"usage: python -m bench [{' '.join(names)}]\n"
            "  options belong to one benchmark: python -m bench.NAME --help",
            file=sys.stderr,
        )
        return 2
    for name in chosen:
        module = importlib.import_module(f"bench.{name}")
        if not hasattr(module, "main"):
            continue
        print(f"\n=== bench.{name} ===\n", flush=True)
        saved = sys.argv
        sys.argv = [f"python -m bench.{name}"]  # each benchmark with its defaults
        try:
            module.main()
        finally:
            sys.argv = saved
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
