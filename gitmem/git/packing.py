"""Keeping a store's objects near their packed size while it is written, and the packer itself.

A write leaves new objects behind (loose files today; small packs once writes are batched). Each
commit writes a new tree for the folder it touches, as large as that folder: in a folder of 10,000
notes a loose tree is ~250 KB, so counting writes says little about disk. The policy, per store:

* **While written:** after a write, :func:`after_write` looks at the bytes written since the last
  pack run (loose objects, or the small packs a batched writer leaves), the loose objects' count and
  the number of packs, but only every few writes (it predicts from the bytes per write when the limit
  will be near). Past :data:`UNPACKED_BYTES_LIMIT`, :data:`LOOSE_OBJECTS_LIMIT` or :data:`MAX_PACKS`
  it starts a background ``geometric`` pack: loose objects and small packs rolled up into one so
  pack sizes grow geometrically (few packs, and little rewritten each time; :mod:`gitmem.git.roll_up`).
* **When quiet:** once ``main`` has not moved for :data:`QUIET_SECONDS` and enough was written since
  the last one, a ``full`` pack puts everything into one pack and searches deltas again, so
  successive versions of a big tree, each stored whole at the head of its small pack, become deltas of
  each other (a tree that differs by one entry is a delta of a few dozen bytes).

The packer is a thread of the writing process that runs git (``pack-objects`` to roll up, ``repack``
for a full pack) and waits for it: git does the work in a process of its own, so a busy server is
not slowed by it, and no Python process has to start for it (starting one cost about as much CPU as
30 writes). One packer per store at a time (``gitmem/pack.lock``, handed to git so that it stays
held if the writing process dies); history rewriting takes the same lock.

Safety. A roll-up, like git's ``repack``, only deletes a loose object or an old pack once what it
holds is in a new pack, so a packer never takes away an object a writer relies on; a writer that
loses the race for an ``objects/xx`` folder retries (see the store's write). Unreachable objects (a
write that lost its compare-and-swap, a batch cut short by a crash) go to a cruft pack at the next
full pack and are deleted only after :data:`UNREACHABLE_GRACE` (a writer may be about to reference
them); purging on purpose is the history rewriter's job. A packer that fails (a full disk) removes
its half-written ``tmp_pack_*`` files, and a pack that a killed writer left without its index is
indexed before git lists it (``pack_leftovers``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gitmem import metrics
from gitmem.git import pack_leftovers as leftovers
from gitmem.git.roll_up import roll_up

log = logging.getLogger(__name__)

PackMode = Literal["geometric", "full"]
MODES: tuple[PackMode, ...] = ("geometric", "full")

# Objects written since the last pack run (loose, or in batch packs). Each batch pack holds whole copies
# of the trees it changed, so a write into a 10,000-note folder adds ~250 KB: rolled up every megabyte,
# such a store ran a background repack every fourth write and its writes took twice as long
# (python -m bench.flat: 2.3x the 100-note folder's p50 at 1 MB, 1.3-1.5x at 4 MB).
UNPACKED_BYTES_LIMIT = 4 << 20
LOOSE_OBJECTS_LIMIT = 256
MAX_PACKS = 12  # geometric packs stay few (log2 of the store's size); many small ones mean batched writes
NEW_PACKS_BEFORE_ROLL_UP = 4
MAX_WRITES_BETWEEN_LOOKS = 32
WRITES_WHILE_PACKING = 4
QUIET_SECONDS = 2.0
# A quiet store is consolidated again once it grew this much since the last consolidation (a fraction
# of its size then, and at least some bytes): a lone write now and then must not repack everything.
CONSOLIDATE_GROWTH = 0.10
CONSOLIDATE_MIN_BYTES = 1 << 20
# Git's default delta chain depth (50) stores every 50th version of a big tree whole: 200 whole copies
# of a 10,000-entry folder over 10,000 writes. Longer chains keep a flat store near a nested one.
DELTA_DEPTH = 1000
UNREACHABLE_GRACE = "2.weeks.ago"
PACK_LOCK = "pack.lock"


# -- the packer -------------------------------------------------------------------------------------


def full_repack_args() -> list[str]:
    """``git`` arguments for a full pack. Bitmaps are neither written nor used to copy a pack
    verbatim: verbatim reuse would keep whole trees whole instead of finding deltas for them. It
    searches every delta again (``-f``): git never compares two objects it finds whole in the same
    pack, so the commits a roll-up stored whole side by side stayed whole (a quarter more bytes for a
    store of small notes)."""
    return [
        "-c",
        "pack.allowPackReuse=false",
        "-c",
        "repack.writeBitmaps=false",
        "repack",
        "-d",
        "-q",
        f"--depth={DELTA_DEPTH}",
        "-f",
        "--cruft",
        f"--cruft-expiration={UNREACHABLE_GRACE}",
    ]


def _full_repack(repo_path: Path, lock: int) -> None:
    proc = subprocess.run(["git", "-C", str(repo_path), *full_repack_args()], capture_output=True, pass_fds=(lock,))  # noqa: S603, S607  git from PATH, an argument list (no shell)
    if proc.returncode != 0:
        log.warning("git repack failed for %s: %s", repo_path.name, proc.stderr.decode(errors="replace").strip())
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)


@contextlib.contextmanager
def _pack_lock(repo_path: Path) -> Iterator[int | None]:
    """``gitmem/pack.lock``'s descriptor, locked, if the lock was free; else ``None``."""
    fd = os.open(repo_path / "gitmem" / PACK_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)


