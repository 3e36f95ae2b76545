"""Background maintenance entry point: ``python -m gitmem.maintenance pack REPO``."""

from __future__ import annotations

import sys
from pathlib import Path

from gitmem.repository import pack


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "pack":
        print("usage: python -m gitmem.maintenance pack REPO", file=sys.stderr)
        return 2
    pack(Path(argv[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
