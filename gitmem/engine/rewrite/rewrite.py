"""History rewriting: the one mechanism behind retention, redaction and key rotation (docs/architecture.md).

``main``'s versions are read in order (:mod:`gitmem.engine.rewrite.history`), a plan says what becomes of each
(kept, dropped, blanked, re-encoded), and the kept ones are written onto a new root, one commit per
version with its trailers, author and times (:mod:`gitmem.engine.rewrite.fast_import`); both sides replay
versions by the one rule of :mod:`gitmem.git.replay`.

Safety, in order (each step a function below):

1. Under ``gitmem/rewrite.lock`` (one rewrite at a time per store), take a snapshot of the tip, plan,
   and build the new history without holding the writer lock (``git fast-import`` into a temporary
   ref, one pack, no loose-object storm). Check that it ends with exactly the notes the snapshot has.
2. Take the writer lock, replay the commits that landed since the snapshot on top of the new
   history, write the purge marker, and :func:`repository.compare_and_swap` ``main``.
3. Still under the writer lock, physically delete what is unreachable (:mod:`gitmem.engine.rewrite.purge`).
4. Rebuild the index (``catch_up`` sees a ``main`` that does not descend from what it indexed) and
   ``VACUUM`` it; verify that every blob only the old history used is unreadable, and report it.

A crash anywhere leaves the old history or the new one: before the swap only unreferenced objects
were written; after it, ``gitmem/purge-pending.json`` makes the next rewrite (or
:func:`gitmem.engine.rewrite.purge.finish_pending_purge`) finish the deletion.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version as _package_version
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from gitmem.clock import iso
from gitmem.durable import DURABLE
from gitmem.engine.rewrite.fast_import import REWRITE_REF, NewHistory, Progress, check_same_notes
from gitmem.engine.rewrite.history import Diverged, Entry, History
from gitmem.engine.rewrite.locked_git import checkpoint, delete_ref, rewrite_lock, writer_lock
from gitmem.engine.rewrite.purge import (
    finish_purge_locked,
    marker,
    objects_size,
    purge_locked,
    read_marker,
    scrub_index,
    verify,
    write_marker,
)
from gitmem.engine.rewrite.receipts import ReceiptSigner, entry_digest, make_receipt
from gitmem.engine.rewrite.report import RewriteReport, RewriteWhy
from gitmem.errors import RewriteFailed, StoreBusy
from gitmem.git import repository, rewrite_log
from gitmem.git.commits import actor_text
from gitmem.git.repository import read_tip

if TYPE_CHECKING:
    from gitmem.engine.store.store import MemoryStore

log = logging.getLogger(__name__)

MAX_SWAP_ATTEMPTS = 20
TOOL = "gitmem " + _package_version("gitmem")

# A plan sees every version (oldest first) and the ids of the notes that exist at the tip, and says
# what each becomes: the same Entry (kept as is), another Entry (blanked, or a new blob) or None (dropped).
Plan = Callable[[Sequence[Entry], frozenset[str]], list["Entry | None"]]
# Told, under the writer lock right after ``main`` is swapped and before the purge, what the rewrite
# erases: its report (the versions dropped and redacted) and the blobs it purges. The erasure ledger
# is written here (gitmem.engine.catalog.erasures); a failure is logged, and the erasure goes on.
Erased = Callable[[RewriteReport, frozenset[str]], None]


@dataclass
class _Planned:
    """What the plan made of the snapshot: the new history's versions and where each old blob went."""

    snapshot: pygit2.Oid | None
    history: History
    kept: list[Entry]
    kept_blobs: set[str]  # blobs the new history's trees use
    gone: set[str]  # blobs of old versions that were dropped or changed: to purge unless still used
    blob_map: dict[str, str]  # old blob -> its replacement (a re-encryption)


@contextlib.contextmanager
def _timed(report: RewriteReport, step: str) -> Iterator[None]:
    clock = time.monotonic()
    yield
    report.timings[step] = time.monotonic() - clock


