"""Benchmark: a roll-up of batch packs (``gitmem.git.pack.roll_up``) against ``git repack --geometric=2``.

    python -m bench.roll_up [--notes 9900] [--writes 64] [--turns 3]

Two stores of ``--notes`` notes (one commit, one pack): ``flat`` with every note in one folder and
``folders`` with them spread over 100 folders. Each then gets ``--writes`` writes through the engine
with the packer held off, so that every write leaves its own small pack, as between two roll-ups of a
busy store. Each store is copied twice; one copy is rolled up by gitmem, the other by plain ``git
repack -d --geometric=2`` with the same delta depth. Printed, as medians of ``--turns``: the CPU each
took (git's processes and, for gitmem, its own thread), per write, and the objects' size after, with
the ratios gitmem / git.
"""

from __future__ import annotations

import argparse
import functools
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.flat import flat_path, folders_path, seed_notes, text_of
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store import store as store_module
from gitmem.git.pack import packing
from gitmem.git.pack.roll_up import roll_up


def cpu_ms(run: Callable[[], object]) -> float:
    """The CPU ``run`` takes in this thread (the roll-up's own reading of indexes and trees) and in the
    processes it starts and waits for (git)."""
    before, thread_before = resource.getrusage(resource.RUSAGE_CHILDREN), time.thread_time()
    run()
    after, thread_after = resource.getrusage(resource.RUSAGE_CHILDREN), time.thread_time()
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime + thread_after - thread_before) * 1e3


def store_with_batch_packs(home: Path, path_of: Callable[[int], str], notes: int, writes: int) -> Path:
    """A store of ``notes`` notes in one pack, then ``writes`` writes each leaving a pack of its own."""
    rng = random.Random(5)
    gm = Gitmem.open(home, fsync="never")
    try:
        workspace = gm.catalog.create_workspace("bench")
        store = gm.store(workspace.id, gm.create_store(workspace.id, "s").id)
        seed_notes(store.path, {path_of(i): text_of(i, rng) for i in range(notes)})
        held_off = store_module.MemoryStore._after_write
        store_module.MemoryStore._after_write = lambda self: None  # type: ignore[method-assign]  # noqa: ARG005  MemoryStore._after_write's signature
        try:
            for i in range(writes):
                store.create(path_of(notes + i), text_of(notes + i, rng))
        finally:
            store_module.MemoryStore._after_write = held_off  # type: ignore[method-assign]
        store.close()
        return store.path
    finally:
        gm.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.roll_up", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--notes", type=int, default=9_900, help="notes in each store before the writes (a store holds 10,000)"
    )
    parser.add_argument("--writes", type=int, default=64, help="writes, each leaving a pack, to roll up")
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    git_repack = ["git", "repack", "-d", "-q", "--geometric=2", f"--depth={packing.DELTA_DEPTH}"]
    print(
        f"bench.roll_up: {args.notes:,} notes, then {args.writes} writes each leaving a pack; median of"
        f" {args.turns} turns\n"
    )
    print(f"{'store':<10}{'':<10}{'CPU ms':>10}{'ms a write':>12}{'objects KiB':>13}{'packs':>7}")
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-roll-up-") as tmp:
        root = Path(tmp)
        for name, path_of in (("flat", flat_path), ("folders", folders_path)):
            source = store_with_batch_packs(root / name, path_of, args.notes, args.writes)
            results: dict[str, list[tuple[float, int, int]]] = {"gitmem": [], "git": []}
            for turn in range(args.turns):
                for who in results:
                    copy = root / f"{name}-{who}-{turn}"
                    shutil.copytree(source, copy)
                    if who == "gitmem":
                        cpu = cpu_ms(functools.partial(roll_up, copy, depth=packing.DELTA_DEPTH, fsync=True))
                    else:
                        cpu = cpu_ms(functools.partial(subprocess.run, git_repack, cwd=copy, check=True))
                    seen = packing.on_disk(copy)
                    results[who].append((cpu, seen.bytes, seen.packs))
                    shutil.rmtree(copy)
            medians = {
                who: tuple(statistics.median(r[i] for r in rows) for i in range(3)) for who, rows in results.items()
            }
            for who, (cpu, size, packs) in medians.items():
                print(f"{name:<10}{who:<10}{cpu:10.1f}{cpu / args.writes:12.2f}{size / 1024:13.0f}{packs:7.0f}")
            (ours, our_size, _), (theirs, their_size, _) = medians["gitmem"], medians["git"]
            print(f"{name:<10}{'gitmem/git':<10}{ours / theirs:9.2f}x{'':12}{our_size / their_size:12.2f}x\n")


if __name__ == "__main__":
    main()
