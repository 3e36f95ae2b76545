"""The Git layer (plumbing): bare repositories, trees built from blobs, and the branch update as a
compare-and-swap under Git's own ``.lock`` file. No working tree, no index file, no ``git`` on the
write path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib.resources
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import cast

import pygit2

from gitmem.durable import DURABLE, Durability, flush_file_system, fsync_dir
from gitmem.errors import StoreBusy
from gitmem.git.signing import Signer, write_commit

log = logging.getLogger(__name__)

MAIN = "refs/heads/main"
NOTES_REF = "refs/notes/gitmem"
COMMITTER = pygit2.Signature("gitmem", "gitmem@localhost", 0, 0)
# The rewriter's scratch ref is nobody's business; the rewrite log beside it (refs/gitmem/rewrites) is
# everyone's (Git hides a ref that is the value or lies below it: refs/gitmem/rewrites is neither).
HIDDEN_REFS = "refs/gitmem/rewrite"
# A ref lock is held for the time it takes to write 41 bytes; one this old was left by a crash.
STALE_REF_LOCK_SECONDS = 5.0
# Installed beside the package (hooks/ in the repository, mapped to gitmem/hooks: pyproject.toml).
HOOKS_DIR = Path(str(importlib.resources.files("gitmem.hooks")))

# libgit2 caches no tree over 4 KiB: the tree of a 10,000-note folder (~400 KiB) was read, inflated and
# parsed again by each write and by the index after it (the index took a minute for a 10,000-note
# commit). A cached parsed tree is shared by every reader of the repository object.
BIG_TREE_CACHE_LIMIT = 8 << 20
pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.TREE, BIG_TREE_CACHE_LIMIT)


# libgit2 writes few objects here (review marks, push records, a rotation's blobs, the rewrite log), as
# loose objects. Its fsync switch (GIT_OPT_ENABLE_FSYNC_GITDIR) is the process's, and a process may hold
# homes of different durability, so it stays off (libgit2's default): each repository object a home
# writes with is opened by open_repository, whose loose-object backend fsyncs (the file and its folder)
# as that home's durability says. What libgit2 writes outside the object database (a new store's HEAD
# and config) init_bare flushes itself.


def open_repository(path: Path | str, durability: Durability = DURABLE) -> pygit2.Repository:
    """The repository at ``path``, its loose objects written as ``durability`` says: on disk before
    libgit2 returns (``always``, ``files``), or when the OS decides (``never``). Packs are gitmem's own
    (:mod:`gitmem.git.pack`), flushed by their writers."""
    repo = pygit2.Repository(str(path))
    objects = str(Path(repo.path) / "objects")
    odb = pygit2.Odb()
    # libgit2's own order: loose objects (priority 1) asked after packs (2); new objects go loose.
    odb.add_backend(pygit2.OdbBackendPack(objects), 2)
    odb.add_backend(pygit2.OdbBackendLoose(objects, -1, durability.flushes), 1)  # -1: libgit2's compression
    repo.set_odb(odb)
    return repo


def init_bare(path: Path, durability: Durability = DURABLE) -> pygit2.Repository:
    """A new bare store at ``path``; with ``durability`` flushing, its files and folder are on disk
    (and its name in its parent folder) before it returns."""
    repo = pygit2.init_repository(str(path), bare=True, initial_head="main")
    config = repo.config
    config["http.getanyfile"] = False
    config["receive.denyNonFastForwards"] = True
    config["receive.denyDeletes"] = True
    config["receive.fsckObjects"] = True
    config["core.logAllRefUpdates"] = False
    config["gc.auto"] = 0  # packing is ours (see pack_in_background), never a surprise gc
    config["uploadpack.allowAnySHA1InWant"] = False
    config["uploadpack.allowReachableSHA1InWant"] = False
    config["uploadpack.allowTipSHA1InWant"] = False
    config["uploadpack.hideRefs"] = HIDDEN_REFS
    if HOOKS_DIR.is_dir():
        config["core.hooksPath"] = str(HOOKS_DIR)
    (path / "gitmem").mkdir(exist_ok=True)
    _trim_skeleton(path)
    if durability.flushes:
        _flush_made(path, durability)
    return open_repository(path, durability)


def _flush_made(path: Path, durability: Durability) -> None:
    """What :func:`init_bare` made, on disk: its files and folders, and its name in the parent."""
    if durability.whole_file_system:
        flush_file_system(path)  # one syncfs: contents and folder entries alike
        return
    made = sorted(path.rglob("*"))
    for file in (p for p in made if p.is_file()):
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())
    for folder in [*(p for p in made if p.is_dir()), path, path.parent]:
        fsync_dir(folder)


# What libgit2's template leaves that a bare store never reads: gitweb's description, the sample hooks
# (ours are core.hooksPath), a work tree's excludes, and empty folders Git makes again when it needs
# them. A folder or file is a 4 KiB block each: 28 KiB of a small store's 112 (issue 27).
_UNUSED = ("description", "hooks/README.sample", "hooks", "info/exclude", "info", "refs/tags", "objects/info")


def _trim_skeleton(path: Path) -> None:
    for name in _UNUSED:
        target = path / name
        with contextlib.suppress(FileNotFoundError, OSError):
            target.rmdir() if target.is_dir() else target.unlink()


def read_tip(repo: pygit2.Repository) -> pygit2.Oid | None:
    ref = repo.references.get(MAIN)
    return None if ref is None else direct_target(ref)


def direct_target(ref: pygit2.Reference) -> pygit2.Oid:
    """The object a direct reference points at (gitmem never writes symbolic refs)."""
    return cast(pygit2.Oid, ref.target)


# Looks for an object that must exist (a ref or an index row names it) before it counts as missing.
LOOKUP_ATTEMPTS = 5


def object_at(repo: pygit2.Repository, oid: pygit2.Oid | str) -> pygit2.Object:
    """``repo[oid]`` for an object that exists. libgit2 lists ``objects/pack`` again when a lookup
    misses, but a listing made while another process's ``git repack -d`` renames its new pack in and
    deletes the old ones can see neither (the folder changes under ``readdir``): then the object is
    looked up again, a few milliseconds later, before it counts as missing (a ``KeyError``)."""
    for attempt in range(LOOKUP_ATTEMPTS - 1):
        try:
            return repo[oid]
        except KeyError:
            time.sleep(0.002 * 2**attempt)
    return repo[oid]


# pygit2 types every ``repo[oid]`` as a plain Object; these say which kind the caller knows it holds.
def blob_at(repo: pygit2.Repository, oid: pygit2.Oid | str) -> pygit2.Blob:
    return cast(pygit2.Blob, object_at(repo, oid))


def tree_at(repo: pygit2.Repository, oid: pygit2.Oid | str) -> pygit2.Tree:
    return cast(pygit2.Tree, object_at(repo, oid))


def commit_at(repo: pygit2.Repository, oid: pygit2.Oid | str) -> pygit2.Commit:
    return cast(pygit2.Commit, object_at(repo, oid))


def tree_with(
    repo: pygit2.Repository, base: pygit2.Tree | None, changes: Mapping[str, pygit2.Oid | None]
) -> pygit2.Oid:
    """Write the tree that is ``base`` with each tree path set to a blob (or removed, for ``None``).

    Empty folders disappear, as in Git. Only the trees along changed paths are rewritten.
    """
    here: dict[str, pygit2.Oid | None] = {}
    below: dict[str, dict[str, pygit2.Oid | None]] = {}
    for tree_path, blob in changes.items():
        head, sep, rest = tree_path.partition("/")
        if sep:
            below.setdefault(head, {})[rest] = blob
        else:
            here[head] = blob
    builder = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    # Removals, then folders, then blobs: a name may be both (a rename of /a to /a/b removes the blob
    # "a" and fills the folder "a"; /a/b to /a empties the folder "a" and then sets the blob "a").
    for name, blob in here.items():
        if blob is None and builder.get(name) is not None:
            builder.remove(name)
    for name, sub_changes in below.items():
        existing = builder.get(name)
        sub_base = tree_at(repo, existing.id) if existing is not None and existing.type_str == "tree" else None
        sub_oid = tree_with(repo, sub_base, sub_changes)
        if len(tree_at(repo, sub_oid)) == 0:
            if sub_base is not None:
                builder.remove(name)
        else:
            builder.insert(name, sub_oid, pygit2.enums.FileMode.TREE)
    for name, blob in here.items():
        if blob is not None:
            builder.insert(name, blob, pygit2.enums.FileMode.BLOB)
    return builder.write()


def commit(
    repo: pygit2.Repository,
    *,
    tree: pygit2.Oid,
    parent: pygit2.Oid | None,
    author: pygit2.Signature,
    message: str,
    signer: Signer | None = None,
) -> pygit2.Oid:
    """Write a commit object, signed by ``signer`` (:mod:`gitmem.git.signing`), without moving any ref."""
    committer = pygit2.Signature(COMMITTER.name, COMMITTER.email, author.time, 0)
    parents = [parent] if parent else []
    return write_commit(repo, signer, author=author, committer=committer, message=message, tree=tree, parents=parents)


def _ref_file(repo_path: Path, ref: str) -> Path:
    return repo_path / ref


def compare_and_swap(
    repo: pygit2.Repository,
    old: pygit2.Oid | None,
    new: pygit2.Oid,
    *,
    ref: str = MAIN,
    timeout: float = 10.0,
    before_swap: Callable[[Callable[[], None]], None] | None = None,
    flush_folder: bool = True,
    durability: Durability = DURABLE,
) -> bool:
    """Point ``ref`` at ``new`` only if it still points at ``old``, under Git's ``<ref>.lock``.

    Returns False if the ref moved (the caller re-reads and retries). Git's own writers (receive-pack)
    honour the same lock, so pushes and API writes never overwrite each other.

    ``before_swap``, if given, runs once the lock is held and the ref checked, before the swap (the
    write path writes its pack there: no pack is written for a swap that would fail). It is handed
    the function that flushes the lock file, and must call it, so that it can flush the lock file
    and its own files at once. If it raises, the ref is left as it was.

    With ``flush_folder=False`` the caller flushes the ref's folder after the swap (with its own);
    ``durability`` ``never`` flushes nothing.
    """
    repo_path = Path(repo.path)
    ref_path = _ref_file(repo_path, ref)
    lock_path = ref_path.with_name(ref_path.name + ".lock")
    fd = _take_ref_lock(lock_path, timeout)
    try:
        current = repo.references.get(ref)
        current_target = None if current is None else current.target
        if current_target != old:
            os.close(fd)
            os.unlink(lock_path)
            return False
        os.write(fd, f"{new}\n".encode())

        def flush() -> None:
            if durability.flushes:
                os.fsync(fd)

        if before_swap is not None:
            before_swap(flush)
        else:
            flush()
        os.close(fd)
        os.replace(lock_path, ref_path)
        if durability.flushes and flush_folder:
            fsync_dir(ref_path.parent)
        return True
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)
        raise


def _take_ref_lock(lock_path: Path, timeout: float) -> int:
    """Create ``lock_path`` (Git's ``<ref>.lock``), waiting up to ``timeout`` seconds for its holder;
    its descriptor, open for writing."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:  # the ref's folder is made on first use
            lock_path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            _recover_stale_lock(lock_path)
            if time.monotonic() > deadline:
                raise StoreBusy(f"the store is busy: {lock_path.name} is held") from None
            time.sleep(0.002)


def _recover_stale_lock(lock_path: Path) -> None:
    try:
        age = time.time() - lock_path.stat().st_mtime
    except FileNotFoundError:
        return
    if age > STALE_REF_LOCK_SECONDS:
        log.warning("removing stale ref lock %s (%.0f s old)", lock_path, age)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)


