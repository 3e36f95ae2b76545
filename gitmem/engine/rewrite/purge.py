"""Physically deleting what a rewrite left unreachable, and checking it is gone.

Under the writer lock (and the packer's), drop ``refs/notes/gitmem`` entries for commits no longer on
``main``, obsolete push spools, reflogs, then ``git repack -a -d`` and ``git prune --expire=now``;
rebuild and ``VACUUM`` the index so old paths do not linger in free pages; verify that every blob
only the old history used can no longer be read. ``gitmem/purge-pending.json`` names those blobs
from just before ``main`` is swapped until the purge is verified, so a crash in between makes the
next rewrite (or :func:`finish_pending_purge`) finish the deletion.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from gitmem.durable import DURABLE, fsync_dir
from gitmem.engine.rewrite.fast_import import REWRITE_REF
from gitmem.engine.rewrite.locked_git import checkpoint, delete_ref, flock, git_ok, rewrite_lock, writer_lock
from gitmem.engine.rewrite.report import RewriteReport
from gitmem.git import pushes, repository
from gitmem.git.repository import MAIN, NOTES_REF
from gitmem.git.signing import Signer

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

log = logging.getLogger(__name__)

PURGE_MARKER = "purge-pending.json"
STALE_TEMP_SECONDS = 60.0
PUSH_WAIT_SECONDS = 10.0


def objects_size(repo_path: Path) -> int:
    """Bytes of the repository's object store (what a purge reports before and after)."""
    total = 0
    for root, _dirs, files in os.walk(repo_path / "objects"):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def marker(repo_path: Path) -> Path:
    return repo_path / "gitmem" / PURGE_MARKER