def pack(repo_path: Path, mode: PackMode = "geometric", *, fsync: bool = True) -> bool:
    """Pack the store's objects now (``fsync``: the roll-up flushes its new pack's name before it
    deletes what it replaced). Returns False if another packer holds the lock (it does the work).

    Raises :class:`subprocess.CalledProcessError` if git fails (after removing its temporary files);
    the store is then as it was."""
    with _pack_lock(repo_path) as lock:
        if lock is None:
            return False
        pack_dir = repo_path / "objects" / "pack"
        before = leftovers.temporary_packs(pack_dir)
        leftovers.index_lone_packs(repo_path)
        kind = "roll_up" if mode == "geometric" else "full"
        packs_before, started = _packs(pack_dir), time.perf_counter()
        # git holds the lock too (an flock lasts while any copy of its descriptor is open): if this
        # process dies, no other packer starts until this git has finished deleting what it replaced.
        try:
            if mode == "geometric":
                roll_up(repo_path, depth=DELTA_DEPTH, fsync=fsync, lock_fd=lock)
            else:
                _full_repack(repo_path, lock)
        except subprocess.CalledProcessError:
            leftovers.remove_temporary_packs(pack_dir, before)
            raise
        metrics.REPACKS.labels(kind).inc()
        metrics.REPACK_SECONDS.labels(kind).observe(time.perf_counter() - started)
        metrics.REPACK_REMOVED_PACKS.labels(kind).inc(len(packs_before - _packs(pack_dir)))
        size = objects_bytes(repo_path)
        _set_size_mark(repo_path, AFTER_ANY_PACK, size)
        if mode == "full":
            _set_size_mark(repo_path, AFTER_FULL_PACK, size)
        return True


def _packs(pack_dir: Path) -> set[str]:
    try:
        return {name for name in os.listdir(pack_dir) if name.endswith(".pack")}
    except FileNotFoundError:
        return set()


# -- what is on disk --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Loose:
    count: int
    bytes: int


def loose_objects(repo_path: Path) -> Loose:
    """Loose objects and their bytes on disk."""
    return on_disk(repo_path).loose


@dataclass(frozen=True)
class OnDisk:
    """A store's objects as one look at ``objects/`` found them."""

    loose: Loose
    bytes: int  # every file under objects/, loose or packed
    packs: int


def on_disk(repo_path: Path) -> OnDisk:
    """One listing of ``objects/`` and its folders (``os.scandir``: no path joins, one ``lstat`` a file,
    cheap enough to run every few writes)."""
    count = loose_bytes = total = packs = 0
    try:
        with os.scandir(repo_path / "objects") as listing:
            folders = list(listing)
    except FileNotFoundError:
        return OnDisk(Loose(0, 0), 0, 0)
    for folder in folders:
        try:
            if not folder.is_dir(follow_symlinks=False):
                total += folder.stat(follow_symlinks=False).st_blocks * 512
                continue
            fan_out = len(folder.name) == 2
            with os.scandir(folder.path) as entries:  # closed however the walk ends (a file gone mid-way)
                for entry in entries:
                    size = entry.stat(follow_symlinks=False).st_blocks * 512
                    total += size
                    if fan_out:
                        count += 1
                        loose_bytes += size
                    elif entry.name.endswith(".pack"):
                        packs += 1
        except (FileNotFoundError, NotADirectoryError):
            pass  # packed and pruned, or repacked, while we looked
    return OnDisk(Loose(count, loose_bytes), total, packs)


def objects_bytes(repo_path: Path) -> int:
    return on_disk(repo_path).bytes


# The objects' size on disk right after the last pack run of each kind, in ``gitmem/packed-size`` and
# ``gitmem/consolidated-size``: shared by every process that writes the store.
AFTER_ANY_PACK = "packed-size"
AFTER_FULL_PACK = "consolidated-size"


