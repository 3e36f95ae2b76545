"""What keeping conflicts costs: an uncontended write today (the tree before conflicts were kept) beside
the same write now, in one run, and what a refused write costs now that its text is kept.

    python -m bench.conflicts [--baseline REV] [--writes 300] [--rounds 6] [--fsync always|never]

``--baseline`` is a revision of this repository (default: the parent of the commit that made the planner
keep stale writes). Its ``gitmem/`` is extracted with ``git archive`` into a temporary folder and each side
runs in a child process of its own with that tree first on its path (the same interpreter and packages),
the two sides taking turns round by round so that load from elsewhere on the machine hits both alike.
Each child writes ``--writes`` updates of one note, each with a ``content_sha256`` precondition that holds
(the uncontended write; the path the change touched), then as many updates on a stale precondition (each
refused: today nothing is written, now its text is kept). Printed: per-write p50 latency and CPU for both
sides, and the now/today ratios per round (median, min, max). Read the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTRODUCED = ("gitmem/engine/store/conflicts.py", "gitmem/engine/conflicts.py")

# Run in each child: one store, N updates that pass their precondition, then N that fail it.
CHILD = r"""
import hashlib, json, statistics, sys, tempfile, time
from pathlib import Path
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import PreconditionFailed
from gitmem.model import Actor

writes, fsync = int(sys.argv[1]), sys.argv[2]
gm = Gitmem.open(Path(tempfile.mkdtemp(prefix="bench-conflicts-")) / "home", fsync=fsync)
ws = gm.catalog.create_workspace("bench")
store = gm.store(ws.id, gm.create_store(ws.id, "s").id)
actor = Actor("api_actor", "apikey_bench")
line = "The user prefers short answers and a summary at the end of each reply.\n"
note = store.create("/notes/prefs.md", line, actor=actor)
sha = note.content_sha256
stale = sha

def timed(write):
    walls, cpu = [], time.process_time()
    for i in range(writes):
        began = time.perf_counter()
        write(i)
        walls.append(time.perf_counter() - began)
    return statistics.median(walls) * 1000, (time.process_time() - cpu) / writes * 1000

def passing(i):
    global sha
    sha = store.update(note.id, content=line * (1 + i % 7) + f"{i}\n", expected_sha256=sha, actor=actor).content_sha256

def refused(i):
    try:
        store.update(note.id, content=f"lost {i}\n", expected_sha256=stale, actor=actor)
    except PreconditionFailed:
        return
    raise SystemExit("a stale precondition was not refused")

for i in range(20):  # warm up: caches, the first pack roll-ups
    passing(i)
wall, cpu = timed(passing)
refused_wall, refused_cpu = timed(refused)
print(json.dumps({"wall": wall, "cpu": cpu, "refused_wall": refused_wall, "refused_cpu": refused_cpu}))
"""


def default_baseline() -> str:
    """The parent of the oldest commit that adds the conflicts module (at either of its paths)."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--format=%H", "--diff-filter=A", "--", *INTRODUCED],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not out:
        raise SystemExit("no commit adds the conflicts module here: name the tree to compare with, --baseline REV")
    return out[-1] + "^"


def extract(revision: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "gitmem"], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_side(tree: Path, writes: int, fsync: str) -> dict[str, float]:
    """One child: ``tree`` first on its path (``-P``: not the working folder), from a neutral folder."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(writes), fsync],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        check=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}x (min {min(values):.3f}, max {max(values):.3f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", default=None, help="the revision to compare with (default: before conflicts)")
    parser.add_argument("--writes", type=int, default=300, help="updates of each kind per child")
    parser.add_argument("--rounds", type=int, default=6, help="pairs of children, taking turns")
    parser.add_argument("--fsync", choices=["always", "never"], default="always")
    args = parser.parse_args(argv)
    baseline = args.baseline or default_baseline()
    with tempfile.TemporaryDirectory(prefix="bench-conflicts-") as tmp:
        today = extract(baseline, Path(tmp) / "today")
        now = ROOT
        results: dict[str, list[dict[str, float]]] = {"today": [], "now": []}
        for _round in range(args.rounds):
            for side, tree in (("today", today), ("now", now)):
                results[side].append(run_side(tree, args.writes, args.fsync))
    print(f"baseline {baseline}; {args.writes} writes of each kind a child, {args.rounds} rounds, fsync={args.fsync}")
    for key, what in (
        ("wall", "uncontended write, p50 ms"),
        ("cpu", "uncontended write, CPU ms"),
        ("refused_wall", "refused write, p50 ms"),
        ("refused_cpu", "refused write, CPU ms"),
    ):
        t = [r[key] for r in results["today"]]
        n = [r[key] for r in results["now"]]
        ratios = [b / a for a, b in zip(t, n, strict=True)]
        print(
            f"{what:30} today {statistics.median(t):7.3f}  now {statistics.median(n):7.3f}  now/today {spread(ratios)}"
        )


if __name__ == "__main__":
    main()
