"""Benchmark: what signing costs a write, and how long ``gitmem audit verify`` takes on a big store.

    python -m bench.signing [--writes 300] [--runs 3] [--fsync always] [--notes 10000] [--versions 100000]
                            [--skip-audit]

1. **Writes.** Two stores of one home, both opened by the home and written in turn (so load on the
   machine hits both alike): one signs every commit with the home's Ed25519 key, in-process; the
   other's signer is taken away (the baseline). Prints writes per second and CPU a write of each, what
   signing costs of both, and the CPU of one signature alone.
2. **Audit.** A store of ``--notes`` notes and ``--versions`` versions built as :mod:`bench.prune` builds
   one (``git fast-import``, gitmem's trailers), every commit then signed as a rewrite signs them, its
   index built; then :func:`gitmem.engine.audit.verify.verify` with the index, timed, beside a plain
   ``git log --format=%H`` of the same history as a baseline.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pygit2

from gitmem.crypto.signing_key import HomeSigner, known_keys
from gitmem.durable import FsyncMode
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.git import repository
from gitmem.git.pack.format import write_pack
from gitmem.git.signing import sign_chain


class _TimedSigner:
    """The home's signer, counting the CPU its signatures take."""

    def __init__(self, signer: HomeSigner) -> None:
        self.signer, self.seconds, self.count = signer, 0.0, 0

    def sign(self, payload: bytes) -> bytes:
        started = time.thread_time()  # this thread's: the packer's threads run meanwhile
        try:
            return self.signer.sign(payload)
        finally:
            self.seconds += time.thread_time() - started
            self.count += 1


def writes(count: int, runs: int, fsync: FsyncMode) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        gm = Gitmem.open(Path(tmp) / "home", fsync=fsync)
        ws = gm.catalog.create_workspace("bench")
        signed = gm.store(ws.id, gm.create_store(ws.id, "signed").id)
        timed = _TimedSigner(gm.signer)
        signed.signer = timed  # the home's key, with the CPU its signatures take counted
        unsigned = gm.store(ws.id, gm.create_store(ws.id, "unsigned").id)
        unsigned.signer = None  # the same store object in every other way: only the signing differs
        rates: dict[str, list[float]] = {"unsigned": [], "signed": []}
        cpu: dict[str, list[float]] = {"unsigned": [], "signed": []}
        for run in range(runs):  # ABBA: neither side always runs first
            pair = (("unsigned", unsigned), ("signed", signed))
            for name, store in pair if run % 2 == 0 else pair[::-1]:
                started, used = time.perf_counter(), time.process_time()
                for i in range(count):
                    store.create(f"/r{run}/n{i}.md", f"note {i} of run {run}")
                rates[name].append(count / (time.perf_counter() - started))
                cpu[name].append((time.process_time() - used) / count)
        base, with_key = statistics.median(rates["unsigned"]), statistics.median(rates["signed"])
        base_cpu, key_cpu = statistics.median(cpu["unsigned"]), statistics.median(cpu["signed"])
        payload = bytes(400)
        started = time.thread_time()
        for _ in range(2000):
            gm.signer.sign(payload)
        per_signature = (time.thread_time() - started) / 2000
        print(f"writes, {count} a run, {runs} runs, fsync {gm.durability.mode}:")
        print(f"  unsigned  {base:8.1f} writes/s  {base_cpu * 1e3:6.2f} ms CPU a write")
        cost, cpu_cost = 100 * (base / with_key - 1), 100 * (key_cpu / base_cpu - 1)
        print(f"  signed    {with_key:8.1f} writes/s  {key_cpu * 1e3:6.2f} ms CPU a write")
        print(f"  signing costs a write {cost:+.1f}% of its time, {cpu_cost:+.1f}% of its CPU")
        print(f"  one signature: {per_signature * 1e6:.0f} us of CPU")
        inside = timed.seconds / timed.count
        print(
            f"  signing inside the signed writes: {inside * 1e6:.0f} us of CPU a write,"
            f" {100 * inside / key_cpu:.1f}% of a signed write's CPU"
        )


def audit(notes: int, versions: int) -> None:
    from bench.prune import build
    from gitmem.engine.audit.verify import verify

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        signer = HomeSigner(home)
        repo_path = home / "stores" / "memstore_bench.git"
        repo_path.parent.mkdir(parents=True)
        clock = time.perf_counter()
        made = build(repo_path, notes, versions)
        repo = pygit2.Repository(str(repo_path))
        tip = repository.read_tip(repo)
        assert tip is not None
        new_tip, objects = sign_chain(repo, None, str(tip), signer)
        write_pack(repo_path / "objects", objects)
        assert repository.compare_and_swap(repo, tip, pygit2.Oid(hex=new_tip))
        subprocess.run(["git", "-C", str(repo_path), "repack", "-a", "-d", "-q"], check=True)
        subprocess.run(["git", "-C", str(repo_path), "prune", "--expire=now"], check=True)
        store = MemoryStore(repo_path, "memstore_bench", signer=signer)
        store.index.catch_up()
        built = time.perf_counter() - clock
        print(f"audit: a store of {made['notes']} notes, {made['versions']} versions (built in {built:.0f} s)")
        started = time.perf_counter()
        subprocess.run(["git", "-C", str(repo_path), "log", "--format=%H"], check=True, capture_output=True)
        baseline = time.perf_counter() - started
        started, cpu = time.perf_counter(), time.process_time()
        report = verify(store.repo, known_keys(home), store=store)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
        assert report.ok, report.problems[:3]
        for check, what in report.checked.items():
            print(f"  {check}: {what}")
        print(f"  gitmem audit verify: {seconds:.1f} s ({cpu_seconds:.1f} s CPU in this process)")
        print(f"  git log --format=%H of the same history: {baseline:.2f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.signing")
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--versions", type=int, default=100_000)
    parser.add_argument("--fsync", choices=["always", "files", "never"], default="always")
    parser.add_argument("--skip-audit", action="store_true")
    args = parser.parse_args(argv)
    writes(args.writes, args.runs, args.fsync)
    if not args.skip_audit:
        audit(args.notes, args.versions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
