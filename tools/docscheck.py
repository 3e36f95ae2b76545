"""``cog --check`` over README.md and docs/*.md: every example on those pages is what its commands print.

The pages' ``[[[cog ...]]]`` blocks run real ``gitmem`` commands (and a few servers) on fresh homes
(docs/console.py): some eighty processes, about a minute of CPU. What a page prints depends on the page,
on docs/*.py and on the code, so a page is checked again only when one of those changed since its last
check that passed: a digest of each page's inputs is kept in ``.venv/docs-checked`` (under .venv, so a
fresh clone, as on CI, checks every page). A page without blocks costs nothing. The pages are checked
side by side, one ``cog`` a page, as many at a time as there are cores; a setup several pages share is
made once a run (docs/console.py).

    python -m tools.docscheck             # check what changed
    python -m tools.docscheck --force     # check every page
    python -m tools.docscheck --refresh docs/settings.md   # rewrite a page's blocks with what they print now
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP = ROOT / ".venv" / "docs-checked"


def pages() -> list[Path]:
    """README.md and every docs page with cog blocks, in a stable order."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [page for page in found if "[[[cog" in page.read_text()]


def _shared_inputs() -> Iterator[Path]:
    yield ROOT / "pyproject.toml"
    yield from sorted((ROOT / "docs").glob("*.py"))
    for top in ("gitmem", "api", "hooks"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                yield path


def _digest(paths: Iterator[Path] | list[Path]) -> str:
    """A digest of paths and contents (contents, not times: a rebase touches files)."""
    h = hashlib.sha256()
    for path in paths:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def digests() -> dict[str, str]:
    """Each page's digest: the page itself with what every page shares (the helper, the code)."""
    shared = _digest(_shared_inputs())
    return {str(page.relative_to(ROOT)): _digest([page]) + shared for page in pages()}


def _cog(page: Path, *, refresh: bool, cache: str) -> tuple[Path, int, str]:
    mode = ["-r"] if refresh else ["--check"]
    # --check's own message names the page; -I docs finds docs/console.py.
    done = subprocess.run(
        [sys.executable, "-m", "cogapp", *mode, "-I", str(ROOT / "docs"), str(page)],
        cwd=ROOT,
        env={**os.environ, "GITMEM_DOCS_CACHE": cache},
        capture_output=True,
        text=True,
    )
    return page, done.returncode, (done.stdout + done.stderr).strip()


def run(chosen: list[Path], *, refresh: bool = False) -> list[Path]:
    """cog over the pages, side by side; the pages that failed."""
    # The setups several pages share are made once, in this run's cache (docs/console.py).
    with tempfile.TemporaryDirectory(prefix="gitmem-docs-") as cache, ThreadPoolExecutor(os.cpu_count()) as pool:
        results = list(pool.map(lambda p: _cog(p, refresh=refresh, cache=cache), chosen))
    failed = [(page, out) for page, rc, out in results if rc != 0]
    for page, out in failed:
        print(f"{page.relative_to(ROOT)}: {out}", file=sys.stderr)
    if failed and not refresh:
        print(
            "docs: an example no longer shows what its commands print; "
            "refresh with `python -m tools.docscheck --refresh PAGE` and read the diff",
            file=sys.stderr,
        )
    return [page for page, _ in failed]


def _checked() -> dict[str, str]:
    try:
        kept = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docscheck", description=__doc__.split("\n")[0])
    parser.add_argument("--force", action="store_true", help="check every page, changed or not")
    parser.add_argument("--refresh", action="store_true", help="rewrite the blocks (cog -r)")
    parser.add_argument("pages", nargs="*", type=Path, help="only these pages")
    args = parser.parse_args(argv)
    only = {page.resolve() for page in args.pages}
    chosen = [page for page in pages() if not only or page in only]
    if args.refresh:
        return 1 if run(chosen, refresh=True) else 0
    now, kept = digests(), _checked()
    due = [p for p in chosen if args.force or kept.get(str(p.relative_to(ROOT))) != now[str(p.relative_to(ROOT))]]
    if not due:
        print("docs: unchanged since their last check")
        return 0
    failed = run(due)
    passed = {str(p.relative_to(ROOT)) for p in due if p not in failed}
    if STAMP.parent.is_dir():
        kept = {name: digest for name, digest in kept.items() if name in now}
        STAMP.write_text(json.dumps({**kept, **{name: now[name] for name in passed}}, indent=1) + "\n")
    print(f"docs: {len(passed)} of {len(due)} pages checked pass; {len(chosen) - len(due)} unchanged")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
