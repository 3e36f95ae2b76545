"""What a store of N notes costs on disk, written over HTTP the way ``bench.http`` writes its store.

For each N (2,000 and 10,000 by default): ``gitmem serve`` on loopback, N notes of ~310 bytes in 100
folders posted to one store by 1, 8 and then 32 clients (bench.http's mix), the store's folder sampled
twice a second while it is written (the peak) and measured ``--settle`` seconds after the last write;
then what the folder holds: index, write-ahead log, packs, loose objects, the rest. The target (issue
10): at most 2x the raw content + 2 MB, at every moment. Beside it, the floor: a bare clone of the
store's history alone, packed as tightly as git can (``git repack -adf --window=250 --depth=1000``), and
what of the target that leaves for the index, per note; and the settled store against the corrected
target of issue 34: at most 1.3x that floor plus the index at 400 B a note.

    python -m bench.disk                      # 2,000 and 10,000 notes
    python -m bench.disk --notes 2000 --json disk.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.http import Server, Writer, create_store, drive, servers

TARGET_FACTOR, TARGET_EXTRA = 2.0, 2_000_000
# The corrected target (issue 34): settled, at most 1.3x the floor, the floor being the history packed as
# tightly as git can plus the index at 400 B a note.
FLOOR_FACTOR, INDEX_FLOOR_PER_NOTE = 1.3, 400


def usage(folder: Path) -> dict[str, int]:
    """Bytes allocated on disk below ``folder`` by kind (a packer may delete files as we look)."""
    kinds: dict[str, int] = {}
    for root, _, files in os.walk(folder):
        rel = Path(root).relative_to(folder).parts
        for name in files:
            try:
                size = os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
            if rel[:1] == ("objects",) and len(rel) == 2 and len(rel[1]) == 2:
                kind = "loose objects"
            elif rel[:2] == ("objects", "pack"):
                kind = "packs" if name.startswith("pack-") else "packs being written"
            elif rel[:1] == ("gitmem",) and name.startswith("index.sqlite3"):
                kind = {"-wal": "index WAL", "-shm": "index shared memory"}.get(name[len("index.sqlite3") :], "index")
            else:
                kind = "other (refs, config, locks)"
            kinds[kind] = kinds.get(kind, 0) + size
    return kinds


class Sampler:
    """The folder's size twice a second, in a thread, while it is written."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak, self._stop = folder, 0, threading.Event()
        self.at_peak: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            now = usage(self.folder)
            if sum(now.values()) > self.peak:
                self.peak, self.at_peak = sum(now.values()), now

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def history_floor(folder: Path, scratch: Path) -> int:
    """Bytes of the store's history alone (no index), packed as tightly as git can."""
    copy = scratch / "floor.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(folder), str(copy)], check=True)
    tightest = ["repack", "-adf", "-q", "--window=250", "--depth=1000"]
    subprocess.run(["git", "-C", str(copy), *tightest], check=True)
    return sum(usage(copy / "objects").values())


def measure(gitmem: Server, notes: int, settle: float, scratch: Path) -> dict[str, object]:
    store = create_store(gitmem, f"disk-{notes}")
    folder, writer = gitmem.store_dir(store), Writer()
    share = {1: notes // 5, 8: 2 * notes // 5, 32: notes - notes // 5 - 2 * notes // 5}
    with Sampler(folder) as sampler:
        for clients, count in share.items():
            drive(gitmem, clients, writer.jobs([store], count))
        last_write = time.monotonic()
        while time.monotonic() < last_write + settle:  # the packer's moments count too
            time.sleep(0.1)
    after = usage(folder)
    raw = writer.raw_bytes[store]
    return {
        "notes": len(writer.ids[store]),
        "raw": raw,
        "target": TARGET_FACTOR * raw + TARGET_EXTRA,
        "settled": sum(after.values()),
        "peak": max(sampler.peak, sum(after.values())),
        "by_kind": after,
        "history_floor": history_floor(folder, scratch),
        "at_peak": sampler.at_peak,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.disk", description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, nargs="+", default=[2000, 10000], help="store sizes to measure")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after the last write to measure")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    options = parser.parse_args(argv)
    results = []
    for notes in options.notes:  # a fresh server per size: one store's packer does not slow the next
        with tempfile.TemporaryDirectory(prefix="gitmem-bench-disk-") as tmp, servers(Path(tmp)) as (gitmem, _):
            results.append(measure(gitmem, notes, options.settle, Path(tmp)))
    mb = 1e6
    print(f"disk of one store, {options.settle:g} s after the last write (settled) and while written (peak), MB")
    print(f"{'notes':>7} {'raw':>6} {'target':>7} {'settled':>8} {'ratio':>6} {'peak':>6}  within target")
    for r in results:
        settled, peak, target, raw = r["settled"], r["peak"], r["target"], r["raw"]
        assert isinstance(settled, int) and isinstance(peak, int) and isinstance(target, float) and isinstance(raw, int)
        verdict = "yes" if peak <= target else ("settled only" if settled <= target else "no")
        print(
            f"{r['notes']:>7} {raw / mb:>6.2f} {target / mb:>7.2f} {settled / mb:>8.2f} {settled / raw:>5.1f}x"
            f" {peak / mb:>6.2f}  {verdict}"
        )
    print("the floor: the history alone, packed as tightly as git can, and what the target leaves for the index")
    for r in results:
        floor, target, notes_ = r["history_floor"], r["target"], r["notes"]
        assert isinstance(floor, int) and isinstance(target, float) and isinstance(notes_, int)
        left = target - floor
        print(
            f"  {notes_} notes: history {floor / mb:.2f} MB; left for the index {left / mb:.2f} MB,"
            f" {left / notes_:.0f} B a note"
        )
    print(f"against the floor (history + {INDEX_FLOOR_PER_NOTE} B a note of index), settled; target <= {FLOOR_FACTOR}x")
    for r in results:
        floor, settled, notes_ = r["history_floor"], r["settled"], r["notes"]
        assert isinstance(floor, int) and isinstance(settled, int) and isinstance(notes_, int)
        whole = floor + INDEX_FLOOR_PER_NOTE * notes_
        verdict = "ok" if settled <= FLOOR_FACTOR * whole else "MISSED"
        print(
            f"  {notes_} notes: floor {whole / mb:.2f} MB, settled {settled / mb:.2f} MB,"
            f" {settled / whole:.2f}x {verdict}"
        )
    for r in results:
        for moment in ("by_kind", "at_peak"):
            kinds = r[moment]
            assert isinstance(kinds, dict)
            label = "settled" if moment == "by_kind" else "at the peak"
            print(f"  {r['notes']} notes, {label}: " + ", ".join(f"{k} {v / mb:.2f}" for k, v in sorted(kinds.items())))
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
