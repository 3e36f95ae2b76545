"""``cog --check`` over README.md and docs/*.md: every example on those pages is what its commands print.

The pages' ``[[[cog ...]]]`` blocks run real ``gitmem`` commands on a fresh home (docs/console.py), some
forty processes, about 25 s of CPU. What they print depends on the pages, on docs/*.py and on the code,
so the check is skipped when none of those changed since the last check that passed: a digest of their
contents is kept in ``.venv/docs-checked`` (under .venv, so a fresh clone, as on CI, always checks).
The pages are checked side by side, one ``cog`` a page, as many at a time as there are cores.

    python -m tools.docscheck             # check (skipped when nothing changed)
    python -m tools.docscheck --force     # check even so
    python -m tools.docscheck --refresh   # rewrite the blocks with what the commands print now
    python -m tools.docscheck --refresh docs/settings.md   # only these pages
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP = ROOT / ".venv" / "docs-checked"


def pages() -> list[Path]:
    """README.md and every docs page, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _inputs() -> Iterator[Path]:
    yield from pages()
    yield ROOT / "pyproject.toml"
    yield from sorted((ROOT / "docs").glob("*.py"))
    for top in ("gitmem", "api", "hooks"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                yield path


def digest() -> str:
    """One digest of every input's path and content (contents, not times: a rebase touches files)."""
    h = hashlib.sha256()
    for path in _inputs():
        h.update(str(path.relative_to(ROOT)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _cog(page: Path, *, refresh: bool) -> tuple[Path, int, str]:
    mode = ["-r"] if refresh else ["--check"]
    # --check's own message names the page; -I docs finds docs/console.py.
    done = subprocess.run(
        [sys.executable, "-m", "cogapp", *mode, "-I", str(ROOT / "docs"), str(page)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return page, done.returncode, (done.stdout + done.stderr).strip()


def run(*, refresh: bool = False, only: list[Path] | None = None) -> int:
    with_blocks = [p for p in only or pages() if "[[[cog" in p.read_text()]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda p: _cog(p, refresh=refresh), with_blocks))
    failed = [(page, out) for page, rc, out in results if rc != 0]
    for page, out in failed:
        print(f"{page.relative_to(ROOT)}: {out}", file=sys.stderr)
    if failed and not refresh:
        print(
            "docs: an example no longer shows what its commands print; "
            "refresh with `python -m tools.docscheck --refresh PAGE` and read the diff",
            file=sys.stderr,
        )
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docscheck", description=__doc__.split("\n")[0])
    parser.add_argument("--force", action="store_true", help="check even when nothing changed")
    parser.add_argument("--refresh", action="store_true", help="rewrite the blocks (cog -r)")
    parser.add_argument("pages", nargs="*", type=Path, help="only these pages (a check of some is not kept)")
    args = parser.parse_args(argv)
    only = [page.resolve() for page in args.pages]
    if args.refresh or only:
        return run(refresh=args.refresh, only=only)
    now = digest()
    if not args.force and STAMP.exists() and STAMP.read_text().strip() == now:
        print("docs: unchanged since their last check")
        return 0
    status = run()
    if status == 0 and STAMP.parent.is_dir():
        STAMP.write_text(now + "\n")
        print(f"docs: {len(pages())} pages checked")
    return status


if __name__ == "__main__":
    sys.exit(main())