def _size_mark(repo_path: Path, name: str) -> int | None:
    try:
        return int((repo_path / "gitmem" / name).read_text())
    except (FileNotFoundError, ValueError):
        return None


def _set_size_mark(repo_path: Path, name: str, size: int) -> None:
    temp = repo_path / "gitmem" / f".{name}.{os.getpid()}"
    temp.write_text(str(size))
    os.replace(temp, repo_path / "gitmem" / name)


def written_since_pack(repo_path: Path, seen: OnDisk | None = None) -> int:
    """Bytes of objects written since the last pack run: loose objects, or the small packs that a
    batched writer leaves (each holding whole copies of the trees it changed)."""
    total = (seen or on_disk(repo_path)).bytes
    return max(0, total - (_size_mark(repo_path, AFTER_ANY_PACK) or 0))


def worth_consolidating(repo_path: Path) -> bool:
    seen = on_disk(repo_path)
    if seen.packs <= 1 and seen.loose.count == 0:
        return False
    last = _size_mark(repo_path, AFTER_FULL_PACK)
    grown = seen.bytes - (last or 0)
    return grown >= max(CONSOLIDATE_MIN_BYTES, CONSOLIDATE_GROWTH * (last or 0))


# -- packers in the background ------------------------------------------------------------------


_packers: dict[str, threading.Thread] = {}
_packers_lock = threading.Lock()
# Packers running at once in a process, whatever the number of stores written: each is a thread and a
# git process with its pipes, and 10,000 stores written in a few minutes ran hundreds at once (800 open
# files under a limit of 1,024; issue 27). A roll-up skipped for it waits for the next write or the
# store's quiet spell, which consolidates it anyway.
MAX_BACKGROUND_PACKERS = 4


def pack_in_background(
    repo_path: Path, mode: PackMode = "geometric", *, fsync: bool = True, always: bool = False
) -> None:
    """Pack in a thread that runs :func:`pack` without blocking the caller: a geometric roll-up of new
    objects, or a ``full`` pack with deltas found again. Nothing if this process already runs a packer
    for the store, or :data:`MAX_BACKGROUND_PACKERS` for others (unless ``always``: the one quiet
    watcher's consolidation, at most one more)."""
    key = str(repo_path)
    with _packers_lock:
        running = _packers.get(key)
        if running is not None and running.is_alive():
            return
        for done in [k for k, t in _packers.items() if not t.is_alive()]:
            del _packers[done]  # one entry a store ever packed, otherwise
        if len(_packers) >= MAX_BACKGROUND_PACKERS and not always:
            return
        thread = threading.Thread(
            target=_pack_quietly, args=(repo_path, mode, fsync), name=f"pack {repo_path.name}", daemon=True
        )
        thread.start()
        _packers[key] = thread


def _pack_quietly(repo_path: Path, mode: PackMode, fsync: bool) -> None:
    try:
        pack(repo_path, mode, fsync=fsync)
    except (OSError, subprocess.CalledProcessError):  # logged by the packer; the next write asks again
        log.debug("background pack of %s failed", repo_path.name, exc_info=True)


def wait_for_background_packer(repo_path: Path) -> None:
    """Wait for this process's background packer of the store, if one runs."""
    with _packers_lock:
        thread = _packers.get(str(repo_path))
    if thread is not None:
        thread.join()


# -- the policy -------------------------------------------------------------------------------------


class _StorePolicy:
    """One store's packing state in this process (a store is opened once per thread: this is shared)."""

    def __init__(self, repo_path: Path) -> None:
        self.repo_path = repo_path
        self.lock = threading.Lock()
        self.writes_until_look = 1
        self.writes_since_pack = 0
        self.packs_when_asked = 0  # packs when a pack was last asked for because there were many

    def after_write(self, max_writes: int) -> bool:
        """Count a write; True if a look at the disk is due now."""
        self.writes_since_pack += 1
        self.writes_until_look -= 1
        return self.writes_until_look <= 0 or self.writes_since_pack >= max_writes

    def due(self, max_writes: int) -> bool:
        """Whether to pack now; if not, when to look again (predicted from the bytes per write so far)."""
        seen = on_disk(self.repo_path)
        loose, written, packs = seen.loose, written_since_pack(self.repo_path, seen), seen.packs
        if packs <= MAX_PACKS:
            self.packs_when_asked = 0
        # Geometric packs may legitimately stay above MAX_PACKS: then roll up only once more came.
        many_packs = packs > max(MAX_PACKS, self.packs_when_asked + NEW_PACKS_BEFORE_ROLL_UP)
        if (
            self.writes_since_pack >= max_writes
            or written >= UNPACKED_BYTES_LIMIT
            or loose.count >= LOOSE_OBJECTS_LIMIT
            or many_packs
        ):
            if many_packs:
                self.packs_when_asked = packs
            self.writes_since_pack = 0
            self.writes_until_look = WRITES_WHILE_PACKING  # a packer takes a while: no look each write
            return True
        writes = max(1, self.writes_since_pack)
        room = min(
            (UNPACKED_BYTES_LIMIT - written) / max(written / writes, 1.0),
            (LOOSE_OBJECTS_LIMIT - loose.count) / max(loose.count / writes, 1.0),
        )
        self.writes_until_look = int(max(1, min(MAX_WRITES_BETWEEN_LOOKS, room / 2)))
        return False


