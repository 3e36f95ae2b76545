"""The engine beside two baselines, measured in the same process, on the same disk, in one run.

    python -m bench.engine [--notes 10000] [--git-sample 300] [--fsync always|never] [--dir DIR] [--keep]
                           [--layouts folders,flat] [--json FILE]

For N notes laid out in 100 folders and again in one flat folder, gitmem (one commit per write, built
with pygit2, plus its SQLite index) against

  (a) plain files + SQLite: each write goes to a temporary file that is renamed into place (with
      fsync of the file and its folder when gitmem fsyncs) plus a row in SQLite (synchronous=FULL when
      fsyncing), with the same columns and indexes as gitmem's index. It keeps only each note's current
      text (its versions table holds metadata only): the least a durable store can do.
  (b) a non-bare Git repository driven by the git CLI: write the file, then one ``git add`` and one
      ``git commit`` subprocess per write. It is slow, so it runs on the first --git-sample writes only
      and is compared with the other two on their first writes of the same count.

Measured: write latency (p50, p99), update latency, read by id with content (p50), a full listing
paged 1,000 at a time, version queries filtered by memory_id and by actor, and disk use after
maintenance (``packing.pack(path, "full")``) against the raw bytes of the notes. Also: whether
background packing ran during the bulk write (packs and loose objects at its end) and what the same
objects take on disk loose, to show packing keeps disk near the packed size.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import hashlib
import importlib.metadata
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from bench.words import WORDS
from gitmem import ids
from gitmem.durable import fsync_dir
from gitmem.engine.gitmem import Gitmem
from gitmem.git.pack import packing
from gitmem.model import Actor, ActorType

LAYOUTS: dict[str, tuple[str, Callable[[int], str]]] = {
    "folders": ("100 folders", lambda i: f"/topic-{i % 100:02d}/note-{i:05d}.md"),
    "flat": ("one flat folder", lambda i: f"/notes/note-{i:05d}.md"),
}
KINDS: list[tuple[ActorType, str]] = [("task_actor", "task"), ("api_actor", "apikey"), ("user_actor", "user")]
ACTORS = [Actor(kind, f"{prefix}_bench{i:02d}") for i, (kind, prefix) in enumerate(KINDS * 4)][:10]
READ_SAMPLES = 1000
VERSION_SAMPLES = 500
UPDATE_EVERY = 10  # one note in ten is updated once after the bulk write


# -- helpers ------------------------------------------------------------------------------------------


def bodies(n: int, seed: int) -> list[str]:
    """Note texts of typical memory-note sizes (about 100 B to 4 KiB, median near 700 B)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = int(min(4096, max(100, rng.lognormvariate(6.5, 0.7))))
        words: list[str] = [f"Note {i}."]
        while sum(len(w) + 1 for w in words) < size:
            words.append(rng.choice(WORDS))
        out.append(" ".join(words)[:size])
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def du(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (what ``du`` counts: whole blocks)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def progress(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Run:
    """One system's numbers for one layout (seconds, bytes, counts)."""

    write: list[float] = field(default_factory=list)
    update: list[float] = field(default_factory=list)
    read: list[float] = field(default_factory=list)
    list_all: float | None = None
    by_memory: list[float] = field(default_factory=list)
    by_actor_first: list[float] = field(default_factory=list)
    by_actor_all: float | None = None
    by_actor_count: int = 0
    disk: int | None = None
    extra: dict[str, float] = field(default_factory=dict)


# -- gitmem -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def counting_packers() -> Iterator[list[float]]:
    """Count the engine's calls to ``packing.pack_in_background`` (it still packs)."""
    calls: list[float] = []
    original = packing.pack_in_background

    def counted(
        repo_path: Path, mode: packing.PackMode = "geometric", *, fsync: bool = True, always: bool = False
    ) -> None:
        calls.append(time.perf_counter())
        original(repo_path, mode, fsync=fsync, always=always)

    packing.pack_in_background = counted
    try:
        yield calls
    finally:
        packing.pack_in_background = original


def wait_for_packers(repo_path: Path) -> None:
    thread = packing._packers.get(str(repo_path))
    if thread is not None:
        thread.join()


def pack_files(repo_path: Path) -> list[Path]:
    return sorted((repo_path / "objects" / "pack").glob("pack-*.pack"))


def loose_equivalent(repo_path: Path, scratch: Path) -> int:
    """The disk the same objects take unpacked, one file each (as they would with no packing)."""
    subprocess.run(["git", "init", "-q", "--bare", str(scratch)], check=True)
    for pack in pack_files(repo_path):
        with pack.open("rb") as stream:
            subprocess.run(["git", "-C", str(scratch), "unpack-objects", "-q"], stdin=stream, check=True)
    size = du(scratch / "objects")
    shutil.rmtree(scratch)
    return size


def run_gitmem(root: Path, layout: str, texts: list[str], fsync: bool, seed: int) -> Run:
    run = Run()
    path_of = LAYOUTS[layout][1]
    gm = Gitmem.open(root / f"gitmem-{layout}", fsync="always" if fsync else "never")
    workspace = gm.catalog.create_workspace("bench")
    store = gm.store(workspace.id, gm.create_store(workspace.id, f"bench {layout}").id)
    repo_path = store.path
    memory_ids: list[str] = []
    with counting_packers() as packers:
        for i, text in enumerate(texts):
            start = time.perf_counter()
            note = store.create(path_of(i), text, actor=ACTORS[i % len(ACTORS)])
            run.write.append(time.perf_counter() - start)
            memory_ids.append(note.id)
            if (i + 1) % 2000 == 0:
                progress(f"gitmem {layout}: {i + 1} writes, p50 so far {statistics.median(run.write) * 1e3:.2f} ms")
        for i in range(0, len(texts), UPDATE_EVERY):
            start = time.perf_counter()
            store.update(memory_ids[i], content=texts[i] + " Revised.", actor=ACTORS[(i + 1) % len(ACTORS)])
            run.update.append(time.perf_counter() - start)
        run.extra["packers started"] = len(packers)
        run.extra["packs at end of writes"] = len(pack_files(repo_path))
        run.extra["loose objects at end of writes"] = packing.loose_objects(repo_path).count
        wait_for_packers(repo_path)
    run.extra["disk as written"] = du(repo_path / "objects")
    run.extra["packs as written"] = len(pack_files(repo_path))
    run.extra["loose as written"] = packing.loose_objects(repo_path).count

    rng = random.Random(seed)
    for memory_id in rng.choices(memory_ids, k=READ_SAMPLES):
        start = time.perf_counter()
        store.get(memory_id, with_content=True)
        run.read.append(time.perf_counter() - start)

    def list_all() -> None:
        count, page = 0, None
        while True:
            result = store.list(limit=1000, page=page)
            count += len(result.items)
            page = result.next_page
            if page is None:
                break
        assert count == len(texts), count

    run.list_all = min(timed(list_all) for _ in range(3))
    for memory_id in rng.choices(memory_ids, k=VERSION_SAMPLES):
        run.by_memory.append(timed(functools.partial(store.versions, memory_id=memory_id, limit=100)))
    for _ in range(10):
        for actor in ACTORS:
            kwargs: dict[str, Any] = {actor.id_field: actor.id}
            run.by_actor_first.append(timed(functools.partial(store.versions, limit=100, **kwargs)))

    def by_actor_all() -> int:
        seen, page = 0, None
        while True:
            first: dict[str, Any] = {ACTORS[0].id_field: ACTORS[0].id}
            result = store.versions(limit=100, page=page, **first)
            seen += len(result.items)
            page = result.next_page
            if page is None:
                return seen

    run.by_actor_count = by_actor_all()
    run.by_actor_all = min(timed(by_actor_all) for _ in range(3))

    run.extra["full pack seconds"] = timed(lambda: packing.pack(repo_path, "full"))
    store.index.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # as for the baseline's SQLite
    run.disk = du(repo_path)
    run.extra["objects after maintenance"] = du(repo_path / "objects")
    run.extra["index after maintenance"] = du(repo_path / "gitmem")
    run.extra["loose equivalent"] = loose_equivalent(repo_path, root / f"loose-{layout}.git")
    run.extra["commits"] = int(
        subprocess.run(
            ["git", "-C", str(repo_path), "rev-list", "--count", "main"], capture_output=True, text=True, check=True
        ).stdout
    )
    store.close()
    return run


# -- baseline (a): plain files + SQLite ---------------------------------------------------------------

FILES_SCHEMA = """
CREATE TABLE notes (memory_id TEXT PRIMARY KEY, path TEXT NOT NULL UNIQUE, sha256 TEXT NOT NULL,
    size INTEGER NOT NULL, version_id TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE versions (seq INTEGER PRIMARY KEY, version_id TEXT NOT NULL UNIQUE, memory_id TEXT NOT NULL,
    operation TEXT NOT NULL, path TEXT, sha256 TEXT, size INTEGER, created_at INTEGER NOT NULL,
    actor_type TEXT, actor_id TEXT);
CREATE INDEX versions_memory ON versions (memory_id, seq);
CREATE INDEX versions_actor ON versions (actor_type, actor_id, seq);
"""


class FilesStore:
    def __init__(self, base: Path, fsync: bool) -> None:
        self.files = base / "notes"
        self.files.mkdir(parents=True)
        self.fsync = fsync
        self.db = sqlite3.connect(base / "index.sqlite3", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'OFF'}")
        self.db.executescript(FILES_SCHEMA)

    def _put(self, path: str, data: bytes) -> None:
        target = self.files / path[1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
        if self.fsync:
            fsync_dir(target.parent)

    def write(self, path: str, text: str, actor: Actor, memory_id: str | None = None) -> str:
        data = text.encode()
        digest = hashlib.sha256(data).hexdigest()
        now = int(time.time() * 1e6)
        version_id = ids.new_id(ids.VERSION)
        self._put(path, data)
        self.db.execute("BEGIN IMMEDIATE")
        if memory_id is None:
            memory_id = ids.new_id(ids.MEMORY)
            self.db.execute(
                "INSERT INTO notes VALUES (?,?,?,?,?,?,?)", (memory_id, path, digest, len(data), version_id, now, now)
            )
            operation = "created"
        else:
            self.db.execute(
                "UPDATE notes SET sha256=?, size=?, version_id=?, updated_at=? WHERE memory_id=?",
                (digest, len(data), version_id, now, memory_id),
            )
            operation = "modified"
        self.db.execute(
            "INSERT INTO versions (version_id, memory_id, operation, path, sha256, size, created_at,"
            " actor_type, actor_id) VALUES (?,?,?,?,?,?,?,?,?)",
            (version_id, memory_id, operation, path, digest, len(data), now, actor.type, actor.id),
        )
        self.db.execute("COMMIT")
        return memory_id

    def read(self, memory_id: str) -> str:
        path: str
        (path,) = self.db.execute("SELECT path FROM notes WHERE memory_id=?", (memory_id,)).fetchone()
        return (self.files / path[1:]).read_text()

    def list_page(self, after: str, limit: int) -> list[tuple[Any, ...]]:
        return self.db.execute(
            "SELECT memory_id, path, sha256, size, version_id, created_at, updated_at FROM notes"
            " WHERE path>? ORDER BY path LIMIT ?",
            (after, limit),
        ).fetchall()

    def versions(self, where: str, args: tuple[object, ...], before: int | None, limit: int) -> list[tuple[Any, ...]]:
        sql = f"SELECT * FROM versions WHERE {where}" + (" AND seq<?" if before is not None else "")  # noqa: S608  the benchmark's own conditions
        return self.db.execute(
            sql + " ORDER BY seq DESC LIMIT ?", (*args, *([before] if before is not None else []), limit)
        ).fetchall()


def run_files(root: Path, layout: str, texts: list[str], fsync: bool, seed: int) -> Run:
    run = Run()
    path_of = LAYOUTS[layout][1]
    base = root / f"files-{layout}"
    store = FilesStore(base, fsync)
    memory_ids = []
    for i, text in enumerate(texts):
        start = time.perf_counter()
        memory_ids.append(store.write(path_of(i), text, ACTORS[i % len(ACTORS)]))
        run.write.append(time.perf_counter() - start)
    for i in range(0, len(texts), UPDATE_EVERY):
        start = time.perf_counter()
        store.write(path_of(i), texts[i] + " Revised.", ACTORS[(i + 1) % len(ACTORS)], memory_id=memory_ids[i])
        run.update.append(time.perf_counter() - start)
    rng = random.Random(seed)
    for memory_id in rng.choices(memory_ids, k=READ_SAMPLES):
        run.read.append(timed(functools.partial(store.read, memory_id)))

    def list_all() -> None:
        count, after = 0, ""
        while True:
            rows = store.list_page(after, 1000)
            count += len(rows)
            if len(rows) < 1000:
                break
            after = rows[-1][1]
        assert count == len(texts)

    run.list_all = min(timed(list_all) for _ in range(3))
    for memory_id in rng.choices(memory_ids, k=VERSION_SAMPLES):
        run.by_memory.append(timed(functools.partial(store.versions, "memory_id=?", (memory_id,), None, 100)))
    for _ in range(10):
        for actor in ACTORS:
            run.by_actor_first.append(
                timed(
                    functools.partial(store.versions, "actor_type=? AND actor_id=?", (actor.type, actor.id), None, 100)
                )
            )

    def by_actor_all() -> int:
        seen, before = 0, None
        while True:
            rows = store.versions("actor_type=? AND actor_id=?", (ACTORS[0].type, ACTORS[0].id), before, 100)
            seen += len(rows)
            if len(rows) < 100:
                return seen
            before = rows[-1][0]

    run.by_actor_count = by_actor_all()
    run.by_actor_all = min(timed(by_actor_all) for _ in range(3))
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.db.close()
    run.disk = du(base)
    run.extra["files"] = du(base / "notes")
    run.extra["sqlite"] = run.disk - du(base / "notes")
    return run


# -- baseline (b): git add + git commit per write -----------------------------------------------------


def run_git_cli(root: Path, layout: str, texts: list[str]) -> Run:
    run = Run()
    path_of = LAYOUTS[layout][1]
    repo = root / f"gitcli-{layout}"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for key, value in (("user.name", "bench"), ("user.email", "bench@localhost"), ("commit.gpgsign", "false")):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    for i, text in enumerate(texts):
        rel = path_of(i)[1:]
        actor = ACTORS[i % len(ACTORS)]
        start = time.perf_counter()
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        subprocess.run(["git", "-C", str(repo), "add", "--", rel], check=True)
        subprocess.run(
            [
                "git",
                "-C",
                str(repo),
                "commit",
                "-q",
                "-m",
                f"created /{rel}",
                f"--author={actor.id} <{actor.id}@bench>",
            ],
            check=True,
        )
        run.write.append(time.perf_counter() - start)
    return run


# -- report -------------------------------------------------------------------------------------------


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def mib(size: float | None) -> float | None:
    return None if size is None else size / 2**20


def cell(value: float | None, width: int = 12) -> str:
    if value is None:
        return "—".rjust(width)
    if value >= 100:
        return f"{value:,.0f}".rjust(width)
    if value >= 10:
        return f"{value:.1f}".rjust(width)
    return f"{value:.2f}".rjust(width) if value >= 0.1 else f"{value:.3f}".rjust(width)


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "—".rjust(9)
    value = a / b
    return (f"{value:,.0f}x" if value >= 100 else f"{value:.1f}x" if value >= 1 else f"{value:.2f}x").rjust(9)


def report(layout: str, n: int, sample: int, texts: list[str], gitmem: Run, files: Run, git_cli: Run | None) -> str:
    raw_current = sum(len(t.encode()) for i, t in enumerate(texts)) + sum(
        len(" Revised.") for _ in range(0, n, UPDATE_EVERY)
    )
    raw_all = raw_current + sum(len(texts[i].encode()) for i in range(0, n, UPDATE_EVERY))
    first = min(sample, n)
    rows: list[tuple[str, float | None, float | None, float | None]] = [
        (f"write p50, all {n:,} (ms)", ms(pct(gitmem.write, 50)), ms(pct(files.write, 50)), None),
        (f"write p99, all {n:,} (ms)", ms(pct(gitmem.write, 99)), ms(pct(files.write, 99)), None),
        (
            f"update p50, {len(gitmem.update):,} updates (ms)",
            ms(pct(gitmem.update, 50)),
            ms(pct(files.update, 50)),
            None,
        ),
        ("read by id with content p50 (ms)", ms(pct(gitmem.read, 50)), ms(pct(files.read, 50)), None),
        (f"list all {n:,}, 1,000 a page (ms)", ms(gitmem.list_all), ms(files.list_all), None),
        ("versions of one note p50 (ms)", ms(pct(gitmem.by_memory, 50)), ms(pct(files.by_memory, 50)), None),
        (
            "versions by actor, first 100 p50 (ms)",
            ms(pct(gitmem.by_actor_first, 50)),
            ms(pct(files.by_actor_first, 50)),
            None,
        ),
        (
            f"versions by actor, all {gitmem.by_actor_count:,} (ms)",
            ms(gitmem.by_actor_all),
            ms(files.by_actor_all),
            None,
        ),
        ("disk after maintenance (MiB)", mib(gitmem.disk), mib(files.disk), None),
        ("disk / raw bytes of current notes", (gitmem.disk or 0) / raw_current, (files.disk or 0) / raw_current, None),
    ]
    if first > 0:  # the first writes alone, beside git add + commit (none with --git-sample 0)
        rows[2:2] = [
            (
                f"write p50, first {first:,} (ms)",
                ms(pct(gitmem.write[:first], 50)),
                ms(pct(files.write[:first], 50)),
                ms(pct(git_cli.write, 50)) if git_cli else None,
            ),
            (
                f"write p99, first {first:,} (ms)",
                ms(pct(gitmem.write[:first], 99)),
                ms(pct(files.write[:first], 99)),
                ms(pct(git_cli.write, 99)) if git_cli else None,
            ),
        ]

    width = 40
    out = [
        f"layout: {LAYOUTS[layout][0]} ({LAYOUTS[layout][1](0)} ...), {n:,} notes",
        f"{'':{width}}{'gitmem':>12}{'files+SQLite':>14}{'gitmem/files':>13}{'git CLI*':>12}{'gitmem/git':>12}",
    ]
    for label, g, f, c in rows:
        out.append(f"{label:{width}}{cell(g)}{cell(f, 14)}{ratio(g, f):>13}{cell(c)}{ratio(g, c) if c else '—':>12}")
    e = gitmem.extra
    out += [
        "",
        f"  raw bytes: current notes {mib(raw_current):.1f} MiB, every version {mib(raw_all):.1f} MiB"
        f" ({e['commits']:,} commits; gitmem keeps every version's text, files+SQLite only the current one)",
        f"  gitmem at the end of the writes: background packing started {e['packers started']} times;"
        f" {e['packs at end of writes']} packs, {e['loose objects at end of writes']:,} loose objects",
        f"  gitmem as written (packers finished): objects {mib(e['disk as written']):.1f} MiB in"
        f" {e['packs as written']} packs + {e['loose as written']:,} loose ="
        f" {e['disk as written'] / e['objects after maintenance']:.1f}x the fully packed objects",
        f"  gitmem after packing.pack(full=True) ({e['full pack seconds']:.1f} s): {mib(gitmem.disk):.1f} MiB"
        f" (objects {mib(e['objects after maintenance']):.1f}, index {mib(e['index after maintenance']):.1f})",
        f"  the same objects all loose (git unpack-objects): {mib(e['loose equivalent']):.1f} MiB"
        f" = {e['loose equivalent'] / e['objects after maintenance']:.0f}x the packed objects",
        f"  files+SQLite: files {mib(files.extra['files']):.1f} MiB, SQLite {mib(files.extra['sqlite']):.1f} MiB",
    ]
    return "\n".join(out)


def environment(fsync: bool) -> str:
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()
    return (
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, Python {sys.version.split()[0]}, pygit2"
        f" {importlib.metadata.version('pygit2')} (libgit2 {pygit2.LIBGIT2_VERSION}), {git_version},"
        f" {os.cpu_count()} CPUs,"
        f" load average {load[0]:.1f}, fsync {'on' if fsync else 'off'} (gitmem and files+SQLite alike)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.engine", description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000, help="notes per layout (default 10,000)")
    parser.add_argument(
        "--git-sample", type=int, default=300, help="writes for the git add+commit baseline (default 300; it is slow)"
    )
    parser.add_argument(
        "--fsync",
        choices=["always", "never"],
        default="always",
        help="gitmem's GITMEM_FSYNC, applied to the files+SQLite baseline too (default always)",
    )
    parser.add_argument("--layouts", default="folders,flat", help="comma-separated: folders, flat")
    parser.add_argument("--dir", type=Path, help="where to work (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the stores afterwards")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    args = parser.parse_args(argv)
    fsync = args.fsync == "always"
    layouts = [name.strip() for name in args.layouts.split(",") if name.strip()]
    unknown = [name for name in layouts if name not in LAYOUTS]
    if unknown:
        parser.error(f"unknown layout(s): {', '.join(unknown)}")
    root = Path(tempfile.mkdtemp(prefix="gitmem-bench-", dir=args.dir))
    texts = bodies(args.notes, args.seed)
    results: dict[str, dict[str, object]] = {}
    print(f"bench.engine: {args.notes:,} notes a layout; {environment(fsync)}\n", flush=True)
    try:
        for layout in layouts:
            progress(f"{layout}: gitmem, {args.notes:,} writes")
            gitmem = run_gitmem(root, layout, texts, fsync, args.seed)
            progress(f"{layout}: files + SQLite")
            files = run_files(root, layout, texts, fsync, args.seed)
            git_cli = None
            if args.git_sample > 0:
                progress(f"{layout}: git add + git commit, {min(args.git_sample, args.notes)} writes")
                git_cli = run_git_cli(root, layout, texts[: args.git_sample])
            print(report(layout, args.notes, args.git_sample, texts, gitmem, files, git_cli) + "\n", flush=True)
            results[layout] = {
                name: run.__dict__ for name, run in (("gitmem", gitmem), ("files", files), ("git_cli", git_cli)) if run
            }
        if args.git_sample > 0:
            print(
                f"* git CLI: one `git add` and one `git commit` subprocess per write in a non-bare repository, on"
                f" the first {args.git_sample} writes only (it is slow); compare it with the"
                f" 'first {args.git_sample}' rows."
            )
        print("* Ratios are gitmem / baseline: above 1x gitmem is slower or bigger.")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, default=str, indent=1))
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
