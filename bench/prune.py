"""Benchmark: prune a store of 10,000 notes and 100,000 versions (120 days of history, 30-day retention).

    python -m bench.prune [--notes 10000] [--versions 100000] [--keep DIR]

The store is built with Git's plumbing (``git fast-import``: commits with gitmem's own trailers and
authors, exactly what the engine writes), because 100,000 engine writes take many minutes; then the
index is built by ``catch_up`` as on first open, and the store is packed as the engine's background
packer would. The prune runs in a fresh process (so its peak RSS is its own), twice: once timed, once
under tracemalloc (Python heap peak; slower, so not timed) on a copy. Baselines measured side by side on
the same store: a plain ``git repack -a -d`` and an index rebuild from history.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.words import WORDS
from gitmem import ids
from gitmem.clock import iso
from gitmem.git import repository
from gitmem.git.commits import VersionRecord, author_for, format_message
from gitmem.model import Actor, Operation

if TYPE_CHECKING:
    import pygit2

DAYS = 120
RETENTION_DAYS = 30
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
END = START + dt.timedelta(days=DAYS)


def _sig(sig: pygit2.Signature) -> bytes:
    return f"{sig.name} <{sig.email}> {sig.time} +0000".encode()


def build(repo_path: Path, notes: int, versions: int, seed: int = 1) -> dict[str, int]:
    rng = random.Random(seed)
    repository.init_bare(repo_path)
    actors = [Actor("api_actor", "apikey_bench"), Actor("task_actor", "task_bench"), None]
    per_note = [1] * notes
    for _ in range(versions - notes):
        per_note[rng.randrange(notes)] += 1
    events: list[tuple[float, int, Operation]] = []  # (time, note, kind)
    for note, count in enumerate(per_note):
        times = sorted(rng.uniform(0, DAYS * 86400) for _ in range(count))
        deleted = count > 1 and rng.random() < 0.05
        for k, t in enumerate(times):
            kind: Operation = "created" if k == 0 else ("deleted" if deleted and k == count - 1 else "modified")
            events.append((t, note, kind))
    events.sort()
    memory_ids = [ids.new_id(ids.MEMORY) for _ in range(notes)]
    paths: dict[int, str] = {}
    created: dict[int, dt.datetime] = {}
    stream = subprocess.Popen(
        ["git", "-C", str(repo_path), "-c", "core.hooksPath=/dev/null", "fast-import", "--quiet", "--done"],
        stdin=subprocess.PIPE,
    )
    assert stream.stdin is not None
    out = stream.stdin
    renames = 0
    for n, (t, note, kind) in enumerate(events):
        when = START + dt.timedelta(seconds=t, microseconds=n % 1000)
        actor = actors[n % 3]
        old_path = paths.get(note)
        if kind == "created":
            path = f"/topic-{note % 100:02d}/note-{note:05d}.md"
            created[note] = when
        elif kind == "modified" and rng.random() < 0.1:
            renames += 1
            path = f"/topic-{note % 100:02d}/note-{note:05d}-r{renames}.md"
        else:
            path = old_path or ""
        body = None
        if kind != "deleted":
            body = (f"{path} at {iso(when)}: " + " ".join(rng.choice(WORDS) for _ in range(30))).encode()
        import hashlib

        record = VersionRecord(
            memory_ids[note],
            ids.new_id(ids.VERSION),
            kind,
            path,
            hashlib.sha256(body).hexdigest() if body is not None else None,
            len(body) if body is not None else None,
            actor,
            when,
            created[note],
        )
        message = format_message([record]).encode()
        author = author_for(actor, when)
        out.write(
            b"commit refs/heads/main\nauthor "
            + _sig(author)
            + b"\ncommitter gitmem <gitmem@localhost> "
            + str(author.time).encode()
            + b" +0000\ndata %d\n" % len(message)
            + message
            + b"\n"
        )
        if old_path is not None and (kind == "deleted" or old_path != path):
            out.write(b"D " + old_path[1:].encode() + b"\n")
        if body is not None:
            out.write(b"M 100644 inline " + path[1:].encode() + b"\ndata %d\n" % len(body) + body + b"\n")
            paths[note] = path
        else:
            paths.pop(note, None)
        out.write(b"\n")
    out.write(b"done\n")
    out.close()
    if stream.wait() != 0:
        raise SystemExit("fast-import failed")
    return {
        "notes": notes,
        "versions": len(events),
        "renames": renames,
        "deleted_notes": sum(1 for _t, _n, k in events if k == "deleted"),
    }


def _rss_mib(usage: resource.struct_rusage) -> float:
    return usage.ru_maxrss / 1024  # Linux: KiB


def _rss_now() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def run_prune(repo_path: Path, traced: bool) -> dict[str, object]:
    """The measured part, in a fresh process."""
    import threading
    import tracemalloc

    from gitmem.engine.rewrite.retention import prune_store
    from gitmem.engine.store.store import MemoryStore

    store = MemoryStore(repo_path, "memstore_bench", clock=lambda: END)
    if traced:
        tracemalloc.start()
    samples: list[tuple[float, int]] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.1):
            samples.append((time.perf_counter(), _rss_now()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    report = prune_store(store, days=RETENTION_DAYS, now=END)
    seconds = time.perf_counter() - started
    sampling.set()
    sampler.join()
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    assert report.ok, report.error or report.blobs_unpurged[:5]
    rewrite = report.rewrite
    assert rewrite is not None
    phase_peaks: dict[str, int] = {}
    clock = started
    for name, length in rewrite.timings.items():  # phases run in this order, back to back
        inside = [rss for at, rss in samples if clock <= at < clock + length]
        phase_peaks[name] = max(inside, default=0)
        clock += length
    return {
        "seconds": seconds,
        "timings": rewrite.timings,
        "phase_rss": phase_peaks,
        "before": report.versions_before,
        "kept": report.versions_kept,
        "dropped": len(report.dropped),
        "purged": len(report.blobs_purged),
        "shared": len(report.blobs_shared),
        "bytes_before": report.bytes_before,
        "bytes_after": report.bytes_after,
        "tracemalloc_peak": peak,
        "rss": _rss_mib(resource.getrusage(resource.RUSAGE_SELF)),
        "children_rss": _rss_mib(resource.getrusage(resource.RUSAGE_CHILDREN)),
    }


def _subprocess(repo_path: Path, traced: bool) -> dict[str, Any]:
    args = [sys.executable, "-m", "bench.prune", "--run", str(repo_path)] + (["--traced"] if traced else [])
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(args, capture_output=True, text=True, cwd=root, env=dict(os.environ, PYTHONPATH=str(root)))
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])  # the child's JSON line
    return report


def _table(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 24}")
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="build here and keep the store afterwards")
    parser.add_argument("--run", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        print(json.dumps(run_prune(args.run, args.traced)))
        return 0

    work = args.keep or Path(tempfile.mkdtemp(prefix="gitmem-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    repo_path = work / "memstore_bench.git"
    shutil.rmtree(repo_path, ignore_errors=True)
    try:
        t = time.perf_counter()
        built = build(repo_path, args.notes, args.versions)
        build_s = time.perf_counter() - t
        import pygit2

        from gitmem.engine.index.store_index import StoreIndex

        t = time.perf_counter()
        index = StoreIndex(pygit2.Repository(str(repo_path)))
        index.catch_up()
        index.close()
        index_s = time.perf_counter() - t
        subprocess.run(["git", "-C", str(repo_path), "repack", "-a", "-d", "-q"], check=True)
        copy = work / "copy.git"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(repo_path, copy)
        baseline_copy = work / "baseline.git"
        shutil.rmtree(baseline_copy, ignore_errors=True)
        shutil.copytree(repo_path, baseline_copy)

        t = time.perf_counter()
        subprocess.run(["git", "-C", str(baseline_copy), "repack", "-a", "-d", "-q"], check=True)
        repack_s = time.perf_counter() - t

        timed = _subprocess(repo_path, traced=False)
        traced = _subprocess(copy, traced=True)
        seconds = float(timed["seconds"])
        phases = timed["timings"]
        assert isinstance(phases, dict)
        mib = 1024 * 1024
        _table(
            [
                ("store", f"{built['notes']} notes, {built['versions']} versions over {DAYS} days"),
                ("history", f"{built['renames']} renames, {built['deleted_notes']} deleted notes"),
                ("build (fast-import, not timed)", f"{build_s:.1f} s"),
                ("index built by catch_up", f"{index_s:.1f} s"),
                ("versions kept / dropped", f"{timed['kept']} / {timed['dropped']}"),
                ("blobs purged (verified) / shared", f"{timed['purged']} / {timed['shared']}"),
                (
                    "objects before -> after",
                    f"{int(timed['bytes_before']) / mib:.1f} MiB -> {int(timed['bytes_after']) / mib:.1f} MiB",
                ),
                ("prune wall time", f"{seconds:.2f} s"),
                *[
                    (f"  phase {name}", f"{value:.2f} s, peak RSS {timed['phase_rss'].get(name, 0)} MiB")
                    for name, value in phases.items()
                ],
                ("peak RSS, pruner process", f"{timed['rss']:.0f} MiB"),
                ("peak RSS, largest git child", f"{timed['children_rss']:.0f} MiB"),
                ("tracemalloc peak (Python heap)", f"{int(traced['tracemalloc_peak']) / mib:.0f} MiB"),
                ("baseline: git repack -a -d", f"{repack_s:.2f} s"),
                ("baseline: index rebuild (catch_up)", f"{index_s:.2f} s"),
                ("ratio prune / git repack", f"{seconds / repack_s:.1f}x"),
                ("ratio prune / index rebuild", f"{seconds / index_s:.2f}x"),
            ]
        )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
