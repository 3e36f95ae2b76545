"""Benchmark: ``gitmem backup`` and ``gitmem restore`` of a home against ``tar`` of the same home.

    python -m bench.backup [--stores 1000] [--versions 100] [--changed 3] [--keep DIR]

The home holds ``--stores`` stores of ``--versions`` versions each (ten notes, each rewritten). One
store is written through the engine; the others are copies of its repository under their own store
ids, each then given one write of its own through the engine (so no two are alike and every index is
the store's own), because a hundred thousand engine writes take many minutes here. Then, side by side
on the same home:

- a full backup (``take_backup``) against ``tar -cf`` of the home (the simplest copy, which is not
  consistent while the home serves);
- an incremental backup after ``--changed`` stores were written, against the same ``tar``;
- a restore (``restore_home``: repositories from bundles, indexes rebuilt from history, fsck's checks
  of every store) against ``tar -xf`` (which restores the indexes as files and checks nothing).

Printed: wall seconds of each, the ratios gitmem / tar, and the bytes each wrote. One run at the full
size is in docs/backup.md ("Cost"): 36x tar for a full backup, 1.4x for an incremental one, 112x for a
restore that rebuilds and checks every store, a quarter of tar's bytes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gitmem.backup.restore import restore_home
from gitmem.backup.take import take_backup
from gitmem.engine.gitmem import Gitmem

NOTES = 10


T = TypeVar("T")


def timed(run: Callable[[], T]) -> tuple[float, T]:
    started = time.monotonic()
    result = run()
    return time.monotonic() - started, result


def folder_bytes(folder: Path) -> int:
    seen: set[int] = set()
    total = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total


def build_home(home: Path, stores: int, versions: int) -> tuple[Gitmem, str, list[str]]:
    gm = Gitmem.open(home, fsync="never")
    ws = gm.catalog.create_workspace("bench")
    template = gm.create_store(ws.id, "store-0")
    with gm.leases():
        store = gm.store(ws.id, template.id)
        for v in range(versions - 1):
            store.upsert(f"/notes/{v % NOTES}.md", f"note {v % NOTES}, revision {v // NOTES}: " + "text " * 40)
    ids = [template.id]
    for i in range(1, stores):
        info = gm.create_store(ws.id, f"store-{i}")
        shutil.rmtree(gm.repo_path(info.id))
        shutil.copytree(
            gm.repo_path(template.id), gm.repo_path(info.id), ignore=shutil.ignore_patterns("index.sqlite3*")
        )
        ids.append(info.id)
        if i % 100 == 0:
            print(f"  {i} stores", flush=True)
    for store_id in ids:  # one write of its own each: the store's index is built from its history here
        with gm.leases():  # one store open at a time
            gm.store(ws.id, store_id).upsert("/own.md", f"this is {store_id}")
    return gm, ws.id, ids


def row(what: str, seconds: float, baseline: str, baseline_seconds: float) -> None:
    print(
        f"  {what:<16} {seconds:8.2f} s   {baseline} {baseline_seconds:6.2f} s"
        f"   ratio {seconds / baseline_seconds:6.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=int, default=1000)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--changed", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="build under this folder and leave it")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="gitmem-bench-backup-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        home = root / "home"
        print(f"building {args.stores} stores x {args.versions} versions in {home}", flush=True)
        build_seconds, (gm, ws_id, ids) = timed(lambda: build_home(home, args.stores, args.versions))
        print(f"  built in {build_seconds:.0f} s; home {folder_bytes(home) / 1e6:.1f} MB")
        tar_seconds, _ = timed(
            lambda: subprocess.run(["tar", "-cf", str(root / "home.tar"), "-C", str(home), "."], check=True)
        )
        full_seconds, full = timed(lambda: take_backup(gm, root / "backups"))
        for store_id in ids[: args.changed]:
            with gm.leases():
                gm.store(ws_id, store_id).upsert("/own.md", "changed")
        inc_seconds, inc = timed(lambda: take_backup(gm, root / "backups"))
        untar = root / "untarred"
        untar.mkdir()
        untar_seconds, _ = timed(
            lambda: subprocess.run(["tar", "-xf", str(root / "home.tar"), "-C", str(untar)], check=True)
        )
        restore_seconds, restored = timed(lambda: restore_home(full.folder, root / "restored", fsync="never"))
        assert restored.ok, restored.problems
        assert len(inc.copied) == args.changed
        tar_bytes = (root / "home.tar").stat().st_size
        versions = args.stores * args.versions
        print(f"\n{args.stores} stores, {versions} versions (wall seconds; ratio gitmem / tar)")
        row("full backup", full_seconds, "tar -cf", tar_seconds)
        row(f"incremental ({args.changed})", inc_seconds, "tar -cf", tar_seconds)
        print(f"    {len(inc.copied)} stores copied, {inc.manifest.copied_bytes} bytes")
        row("restore", restore_seconds, "tar -xf", untar_seconds)
        backup_bytes = folder_bytes(full.folder)
        print(
            f"  bytes: backup {backup_bytes / 1e6:.1f} MB, tar {tar_bytes / 1e6:.1f} MB,"
            f" ratio {backup_bytes / tar_bytes:.2f}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