def rewrite_history(
    store: MemoryStore,
    plan: Plan,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    lock_timeout: float = 60.0,
    landed: Callable[[Entry], Entry] | None = None,
    erased: Erased | None = None,
    notes_may_change: bool = False,
    why: RewriteWhy | None = None,
) -> RewriteReport:
    """Replay ``main`` through ``plan``, swap it in, purge what the old history alone held, and append
    the rewrite's entry, saying ``why``, to the rewrite log (:mod:`gitmem.git.rewrite_log`).

    Versions that land while the rewrite runs are replayed on top as they are, or through ``landed``
    (a key rotation re-encrypts them too). ``erased`` is told what goes (see :data:`Erased`).
    ``notes_may_change``: the new history may end with other notes than ``main`` has (a restore
    erasing again what a later history had erased, where the later versions are not in the backup)."""
    repo_path = store.path
    report = RewriteReport(store.id, dry_run=dry_run)
    with contextlib.nullcontext() if dry_run else rewrite_lock(repo_path, lock_timeout):
        # A rewrite's refs are flushed whatever the home's durability, so what libgit2 writes for them
        # (the rewrite log's entry) is too: a ref on disk never names an object that is not.
        repo = repository.open_repository(repo_path, DURABLE)
        with _timed(report, "read"):
            report.bytes_before = objects_size(repo_path)
            if not dry_run:
                delete_ref(repo_path, REWRITE_REF)
            planned = _snapshot_and_plan(repo, plan, report)
        if dry_run:
            report.blobs_shared = sorted(planned.gone & planned.kept_blobs)
            report.blobs_purged = sorted(planned.gone - planned.kept_blobs)  # would be
            report.bytes_after = report.bytes_before
            return report
        if not report.changed:
            with _timed(report, "purge"):
                finish_purge_locked(store, report)
                report.bytes_after = objects_size(repo_path)
            return report
        with _timed(report, "rebuild"):
            new_history, new_tip = _rebuild(store, repo, planned, progress, check=not notes_may_change)
        try:
            _swap_and_purge(store, repo, planned, new_history, new_tip, landed, report, erased)
        except BaseException:
            if report.new_tip is None:  # nothing swapped: forget the new history (the marker stays
                delete_ref(repo_path, REWRITE_REF)  # harmless; it only asks for a purge)
            raise
        with _timed(report, "index"):
            scrub_index(store)
        with _timed(report, "verify"):
            _verify_purged(repo_path, planned.gone & new_history.blobs, report)
        with _timed(report, "log"):
            report.log_entry = _log(store, repo, why or RewriteWhy("rewrite", "a history rewrite"), report)
        return report


def _log(store: MemoryStore, repo: pygit2.Repository, why: RewriteWhy, report: RewriteReport) -> str:
    """The rewrite's entry in the rewrite log, signed, after main's swap and the purge's check."""
    entry = rewrite_log.LogEntry(
        kind=why.kind,
        store_id=store.id,
        old_tip=report.old_tip,
        new_tip=report.new_tip,
        at=store.clock(),
        by=actor_text(why.by),
        reason=why.reason,
        dropped=tuple(report.dropped),
        redacted=tuple(report.redacted),
        tool=TOOL,
    )
    erased = [*report.dropped, *report.redacted]
    if erased and why.kind in ("retention", "redaction") and isinstance(store.signer, ReceiptSigner):
        fields = {
            "memory_store_id": store.id,
            "kind": why.kind,
            "version_ids": erased,
            "erased_by": entry.by,
            "erased_at": iso(entry.at),
            "reason": why.reason,
            "old_tip": report.old_tip,
            "new_tip": report.new_tip,
            "entry_sha256": entry_digest(rewrite_log.entry_bytes(entry)),
        }
        receipt = make_receipt(store.path, store.signer, fields, report.blobs_purged, report.blobs_unpurged)
        entry = dataclasses.replace(entry, receipt=receipt)
    return rewrite_log.append(repo, entry, store.signer)


def _snapshot_and_plan(repo: pygit2.Repository, plan: Plan, report: RewriteReport) -> _Planned:
    """Read ``main``'s history at its tip now and ask the plan what becomes of every version."""
    snapshot = read_tip(repo)
    history = History(repo)
    entries = history.read(snapshot, None) if snapshot is not None else []
    decided = plan(entries, history.live())
    if len(decided) != len(entries):
        raise ValueError("a rewrite plan must say what becomes of every version")
    pairs = list(zip(entries, decided, strict=True))
    report.old_tip = str(snapshot) if snapshot is not None else None
    report.versions_before = len(entries)
    report.versions_after = sum(d is not None for d in decided)
    report.dropped = [e.record.version_id for e, d in pairs if d is None]
    report.redacted = [e.record.version_id for e, d in pairs if d is not None and d.redacted and not e.redacted]
    report.changed = any(d is not e for e, d in pairs)
    return _Planned(
        snapshot,
        history,
        [d for d in decided if d is not None],
        kept_blobs={d.blob for d in decided if d is not None and d.blob is not None and d.changes_state},
        gone={e.blob for e, d in pairs if e.blob is not None and (d is None or d.blob != e.blob)},
        blob_map={
            e.blob: d.blob
            for e, d in pairs
            if e.blob is not None and d is not None and d.blob is not None and d.blob != e.blob
        },
    )