def read_marker(repo_path: Path) -> set[str] | None:
    try:
        return set(json.loads(marker(repo_path).read_text())["blobs"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        return set()


def write_marker(repo_path: Path, blobs: Iterable[str]) -> None:
    path = marker(repo_path)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:  # flushed whatever the home's durability: a crash must find it whole
        json.dump({"blobs": sorted(blobs)}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _on_main(repo_path: Path) -> set[str]:
    return set(git_ok(repo_path, "rev-list", MAIN).decode().split())


def _prune_notes(repo_path: Path, on_main: set[str], signer: Signer | None) -> None:
    """Keep ``refs/notes/gitmem`` entries only for commits on ``main`` (the rest became trailers), in a
    notes commit without parents, so old notes' history becomes unreachable too (flushed, as the ref is,
    whatever the home's durability)."""
    repo = repository.open_repository(repo_path, DURABLE)
    ref = repo.references.get(NOTES_REF)
    if ref is None:
        return
    notes = [(str(n.annotated_id), n.id) for n in repo.notes(NOTES_REF)]  # type: ignore[call-arg]  # the stub lacks notes(ref)
    kept = [(commit, blob) for commit, blob in notes if commit in on_main]
    old_notes_commit = repository.commit_at(repo, ref.target)
    if len(kept) == len(notes) and not old_notes_commit.parent_ids:
        return
    if not kept:
        git_ok(repo_path, "update-ref", "-d", NOTES_REF, str(ref.target))
        return
    builder = repo.TreeBuilder()
    for commit, blob in kept:
        builder.insert(commit, blob, pygit2.enums.FileMode.BLOB)
    sig = pygit2.Signature("gitmem", "gitmem@localhost", int(time.time()), 0)
    new = repository.commit(
        repo,
        tree=builder.write(),
        parent=None,
        author=sig,
        message="Notes of rewritten commits are trailers now\n",
        signer=signer,
    )
    if not repository.compare_and_swap(repo, repository.direct_target(ref), new, ref=NOTES_REF):
        log.warning("refs/notes/gitmem moved while it was being pruned; the next purge retries")


def _drop_obsolete_spools(repo_path: Path, on_main: set[str]) -> None:
    """A push spools its versions (paths included) in ``gitmem/pushes/`` until post-receive settles them.
    A spool of a push made on top of the old history is obsolete: if it landed, its versions are trailers
    now; if it did not, it never will (main is no longer what it was based on)."""
    for spool in pushes.spools(repo_path):
        if spool.new in on_main or spool.old in on_main or not on_main or set(spool.old) <= {"0"}:
            continue  # made on the current history (or on an empty store): post-receive settles it
        spool.path.unlink(missing_ok=True)


def _remove_stale_files(repo_path: Path) -> None:
    """Temporary files of crashed packers and importers, and fast-import's crash reports (which quote
    recent commands), and ``.keep`` files fast-import left behind when it died."""
    now = time.time()
    objects = repo_path / "objects"
    candidates = list((objects / "pack").glob("tmp_*")) + list((objects / "pack").glob(".tmp-*"))
    candidates += list(objects.glob("??/tmp_*"))
    candidates += [p for p in (objects / "pack").glob("pack-*.pack") if not p.with_suffix(".idx").exists()]
    for path in candidates:
        with contextlib.suppress(OSError):
            if now - path.lstat().st_mtime > STALE_TEMP_SECONDS:
                path.unlink()
    for path in repo_path.glob("fast_import_crash_*"):
        with contextlib.suppress(OSError):
            path.unlink()
    for keep in (objects / "pack").glob("pack-*.keep"):
        with contextlib.suppress(OSError):
            if keep.read_bytes().startswith(b"fast-import"):
                keep.unlink()


def _wait_for_pushes(repo_path: Path) -> None:
    """A push moves its objects out of quarantine just before it updates the ref; pruning in between
    would delete them. Wait for pushes in flight to finish."""
    deadline = time.monotonic() + PUSH_WAIT_SECONDS
    # receive-pack's quarantine: "incoming-*" in older Git, "tmp_objdir-incoming-*" since 2.x.
    while any((repo_path / "objects").glob("*incoming-*")) and time.monotonic() < deadline:
        time.sleep(0.05)


def _remove_superseded_packs(repo_path: Path) -> None:
    pack_dir = repo_path / "objects" / "pack"
    for path in pack_dir.glob("pack-*"):
        if (
            path.suffix in (".idx", ".rev", ".bitmap", ".mtimes", ".promisor")
            and not path.with_suffix(".pack").exists()
        ):
            with contextlib.suppress(OSError):
                path.unlink()
    kept = [p.name for p in pack_dir.glob("pack-*.keep")]
    if kept:
        log.warning("%s: packs marked .keep survive the purge: %s", repo_path.name, kept)


def purge_locked(repo_path: Path, signer: Signer | None = None) -> None:
    """Physically delete every object no ref reaches. The caller holds the writer lock, so no gitmem
    writer is between writing an object and pointing ``main`` at it."""
    with flock(repo_path / "gitmem" / "pack.lock", timeout=300, what="packing"):
        delete_ref(repo_path, REWRITE_REF)
        on_main = _on_main(repo_path)
        _prune_notes(repo_path, on_main, signer)
        _drop_obsolete_spools(repo_path, on_main)
        git_ok(repo_path, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
        _remove_stale_files(repo_path)
        _wait_for_pushes(repo_path)
        git_ok(repo_path, "repack", "-a", "-d", "-q")
        checkpoint("after-repack")
        git_ok(repo_path, "prune", "--expire=now")
        _remove_superseded_packs(repo_path)
        checkpoint("after-prune")


def _existing(repo_path: Path, oids: Iterable[str]) -> set[str]:
    """Which of ``oids`` can still be read (``git cat-file --batch-check``, i.e. ``cat-file -e``)."""
    oids = sorted(oids)
    if not oids:
        return set()
    out = git_ok(repo_path, "cat-file", "--batch-check", input=("\n".join(oids) + "\n").encode())
    return {line.split()[0] for line in out.decode().splitlines() if line and not line.endswith(" missing")}


def _reachable_blobs(repo_path: Path) -> set[str]:
    out = git_ok(repo_path, "rev-list", "--objects", "--all")
    return {line.split()[0] for line in out.decode().splitlines()}


def verify(repo_path: Path, candidates: set[str], report: RewriteReport) -> None:
    """Report each blob that should be gone: purged, still used by a kept version, or readable (an error)."""
    readable = _existing(repo_path, candidates)
    if readable:
        still_used = _reachable_blobs(repo_path) & readable
        report.blobs_shared += sorted(still_used)
        report.blobs_unpurged += sorted(readable - still_used)
    report.blobs_purged += sorted(candidates - readable)
    if report.blobs_unpurged:
        log.error(
            "%s: %d dropped blobs can still be read: %s",
            repo_path.name,
            len(report.blobs_unpurged),
            report.blobs_unpurged[:10],
        )


def scrub_index(store: MemoryStore) -> None:
    """Bring the index to the new history (a rebuild) and leave no old path in its free pages."""
    if store.index.dialect == "postgresql":
        store.index.catch_up()
        store.index.db.compact()  # rewrites the tables: no dead row keeps the old text
        return
    db = store.index.db
    db.execute("PRAGMA secure_delete=ON")
    store.index.catch_up()
    try:
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except Exception as exc:  # sqlite3.OperationalError: another process holds it; the data is gone anyway
        log.warning("could not compact the index of %s: %s", store.id, exc)


def finish_purge_locked(store: MemoryStore, report: RewriteReport) -> RewriteReport:
    """Finish the purge of a rewrite that crashed after its swap; the caller holds the rewrite lock."""
    pending = read_marker(store.path)
    if pending is None:
        return report
    with writer_lock(store):
        purge_locked(store.path, store.signer)
    scrub_index(store)
    verify(store.path, pending, report)
    marker(store.path).unlink(missing_ok=True)
    return report


def finish_pending_purge(store: MemoryStore, *, lock_timeout: float = 60.0) -> RewriteReport:
    """Finish the purge of a rewrite that crashed after its swap (no-op when none is pending)."""
    with rewrite_lock(store.path, lock_timeout):
        return finish_purge_locked(store, RewriteReport(store.id))


def purge(store: MemoryStore, *, lock_timeout: float = 60.0) -> RewriteReport:
    """Physically delete whatever is unreachable in a store, now."""
    with rewrite_lock(store.path, lock_timeout):
        report = RewriteReport(store.id, bytes_before=objects_size(store.path))
        if read_marker(store.path) is None:
            write_marker(store.path, [])
        finish_purge_locked(store, report)
        report.bytes_after = objects_size(store.path)
        return report
