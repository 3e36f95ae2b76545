"""The packer: a store's objects packed now or in the background, and what is on disk.

A write leaves new objects behind (loose files, or the small pack a batch of writes makes). When to
pack is the policy's (:mod:`gitmem.git.pack.policy`): a ``geometric`` roll-up of loose objects and small
packs while the store is written (:mod:`gitmem.git.pack.roll_up`), a ``full`` pack with deltas searched
again once it goes quiet. This module runs either one, and measures ``objects/`` for the policy.

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
indexed before git lists it (:mod:`gitmem.git.pack.leftovers`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gitmem import metrics
from gitmem.git.pack import leftovers, small
from gitmem.git.pack.roll_up import roll_up

log = logging.getLogger(__name__)

PackMode = Literal["geometric", "full"]
MODES: tuple[PackMode, ...] = ("geometric", "full")

# A quiet store is consolidated again once it grew this much since the last consolidation (a fraction
# of its size then, and at least some bytes): a lone write now and then must not repack everything.
CONSOLIDATE_GROWTH = 0.10
CONSOLIDATE_MIN_BYTES = 1 << 20
# A store whose objects take less than this (a few small notes) is consolidated whenever it goes quiet in
# more than one pack, and keeps no size marks: each pack (and mark) is a file of at least a 4 KiB block,
# so a store of two notes written apart took 84 KiB, most of it blocks of packs (issue 27: a small store at
# rest costs what Git costs). Its one pack is made in this process (gitmem.git.pack.small).
SMALL_STORE_BYTES = 32 << 10
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
        "-n",  # no update-server-info: dumb HTTP is not served, and its info/ files cost 16 KiB a store
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
            elif not (objects_bytes(repo_path) < SMALL_STORE_BYTES and small.consolidate(repo_path, fsync=fsync)):
                _full_repack(repo_path, lock)
        except subprocess.CalledProcessError:
            leftovers.remove_temporary_packs(pack_dir, before)
            raise
        metrics.REPACKS.labels(kind).inc()
        metrics.REPACK_SECONDS.labels(kind).observe(time.perf_counter() - started)
        metrics.REPACK_REMOVED_PACKS.labels(kind).inc(len(packs_before - _packs(pack_dir)))
        size = objects_bytes(repo_path)
        if size < SMALL_STORE_BYTES:  # consolidated on every quiet spell: no marks needed (see above)
            for name in (AFTER_ANY_PACK, AFTER_FULL_PACK):
                (repo_path / "gitmem" / name).unlink(missing_ok=True)
            return True
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
    if seen.bytes < SMALL_STORE_BYTES:
        return True
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
