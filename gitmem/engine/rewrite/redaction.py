"""Redaction: one version blanked everywhere, with the history rewrite of :mod:`gitmem.engine.rewrite.rewrite`.

A redacted conflict (:func:`redact_conflict`) is blanked the same way on its own line.

A redacted version keeps its id, author and time and gains ``Redacted-At`` and ``Redacted-By``; its path
and content leave every commit, the index and the object store. The newest version of a note that still
exists cannot be redacted (409): that would change the note. Redacting again changes nothing. Allowed on
archived stores (no note changes).

Given the home's erasure ledger (``ledger``: :attr:`gitmem.engine.catalog.catalog.Catalog.erasures`), the
rewrite records each redaction there as it swaps history in, for restores from older backups.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitmem.engine.catalog.erasures import Erasure, ErasureLedger
from gitmem.engine.rewrite.conflicts import ConflictRewriteReport, rewrite_conflicts
from gitmem.engine.rewrite.history import Entry
from gitmem.engine.rewrite.purge import finish_pending_purge
from gitmem.engine.rewrite.report import RewriteReport, RewriteWhy
from gitmem.engine.rewrite.rewrite import rewrite_history
from gitmem.engine.store.conflicts import Conflict
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import Conflict as Refused
from gitmem.errors import NotFound
from gitmem.git.conflict_records import ConflictRecord
from gitmem.model import Actor, Version

__all__ = ["redact", "redact_conflict", "redact_version"]

_NEWEST = "the newest version of a memory that still exists cannot be redacted"


def redact_version(
    store: MemoryStore, version_id: str, actor: Actor | None, ledger: ErasureLedger | None = None
) -> RewriteReport:
    """Blank one version of ``store`` everywhere (recorded in ``ledger``); what the rewrite did."""
    store.index.catch_up()
    row = store.index.version(version_id)
    if row is None:
        raise NotFound(f"memory version {version_id} not found")
    if row.record.redacted_at is not None:
        return finish_pending_purge(store)  # already redacted; make sure a crashed purge is finished
    note = store.index.note(row.record.memory_id)
    if note is not None and note.version_id == version_id:
        raise Refused(_NEWEST)
    when = store.clock()

    def plan(entries: Sequence[Entry], live: frozenset[str]) -> list[Entry | None]:
        # Decided again on the snapshot the rewrite reads: the index may have been behind a push.
        found = [e for e in entries if e.record.version_id == version_id]
        if not found:
            raise NotFound(f"memory version {version_id} not found")
        target = found[0]
        if target.redacted:
            return list(entries)
        newest = max(e.seq for e in entries if e.record.memory_id == target.record.memory_id)
        if target.record.memory_id in live and target.seq == newest:
            raise Refused(_NEWEST)
        return [target.redact(when, actor) if e is target else e for e in entries]

    def erased(report: RewriteReport, blobs: frozenset[str]) -> None:
        assert ledger is not None  # noqa: S101  narrows the type for mypy; never a check of input
        erasure = Erasure(store.id, "redaction", store.clock(), tuple(report.redacted), (), tuple(blobs), when, actor)
        ledger.record(erasure)

    who = actor.trailer() if actor else "the service"
    why = RewriteWhy("redaction", f"redacted by {who}", actor)
    return rewrite_history(store, plan, erased=erased if ledger is not None else None, why=why)


def redact(
    store: MemoryStore, version_id: str, actor: Actor | None = None, ledger: ErasureLedger | None = None
) -> Version:
    """Blank one version of ``store`` everywhere; the version as it reads now (without content)."""
    redact_version(store, version_id, actor, ledger)
    version = store.version(version_id, with_content=False)
    store.announce_redaction(version)
    return version


def redact_conflict(
    store: MemoryStore, conflict_id: str, actor: Actor | None = None, ledger: ErasureLedger | None = None
) -> Conflict:
    """Blank one conflict: its path, text and hashes leave its record and its text leaves the objects;
    its id, note, author and time stay. Redacting again changes nothing."""
    conflict = store.conflicts.get(conflict_id, with_content=False)
    if conflict.redacted_at is None:
        when = store.clock()

        def plan(record: ConflictRecord) -> ConflictRecord:
            return record.redacted(when, actor) if record.conflict_id == conflict_id else record

        def erased(report: ConflictRewriteReport) -> None:
            assert ledger is not None  # noqa: S101  narrows the type for mypy; never a check of input
            ids, blobs = tuple(report.redacted), tuple(report.gone)
            ledger.record(Erasure(store.id, "conflict_redaction", store.clock(), (), ids, blobs, when, actor))

        rewrite_conflicts(store, plan, erased=erased if ledger is not None else None)
    return store.conflicts.get(conflict_id, with_content=False)