def _rebuild(
    store: MemoryStore, repo: pygit2.Repository, planned: _Planned, progress: Progress | None, *, check: bool = True
) -> tuple[NewHistory, str]:
    """Write the new history with ``git fast-import`` (no lock held), signed with the store's key, and
    check it ends with the same notes."""
    assert planned.snapshot is not None  # noqa: S101  narrows the type for mypy; never a check of input
    new_history = NewHistory(store.path, store.signer)
    new_tip = new_history.run(planned.kept, None, progress)
    if check:
        check_same_notes(repo, planned.snapshot, new_tip, planned.blob_map)
    checkpoint("built")
    return new_history, new_tip


def _swap_and_purge(
    store: MemoryStore,
    repo: pygit2.Repository,
    planned: _Planned,
    new_history: NewHistory,
    new_tip: str,
    landed: Callable[[Entry], Entry] | None,
    report: RewriteReport,
    erased: Erased | None = None,
) -> None:
    """Under the writer lock: replay what landed since the snapshot, mark what to purge, swap ``main``,
    tell ``erased``, purge."""
    repo_path = store.path
    clock = time.monotonic()
    with writer_lock(store):
        base = planned.snapshot
        for _attempt in range(MAX_SWAP_ATTEMPTS):
            current = read_tip(repo)
            if current is None:
                raise RewriteFailed("main disappeared during the rewrite; nothing was changed")
            if current != base:
                assert base is not None  # noqa: S101  narrows the type for mypy; never a check of input
                new_tip = _replay_landed(repo, planned, new_history, base, current, new_tip, landed, report)
                base = current
            previous = read_marker(repo_path) or set()
            purged = (planned.gone | previous) - new_history.blobs
            write_marker(repo_path, purged)
            checkpoint("before-swap")
            if repository.compare_and_swap(repo, base, pygit2.Oid(hex=new_tip)):
                break
        else:
            raise StoreBusy(f"store {store.id} kept changing; its history was not rewritten")
        checkpoint("after-swap")
        report.new_tip = new_tip
        _tell_erased(erased, report, frozenset(purged))
        report.timings["swap"] = time.monotonic() - clock
        clock = time.monotonic()
        purge_locked(repo_path, store.signer)
    report.timings["purge"] = time.monotonic() - clock


def _tell_erased(erased: Erased | None, report: RewriteReport, purged: frozenset[str]) -> None:
    if erased is None or not (report.dropped or report.redacted):
        return
    try:
        erased(report, purged)
    except Exception:  # the erasure itself must go on; the ledger's gap is logged loudly
        log.exception("%s: the erasure ledger could not record this rewrite", report.store_id)


def _replay_landed(
    repo: pygit2.Repository,
    planned: _Planned,
    new_history: NewHistory,
    base: pygit2.Oid,
    current: pygit2.Oid,
    new_tip: str,
    landed: Callable[[Entry], Entry] | None,
    report: RewriteReport,
) -> str:
    """Put the versions written between ``base`` and ``current`` on top of the new history; its new tip."""
    try:
        arrived = planned.history.read(current, base)
    except Diverged:
        raise RewriteFailed("main was rewritten by someone else meanwhile; nothing was changed") from None
    replayed = [landed(e) for e in arrived] if landed is not None else arrived
    for old, new in zip(arrived, replayed, strict=True):
        if old.blob is not None and new.blob is not None and new.blob != old.blob:
            planned.blob_map[old.blob] = new.blob
            planned.gone.add(old.blob)
    new_tip = new_history.run(replayed, new_tip)
    check_same_notes(repo, current, new_tip, planned.blob_map)
    report.replayed += len(arrived)
    report.versions_before += len(arrived)
    report.versions_after += len(arrived)
    return new_tip


def _verify_purged(repo_path: Path, shared: set[str], report: RewriteReport) -> None:
    """Check that every blob the marker names is unreadable now, then drop the marker."""
    pending = read_marker(repo_path) or set()
    report.blobs_shared = sorted(shared)
    verify(repo_path, pending, report)
    marker(repo_path).unlink(missing_ok=True)
    report.bytes_after = objects_size(repo_path)


__all__ = ["Erased", "Plan", "rewrite_history"]