# How often a lock held by another process is tried again: from 0.2 ms, doubling to 2 ms. A batch of
# writes holds a store's writer lock for a few milliseconds; a wait that backed off to 50 ms between
# tries (as it did) let a second worker's writes wait behind many batches of the first (below).
FIRST_RETRY_SECONDS = 0.0002
LAST_RETRY_SECONDS = 0.002


@contextlib.contextmanager
def file_lock(path: Path, *, timeout: float, busy: str) -> Iterator[int]:
    """An advisory ``flock`` on ``path``, waited for up to ``timeout`` seconds (0: not at all), else
    :class:`StoreBusy` with ``busy``. The kernel releases it if the holder dies, so a crash cannot
    wedge a store. Yields the descriptor (a child process that inherits it keeps the lock held)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:  # its folder is made on first use
        path.parent.mkdir(exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        delay = FIRST_RETRY_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    raise StoreBusy(busy) from None
                time.sleep(delay)
                delay = min(delay * 2, LAST_RETRY_SECONDS)
        yield fd
    finally:
        os.close(fd)  # closing releases the flock


@contextlib.contextmanager
def writer_lock(repo_path: Path, *, timeout: float = 30.0, busy: str = "the store is busy; try again") -> Iterator[int]:
    """One gitmem writer at a time per store. The ref CAS stays the source of correctness.

    Writers take turns across processes: a writer waits for the lock holding ``write.line``, its place
    at the head of the line, and lets go of it once it has the lock. A flock is not fair, so without
    the line a worker whose next batch was ready as its last one ended took the lock again before a
    waiting worker's next try: with 8 clients on one store of `gitmem serve --workers 2`, a write's
    p99 was a second. In the line, the worker that just wrote waits for the one that was waiting.
    Yields the lock's descriptor; ``busy``: the :class:`StoreBusy` message after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    with contextlib.ExitStack() as held:
        with file_lock(repo_path / "gitmem" / "write.line", timeout=timeout, busy=busy):
            left = max(0.0, deadline - time.monotonic())
            fd = held.enter_context(file_lock(repo_path / "gitmem" / "write.lock", timeout=left, busy=busy))
        yield fd


def packers_held_off(repo_path: Path, *, timeout: float = 300.0) -> contextlib.AbstractContextManager[int]:
    """Wait for the store's packer and keep others off (``gitmem/pack.lock``): ``git fsck`` must not
    list packs while a ``repack -d`` deletes the ones it has just replaced."""
    return file_lock(repo_path / "gitmem" / "pack.lock", timeout=timeout, busy="a packer kept the store busy")


def git(repo_path: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run the real ``git`` on a store (maintenance and checks only, never the write path)."""
    return subprocess.run(["git", "-C", str(repo_path), *args], input=input, capture_output=True, check=False)  # noqa: S603, S607  git from PATH, an argument list (no shell)