class _QuietWatcher:
    """One thread a process: consolidates a store once it has been quiet for :data:`QUIET_SECONDS`,
    then runs what the writer asked to run then (the index checkpoints its write-ahead log)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.last_write: dict[str, float] = {}  # store path -> monotonic time of our last write to it
        self.when_quiet: dict[str, Callable[[], None]] = {}
        self.fsync: dict[str, bool] = {}  # store path -> whether its packs are flushed
        self.thread: threading.Thread | None = None

    def wrote(self, repo_path: Path, when_quiet: Callable[[], None] | None = None, fsync: bool = True) -> None:
        with self.lock:
            key = str(repo_path)
            waited_for = key in self.last_write
            self.last_write[key] = time.monotonic()
            self.fsync[key] = fsync
            if when_quiet is not None:
                self.when_quiet[key] = when_quiet
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="gitmem quiet packer", daemon=True)
                self.thread.start()
            # A later time for a store already waited for never makes the wait shorter (the thread
            # looks again when the old time comes): waking it on every write only costs CPU.
            if not waited_for:
                self.lock.notify()

    def _next_quiet(self) -> Path:
        """Wait until some store we wrote to has been quiet for long enough."""
        with self.lock:
            while True:
                if not self.last_write:
                    self.lock.wait()
                    continue
                key, when = min(self.last_write.items(), key=lambda item: item[1])
                wait = when + QUIET_SECONDS - time.monotonic()
                if wait <= 0:
                    del self.last_write[key]
                    return Path(key)
                self.lock.wait(wait)

    def _run(self) -> None:
        while True:
            repo_path = self._next_quiet()
            with self.lock:
                fsync = self.fsync.pop(str(repo_path), True)
            try:
                ref_age = time.time() - (repo_path / "refs" / "heads" / "main").stat().st_mtime
                if ref_age < QUIET_SECONDS:  # another process writes it: look again later
                    with self.lock:
                        self.last_write.setdefault(str(repo_path), time.monotonic() - ref_age)
                        self.fsync.setdefault(str(repo_path), fsync)
                    continue
                self._call_when_quiet(repo_path)  # first: a full pack of a big store takes a while
                wait_for_background_packer(repo_path)
                if worth_consolidating(repo_path):
                    pack_in_background(repo_path, "full", fsync=fsync, always=True)
                    wait_for_background_packer(repo_path)
            except OSError:  # the store went away, or no process could be started: try after the next write
                log.debug("could not consolidate %s", repo_path.name, exc_info=True)

    def _call_when_quiet(self, repo_path: Path) -> None:
        with self.lock:
            quiet = self.when_quiet.pop(str(repo_path), None)
        if quiet is not None:
            try:
                quiet()
            except Exception:  # housekeeping: the next quiet spell tries again
                log.debug("after %s went quiet", repo_path.name, exc_info=True)


_policies: dict[str, _StorePolicy] = {}
_policies_lock = threading.Lock()
_watcher = _QuietWatcher()


def after_write(
    repo_path: Path, *, max_writes: int, when_quiet: Callable[[], None] | None = None, fsync: bool = True
) -> None:
    """Called after each successful write to a store: packs in the background when it is due (and at
    least every ``max_writes`` writes of this process), consolidates when the store goes quiet and
    then calls ``when_quiet``. ``fsync``: the store's packs are flushed (its home's durability)."""
    key = str(repo_path)
    with _policies_lock:
        policy = _policies.get(key)
        if policy is None:
            policy = _policies[key] = _StorePolicy(repo_path)
    # The look at the disk (a walk of the objects) holds this store's lock only: other stores' writers
    # never wait for it.
    with policy.lock:
        look = policy.after_write(max_writes)
        due = look and policy.due(max_writes)
    if due:
        pack_in_background(repo_path, fsync=fsync)
    _watcher.wrote(repo_path, when_quiet, fsync)
