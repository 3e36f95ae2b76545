"""Concurrent writers in one process: gitmem's group commit beside a naive durable writer, in one run.

    python -m bench.group_commit [--writes 200] [--fsync always|never] [--configs 1x1,8x1,32x1,8x8]

A config ``TxS`` is T threads writing into S stores (thread t into store t % S), ``--writes`` notes
in all. The baseline is the simplest durable server's write path: each note a file (write, fsync,
rename, fsync of the folder) plus a SQLite row (synchronous=FULL), all under one lock, with no
versions. First the engine's single-writer p50, gitmem and the baseline writing turn by turn. Then
each config runs the baseline, then gitmem, then both again, and keeps each side's better run, so a
burst of load from elsewhere on the machine hurts neither side alone. Printed: writes/s and
p50/p99 latency, and gitmem/baseline ratios (writes/s above 1x: gitmem is faster; latency below 1x:
gitmem is faster). Timings on a shared machine are noisy: read the ratios. Below each config, how
many ``syncfs`` calls gitmem's batches made for the flushes they asked for (shared: :mod:`gitmem.durable`).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench._together import run_together
from bench.engine import FilesStore
from gitmem import durable
from gitmem.engine.gitmem import Gitmem
from gitmem.model import Actor

ACTOR = Actor("api_actor", "apikey_bench")
TEXT = "The user prefers short answers and a summary at the end of each reply. " * 4  # ~300 bytes


@dataclass(frozen=True)
class Result:
    per_second: float
    p50_ms: float
    p99_ms: float
    flushes: tuple[int, int] = (0, 0)  # syncfs calls made, and flushes asked for (gitmem.durable.FlushGroup)


def run_threads(threads: int, writes: int, write: Callable[[int, int], None]) -> Result:
    latencies: list[float] = []
    lock = threading.Lock()

    def body(t: int, ready: Callable[[], object]) -> None:
        mine = []
        ready()
        for i in range(t, writes, threads):
            began = time.perf_counter()
            write(t, i)
            mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)

    elapsed = run_together(threads, body)
    latencies.sort()
    return Result(
        len(latencies) / elapsed,
        statistics.median(latencies) * 1000,
        latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    )


def gitmem_run(root: Path, threads: int, stores: int, writes: int, fsync: bool) -> Result:
    gm = Gitmem.open(root / "gitmem", fsync="always" if fsync else "never")
    workspace = gm.catalog.create_workspace("bench")
    store_ids = [gm.create_store(workspace.id, f"s{s}").id for s in range(stores)]

    def write(t: int, i: int) -> None:
        gm.store(workspace.id, store_ids[t % stores]).create(f"/topic-{i % 100:02d}/note-{i:05d}.md", TEXT, actor=ACTOR)

    group = durable.flush_group(root)
    calls, asked = group.flushes, group.asked
    result = run_threads(threads, writes, write)
    return dataclasses.replace(result, flushes=(group.flushes - calls, group.asked - asked))


def naive_run(root: Path, threads: int, writes: int, fsync: bool) -> Result:
    store = FilesStore(root / "files", fsync)
    store.db = sqlite3.connect(root / "files" / "index.sqlite3", isolation_level=None, check_same_thread=False)
    store.db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'OFF'}")
    one_lock = threading.Lock()

    def write(_thread: int, i: int) -> None:
        with one_lock:
            store.write(f"/topic-{i % 100:02d}/note-{i:05d}.md", TEXT, ACTOR)

    return run_threads(threads, writes, write)


def interleaved(root: Path, writes: int, fsync: bool, flat: bool) -> tuple[float, float]:
    """One writer, gitmem and the baseline taking turns write by write (load from elsewhere on the
    machine hits both alike): the two write p50s in ms."""
    gm = Gitmem.open(root / "gitmem", fsync="always" if fsync else "never")
    workspace = gm.catalog.create_workspace("bench")
    store = gm.store(workspace.id, gm.create_store(workspace.id, "s").id)
    files = FilesStore(root / "files", fsync)
    ours, theirs = [], []
    for i in range(writes):
        path = f"/notes/note-{i:05d}.md" if flat else f"/topic-{i % 100:02d}/note-{i:05d}.md"
        began = time.perf_counter()
        store.create(path, TEXT, actor=ACTOR)
        ours.append(time.perf_counter() - began)
        began = time.perf_counter()
        files.write(path, TEXT, ACTOR)
        theirs.append(time.perf_counter() - began)
    return statistics.median(ours) * 1000, statistics.median(theirs) * 1000


def best(results: list[Result]) -> Result:
    return max(results, key=lambda r: r.per_second)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=200, help="notes written per config and side")
    parser.add_argument("--fsync", choices=["always", "never"], default="always")
    parser.add_argument("--configs", default="1x1,8x1,32x1,8x8", help="THREADSxSTORES, comma-separated")
    args = parser.parse_args(argv)
    fsync = args.fsync == "always"
    print(f"bench.group_commit: {args.writes} writes a config, fsync {args.fsync}; ratios are gitmem/naive")
    for flat in (False, True):
        root = Path(tempfile.mkdtemp(prefix="bench-group-commit-"))
        try:
            g50, n50 = interleaved(root, args.writes, fsync, flat)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        layout = "one folder" if flat else "100 folders"
        print(
            f"engine write p50, 1 writer, {layout}, turn by turn: gitmem {g50:.2f} ms, naive {n50:.2f} ms,"
            f" ratio {g50 / n50:.2f}x",
            flush=True,
        )
    print(
        f"{'config':<22}{'gitmem w/s':>11}{'naive w/s':>11}{'ratio':>7}{'gitmem p50':>12}{'naive p50':>11}"
        f"{'ratio':>7}{'gitmem p99':>12}{'naive p99':>11}"
    )
    for config in args.configs.split(","):
        threads, stores = (int(n) for n in config.split("x"))
        ours, theirs = [], []
        for _round in range(2):
            for side in ("naive", "gitmem"):
                root = Path(tempfile.mkdtemp(prefix="bench-group-commit-"))
                try:
                    if side == "naive":
                        theirs.append(naive_run(root, threads, args.writes, fsync))
                    else:
                        ours.append(gitmem_run(root, threads, stores, args.writes, fsync))
                finally:
                    shutil.rmtree(root, ignore_errors=True)
        g, n = best(ours), best(theirs)
        label = f"{threads} thread{'s' if threads > 1 else ''}, {stores} store{'s' if stores > 1 else ''}"
        print(
            f"{label:<22}{g.per_second:>11.0f}{n.per_second:>11.0f}{g.per_second / n.per_second:>6.2f}x"
            f"{g.p50_ms:>12.2f}{n.p50_ms:>11.2f}{g.p50_ms / n.p50_ms:>6.2f}x{g.p99_ms:>12.2f}{n.p99_ms:>11.2f}",
            flush=True,
        )
        calls, asked = g.flushes
        if calls:
            print(f"{'':<22}gitmem: {calls} syncfs calls for {asked} flushes asked, {asked / calls:.2f} a call")


if __name__ == "__main__":
    main()
