"""Benchmark: does a write's cost grow with the size of its folder? One run, side by side.

    python -m bench.flat [--notes 10000] [--sample 100] [--quick] [--fsync always|never] [--profile]
                         [--dir DIR] [--keep]

Four stores in one data home, written through the engine (``MemoryStore``), one commit per write:

  fresh    100 notes in one folder (``/notes/note-00042.md``), written first and then left alone
  aged     100 notes in one folder, updated once for every note the big stores get: as many writes
           as they have had, in a folder that stays small
  flat     N notes in one folder (``/notes/note-00042.md``)
  folders  the same N notes spread over 100 folders (``/topic-42/note-00042.md``)

``flat`` and ``folders`` get the same notes, written alternately, one real write each (so both grow at
once under the same machine load), and ``aged`` one update beside each. Then --sample rounds, each
timing one create (then deleted again, so the folders keep their size), one update and one rename
inside the folder in every store, one store after the other. Reported, as ratios in the same run:

  - create / update / rename p50 in the N-note folder against the 100-note folder of the same age
    (target <= 1.5x), in wall time and in the writing thread's CPU time (steadier on a busy machine);
    the fresh store's p50 is shown beside them;
  - disk of ``flat`` against ``folders`` (objects and index), 10 s after the last write (what the
    background packer left) and after maintenance (``packing.pack(full=True)``) (target <= 1.2x);
  - the CPU that git's background packer spends a write (its roll-ups of the batch packs), over
    256 more writes in each store once they are quiet: it is not in a write's own time, but it
    shares the machine's cores with the writers;
  - ``git clone`` and ``git log -p`` of each store with the stock ``git`` client: they must work; their
    time is shown as a ratio too;
  - what creating a file costs in each store's pack folder right after the timed rounds. A write
    creates three files (its pack, the pack's index, ``main.lock``), and on ext4 without a journal a
    new file's inode is searched for past every inode of its block group freed in the last one to six
    minutes (the kernel will not reuse them yet): a store that has just had thousands of writes, and
    so many packs rolled up, pays up to ~0.6 ms a file where a fresh one pays 0.03 ms, whatever the
    size of its folders. That is why the big folder is measured against a small one of the same age:
    the fresh store's column shows the file system's share, and that line tells it in microseconds.

Timings on a shared machine are noisy; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import hashlib
import io
import os
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from bench.engine import du
from gitmem import ids
from gitmem.clock import system_clock
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.git import repository
from gitmem.git.commits import VersionRecord, format_message
from gitmem.git.pack import packing, policy

T = TypeVar("T")

SMALL_FOLDER = 100
QUIET_WAIT_SECONDS = 10.0
PACKER_WRITES = 256  # a store packs at least every 256 writes (gitmem.engine.store.store.PACK_EVERY_WRITES)
TARGET_LATENCY_RATIO = 1.5
TARGET_DISK_RATIO = 1.2


def flat_path(i: int) -> str:
    return f"/notes/note-{i:05d}.md"


def folders_path(i: int) -> str:
    return f"/topic-{i % 100:02d}/note-{i:05d}.md"


def text_of(i: int, rng: random.Random) -> str:
    """A note of typical size (about 200 B to 2 KiB)."""
    words = [
        "memory",
        "agent",
        "prefers",
        "meeting",
        "project",
        "deadline",
        "review",
        "customer",
        "plan",
        "decision",
        "owner",
        "release",
        "context",
        "summary",
        "follow",
        "up",
        "risk",
        "status",
    ]
    size = int(min(2048, max(200, rng.lognormvariate(6.3, 0.6))))
    out = [f"Note {i}."]
    while sum(len(w) + 1 for w in out) < size:
        out.append(rng.choice(words))
    return " ".join(out)


def seed_notes(repo_path: Path, notes: Mapping[str, str], when: dt.datetime | None = None) -> None:
    """Add ``notes`` (path -> text) to ``main`` in ONE commit carrying a version record for each, with
    stock ``git fast-import`` (no engine code): a big folder in a second instead of minutes of writes.
    The index picks the notes up on its next ``catch_up``. Plain (unencrypted) stores only."""
    now = when or system_clock()
    records = []
    for path, text in notes.items():
        data = text.encode()
        records.append(
            VersionRecord(
                ids.new_id(ids.MEMORY),
                ids.new_id(ids.VERSION),
                "created",
                path,
                hashlib.sha256(data).hexdigest(),
                len(data),
                None,
                now,
                now,
            )
        )
    message = format_message(records).encode()
    tip = repository.git(repo_path, "rev-parse", "-q", "--verify", repository.MAIN).stdout.decode().strip()
    stamp = f"{int(now.timestamp())} +0000"
    stream = [
        b"commit %s\n" % repository.MAIN.encode(),
        f"author gitmem <gitmem@localhost> {stamp}\n".encode(),
        f"committer gitmem <gitmem@localhost> {stamp}\n".encode(),
        b"data %d\n" % len(message),
        message,
        b"\n",
    ]
    if tip:
        stream.append(f"from {tip}\n".encode())
    for path, text in notes.items():
        data = text.encode()
        stream += [f"M 100644 inline {path[1:]}\n".encode(), b"data %d\n" % len(data), data, b"\n"]
    stream.append(b"done\n")
    proc = repository.git(
        repo_path, "-c", "core.hooksPath=/dev/null", "fast-import", "--quiet", "--done", input=b"".join(stream)
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git fast-import failed: {proc.stderr.decode(errors='replace')}")


# -- measuring ----------------------------------------------------------------------------------------


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def progress(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Subject:
    """One store and what was measured on it."""

    name: str
    store: MemoryStore
    path_of: Callable[[int], str]
    ids: list[str] = field(default_factory=list)
    next_number: int = 0
    times: dict[str, list[float]] = field(default_factory=dict)

    def timed(self, kind: str, fn: Callable[[], T]) -> T:
        """Run ``fn``, keeping its wall time under ``kind`` and the CPU time of this thread (where a lone
        write is committed) under ``kind + " cpu"``: steadier than wall time on a busy machine."""
        start, cpu = time.perf_counter(), time.thread_time()
        result = fn()
        self.times.setdefault(kind, []).append(time.perf_counter() - start)
        self.times.setdefault(kind + " cpu", []).append(time.thread_time() - cpu)
        return result

    def create(self, text: str, kind: str = "create") -> None:
        path = self.path_of(self.next_number)
        self.next_number += 1
        self.ids.append(self.timed(kind, lambda: self.store.create(path, text)).id)


def one_round(subject: Subject, rng: random.Random, text: str) -> None:
    """A create (deleted again, untimed, so the folder keeps its size), an update, a rename."""
    subject.create(text)
    subject.store.delete(subject.ids.pop())
    memory_id = rng.choice(subject.ids)
    subject.timed("update", lambda: subject.store.update(memory_id, content=text + " (revised)"))
    memory_id = rng.choice(subject.ids)
    note = subject.store.get(memory_id, with_content=False)
    new_path = note.path.replace(".md", "-r.md") if not note.path.endswith("-r.md") else note.path[:-5] + ".md"
    subject.timed("rename", lambda: subject.store.update(memory_id, path=new_path))


def timed_listing(store: MemoryStore) -> float:
    """Seconds to list every note, 1,000 a page (the API's largest page)."""
    start = time.perf_counter()
    page = None
    while True:
        result = store.list("/", limit=1000, page=page)
        page = result.next_page
        if page is None:
            return time.perf_counter() - start


def git_checks(repo_path: Path, scratch: Path, notes: int) -> dict[str, float]:
    """Stock ``git``: a clone (over the pack protocol, checked out) and ``git log -p`` work; timed."""
    clone = scratch / f"clone-{repo_path.stem}"
    start = time.perf_counter()
    subprocess.run(
        ["git", "clone", "-q", "--no-local", "-b", "main", str(repo_path), str(clone)], check=True, capture_output=True
    )
    clone_seconds = time.perf_counter() - start
    files = sum(len(f) for _, _, f in os.walk(clone) if ".git" not in _)
    checked_out = int(
        subprocess.run(["git", "-C", str(clone), "ls-files"], capture_output=True, text=True, check=True).stdout.count(
            "\n"
        )
    )
    shutil.rmtree(clone)
    if checked_out < notes or files < notes:
        raise RuntimeError(f"the clone of {repo_path} has {checked_out} files, not {notes}")
    start = time.perf_counter()
    log = subprocess.run(["git", "-C", str(repo_path), "log", "-p", "main"], capture_output=True, check=True)
    log_seconds = time.perf_counter() - start
    if log.stdout.count(b"\ncommit ") + 1 < notes:
        raise RuntimeError(f"git log -p of {repo_path} shows too few commits")
    return {"clone": clone_seconds, "log -p": log_seconds}


def disk(store: MemoryStore) -> dict[str, int]:
    packs = list((store.path / "objects" / "pack").glob("pack-*.pack"))
    return {
        "objects": du(store.path / "objects"),
        "index": du(store.path / "gitmem"),
        "packs": len(packs),
        "loose": packing.loose_objects(store.path).count,
    }


def file_create_us(folder: Path, files: int = 50) -> float:
    """The median microseconds to create (and close) an empty file in ``folder``; removed again."""
    names, times = [folder / f"bench_probe_{os.getpid()}_{i}" for i in range(files)], []
    for name in names:
        start = time.perf_counter()
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        times.append(time.perf_counter() - start)
    for name in names:
        name.unlink()
    return statistics.median(times) * 1e6


def packer_ms_per_write(subject: Subject, text: str, writes: int = PACKER_WRITES) -> float:
    """Git's CPU a write in the store's background packer (its roll-ups, a child process of this one),
    over ``writes`` creates and deletes in the folder. Run on a quiet store, one store at a time; the
    full pack that follows once it is quiet again is waited for and not counted."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for i in range(writes // 2):
        subject.store.delete(subject.store.create(subject.path_of(10**6 + i), text).id)
    packing.wait_for_background_packer(subject.store.path)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    time.sleep(policy.QUIET_SECONDS + 0.5)
    wait_for_packers([subject.store.path])
    spent = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return spent * 1e3 / writes


def wait_for_packers(paths: list[Path], timeout: float = 600.0) -> None:
    """Wait until no background packer holds a store's pack lock."""
    for path in paths:
        with repository.packers_held_off(path, timeout=timeout):
            pass


# -- report -------------------------------------------------------------------------------------------


def verdict(value: float, target: float) -> str:
    return f"{value:5.2f}x {'ok' if value <= target else 'OVER'} (target <= {target}x)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.flat", description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000, help="notes in the big folder (default 10,000)")
    parser.add_argument("--sample", type=int, default=100, help="timed rounds in each folder (default 100)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1,000 notes, 30 rounds")
    parser.add_argument("--fsync", choices=["always", "never"], default="always")
    parser.add_argument("--profile", action="store_true", help="cProfile the timed rounds in the big flat folder")
    parser.add_argument("--dir", type=Path, help="where to work (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    args = parser.parse_args(argv)
    if args.quick:
        args.notes, args.sample = min(args.notes, 1000), min(args.sample, 30)
    n = args.notes - 1  # the store's limit is 10,000 notes: room for the timed create
    root = Path(tempfile.mkdtemp(prefix="gitmem-bench-flat-", dir=args.dir))
    rng = random.Random(17)
    try:
        gm = Gitmem.open(root / "home", fsync=args.fsync)
        workspace = gm.catalog.create_workspace("bench")

        def make(name: str, path_of: Callable[[int], str]) -> Subject:
            return Subject(name, gm.store(workspace.id, gm.create_store(workspace.id, name).id), path_of)

        fresh, aged = make("fresh", flat_path), make("aged", flat_path)
        flat, folders = make("flat", flat_path), make("folders", folders_path)
        stores = (fresh, aged, flat, folders)
        print(
            f"bench.flat: {n:,} notes in one folder vs {SMALL_FOLDER} notes, and vs 100 folders; fsync"
            f" {args.fsync}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n",
            flush=True,
        )
        for _ in range(SMALL_FOLDER):
            for small in (fresh, aged):
                small.create(text_of(small.next_number, rng), kind="bulk")
        texts = [text_of(i, rng) for i in range(n)]
        started = time.perf_counter()
        for i, text in enumerate(texts):
            flat.create(text, kind="bulk")
            folders.create(text, kind="bulk")
            memory_id = aged.ids[i % SMALL_FOLDER]
            aged.timed("bulk", lambda: aged.store.update(memory_id, content=text))  # noqa: B023 - called at once
            if (i + 1) % 1000 == 0:
                progress(
                    f"{i + 1:,} notes each; write p50 of the last 1,000: flat"
                    f" {p50(flat.times['bulk'][-1000:]) * 1e3:.1f} ms, folders"
                    f" {p50(folders.times['bulk'][-1000:]) * 1e3:.1f} ms"
                )
        progress(f"bulk written in {time.perf_counter() - started:.0f} s; {args.sample} timed rounds")
        profile = cProfile.Profile() if args.profile else None
        for _ in range(args.sample):
            text = text_of(rng.randrange(10**6), rng)
            one_round(fresh, rng, text)
            one_round(aged, rng, text)
            if profile:
                profile.enable()
            one_round(flat, rng, text)
            if profile:
                profile.disable()
            one_round(folders, rng, text)
        last_write = time.monotonic()
        create_cost = {s.name: file_create_us(s.store.path / "objects" / "pack") for s in stores}
        progress(f"waiting until {QUIET_WAIT_SECONDS:.0f} s after the last write")
        time.sleep(max(0.0, last_write + QUIET_WAIT_SECONDS - time.monotonic()))
        as_written = {s.name: disk(s.store) for s in (flat, folders)}
        wait_for_packers([flat.store.path, folders.store.path])
        for s in (flat, folders):
            packing.pack(s.store.path, "full")
            s.store.index.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        maintained = {s.name: disk(s.store) for s in (flat, folders)}
        listing = {s.name: min(timed_listing(s.store) for _ in range(3)) for s in (flat, folders)}
        progress(f"git's packer: {PACKER_WRITES} more writes in each store")
        packer_ms = {s.name: packer_ms_per_write(s, text) for s in stores}
        progress("git clone and git log -p")
        git_times = {s.name: git_checks(s.store.path, root, n) for s in (flat, folders)}

        columns = ("100, fresh", "100, aged", f"{n:,} in one", f"{n:,} in 100")
        lines = [f"{'p50 (ms)':<34}" + "".join(f"{c:>14}" for c in columns) + "   one big folder / 100, aged"]
        for kind in ("create", "update", "rename", "create cpu", "update cpu", "rename cpu"):
            values = [p50(s.times[kind]) * 1e3 for s in stores]
            ratio = values[2] / values[1]
            lines.append(
                f"{kind:<34}" + "".join(f"{v:14.2f}" for v in values) + f"   {verdict(ratio, TARGET_LATENCY_RATIO)}"
            )
        lines.append(
            f"{'create a file in the pack folder, us':<34}"
            + "".join(f"{create_cost[s.name]:14.0f}" for s in stores)
            + "   the file system's share (see above)"
        )
        lines.append(f"{'bulk write, whole run':<34}" + "".join(f"{p50(s.times['bulk']) * 1e3:14.2f}" for s in stores))
        lines.append(
            f"{'git packer CPU a write, ms':<34}"
            + "".join(f"{packer_ms[s.name]:14.2f}" for s in stores)
            + f"   {packer_ms['flat'] / max(packer_ms['aged'], 0.01):5.2f}x (background: roll-ups of batch packs)"
        )
        lines.append("")
        lines.append(f"{'disk (MiB)':<34}{'flat':>12}{'folders':>14}   flat / folders")
        for label, state in (("10 s after the last write", as_written), ("after maintenance", maintained)):
            f, g = state["flat"], state["folders"]
            total_f, total_g = f["objects"] + f["index"], g["objects"] + g["index"]
            lines.append(
                f"{label:<34}{total_f / 2**20:12.2f}{total_g / 2**20:14.2f}"
                f"   {verdict(total_f / total_g, TARGET_DISK_RATIO)}"
            )
            lines.append(
                f"{'  objects / index (MiB)':<34}{f['objects'] / 2**20:7.2f}/{f['index'] / 2**20:4.1f}"
                f"{g['objects'] / 2**20:9.2f}/{g['index'] / 2**20:4.1f}"
                f"   objects alone {f['objects'] / g['objects']:.2f}x; packs {f['packs']}/{g['packs']},"
                f" loose objects {f['loose']}/{g['loose']}"
            )
        lines.append("")
        flat_s, folders_s = listing["flat"], listing["folders"]
        lines.append(
            f"{'list every note, 1,000 a page (ms)':<34}{flat_s * 1e3:12.1f}{folders_s * 1e3:14.1f}"
            f"   {flat_s / folders_s:5.2f}x"
        )
        for what in ("clone", "log -p"):
            flat_s, folders_s = git_times["flat"][what], git_times["folders"][what]
            lines.append(
                f"{'git ' + what + ' (s), stock git':<34}{flat_s:12.2f}{folders_s:14.2f}"
                f"   {flat_s / folders_s:5.2f}x (works)"
            )
        print("\n".join(lines), flush=True)
        if profile:
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(15)
            print(f"\nprofile of {args.sample} rounds in the {n:,}-note folder (by own time):\n{out.getvalue()}")
        for s in stores:
            s.store.close()
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
