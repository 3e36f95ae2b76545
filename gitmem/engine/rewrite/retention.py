"""How long versions are kept (the memory-store API), applied with the history rewrite of
:mod:`gitmem.engine.rewrite.rewrite`.

Conflicts (:mod:`gitmem.engine.store.conflicts`) follow the age rule alone, resolved or not, and are purged
in the same run.

A version lives ``retention_days`` (30 unless the workspace says otherwise; ``"keep-all"`` keeps every
version). The two newest versions of every note that still exists are always kept, whatever their
age; versions of deleted notes and redacted versions follow the age rule alone (a redacted version is
never one of the "two newest" a note keeps). A version is expired once it is ``retention_days`` old.

The server runs :class:`gitmem.engine.rewrite.pruner.PruneScheduler`; people run ``gitmem prune``
(:mod:`gitmem.cli.node.prune`). Every drop is recorded in the home's erasure ledger as it happens
(:mod:`gitmem.engine.catalog.erasures`), so a restore from an older backup drops it again.
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gitmem import metrics
from gitmem.clock import iso, to_micros
from gitmem.engine.catalog.erasures import Erasure, ErasureLedger
from gitmem.engine.rewrite.conflicts import ConflictRewriteReport, rewrite_conflicts
from gitmem.engine.rewrite.conflicts import expired as expired_by
from gitmem.engine.rewrite.fast_import import Progress
from gitmem.engine.rewrite.history import Entry
from gitmem.engine.rewrite.purge import finish_pending_purge
from gitmem.engine.rewrite.report import RewriteReport, RewriteWhy
from gitmem.engine.rewrite.rewrite import rewrite_history
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import GitmemError, InvalidRequest
from gitmem.model import StoreInfo

if TYPE_CHECKING:
    from gitmem.engine.gitmem import Gitmem

log = logging.getLogger(__name__)

DEFAULT_RETENTION_DAYS = 30
KEEP_ALL = "keep-all"
SETTING = "retention_days"
NEWEST_KEPT = 2


def retention_days(settings: Mapping[str, object]) -> int | None:
    """The workspace's retention in days, or None for ``keep-all``."""
    value = settings.get(SETTING, DEFAULT_RETENTION_DAYS)
    if value is None:
        return DEFAULT_RETENTION_DAYS
    if value == KEEP_ALL:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidRequest(f"{SETTING} must be a number of days or {KEEP_ALL!r}")
    try:
        days = int(value)
    except ValueError:
        raise InvalidRequest(f"{SETTING} must be a number of days or {KEEP_ALL!r}") from None
    if days < 0:
        raise InvalidRequest(f"{SETTING} must not be negative")
    return days


def keep_mask(entries: Sequence[Entry], live: frozenset[str], cutoff: dt.datetime) -> list[bool]:
    """Which versions the rule keeps: younger than ``cutoff``, or one of the two newest (not redacted)
    versions of a note that still exists."""
    by_note: dict[str, list[int]] = defaultdict(list)
    for i, entry in enumerate(entries):
        by_note[entry.record.memory_id].append(i)
    keep = [entry.record.created_at > cutoff for entry in entries]
    for memory_id, indexes in by_note.items():
        if memory_id in live:
            for i in [i for i in indexes if not entries[i].redacted][-NEWEST_KEPT:]:
                keep[i] = True
        # A note's kept history must replay to its current state: once a version that changes the tree
        # is kept, every later one is (only matters if times run backwards, e.g. odd pushed dates).
        seen = False
        for i in indexes:
            if entries[i].changes_state:
                keep[i] = keep[i] or seen
                seen = seen or keep[i]
    return keep


def retention_plan(cutoff: dt.datetime) -> Callable[[Sequence[Entry], frozenset[str]], list[Entry | None]]:
    def plan(entries: Sequence[Entry], live: frozenset[str]) -> list[Entry | None]:
        return [e if k else None for e, k in zip(entries, keep_mask(entries, live, cutoff), strict=True)]

    return plan


@dataclass
class PruneReport:
    store_id: str
    workspace_id: str | None
    retention: str  # "30 days" or "keep-all"
    dry_run: bool = False
    versions_before: int = 0
    versions_kept: int = 0
    dropped: list[str] = field(default_factory=list)  # version ids (that would go, in a dry run)
    replayed: int = 0
    blobs_purged: list[str] = field(default_factory=list)
    blobs_shared: list[str] = field(default_factory=list)
    blobs_unpurged: list[str] = field(default_factory=list)
    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0
    conflicts_dropped: list[str] = field(default_factory=list)  # conflict ids (that would go, in a dry run)
    skipped: str | None = None  # why nothing was looked at
    error: str | None = None
    rewrite: RewriteReport | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.blobs_unpurged


def _report(info_id: str, workspace_id: str | None, days: int | None, dry_run: bool) -> PruneReport:
    return PruneReport(info_id, workspace_id, KEEP_ALL if days is None else f"{days} days", dry_run)


def prune_store(
    store: MemoryStore,
    *,
    days: int | None,
    now: dt.datetime | None = None,
    dry_run: bool = False,
    workspace_id: str | None = None,
    progress: Progress | None = None,
    lock_timeout: float = 60.0,
    ledger: ErasureLedger | None = None,
) -> PruneReport:
    """Apply the retention rule to one store (``days=None``: keep-all), recording what it drops in ``ledger``."""
    started = time.monotonic()
    report = _report(store.id, workspace_id, days, dry_run)
    try:
        if days is None:
            report.skipped = KEEP_ALL
            if not dry_run:
                _absorb(report, finish_pending_purge(store, lock_timeout=lock_timeout))
            return report
        cutoff = (now or store.clock()) - dt.timedelta(days=days)
        report.conflicts_dropped = _expire_conflicts(
            store, cutoff, dry_run=dry_run, lock_timeout=lock_timeout, ledger=ledger
        )
        if not dry_run and _droppable(store, cutoff) == 0:
            report.skipped = "nothing expired"
            _absorb(report, finish_pending_purge(store, lock_timeout=lock_timeout))
            report.versions_before = report.versions_kept = _version_count(store)
            return report
        _absorb(
            report,
            rewrite_history(
                store,
                retention_plan(cutoff),
                dry_run=dry_run,
                progress=progress,
                lock_timeout=lock_timeout,
                erased=_recorder(store, ledger) if ledger is not None else None,
                why=RewriteWhy("retention", f"retention window {days} days (versions before {iso(cutoff)})"),
            ),
        )
    except GitmemError as exc:
        report.error = exc.message
    finally:
        report.seconds = time.monotonic() - started
    return report


def _recorder(store: MemoryStore, ledger: ErasureLedger) -> Callable[[RewriteReport, frozenset[str]], None]:
    def erased(report: RewriteReport, blobs: frozenset[str]) -> None:
        ledger.record(Erasure(store.id, "retention", store.clock(), tuple(report.dropped), (), tuple(blobs)))

    return erased


def _expire_conflicts(
    store: MemoryStore, cutoff: dt.datetime, *, dry_run: bool, lock_timeout: float, ledger: ErasureLedger | None = None
) -> list[str]:
    """Drop the conflicts kept at or before ``cutoff`` (the ids). Their purge is the one that follows:
    the rewrite of ``main``, or finishing the purge its marker asks for."""
    expired = [c.id for c in store.conflicts.all() if c.created_at <= cutoff]
    if dry_run or not expired:
        return expired
    micros = to_micros(cutoff)

    def erased(report: ConflictRewriteReport) -> None:
        assert ledger is not None  # noqa: S101  narrows the type for mypy; never a check of input
        ledger.record(
            Erasure(store.id, "conflict_retention", store.clock(), (), tuple(report.dropped), tuple(report.gone))
        )

    return rewrite_conflicts(
        store, expired_by(micros), purge=False, lock_timeout=lock_timeout, erased=erased if ledger else None
    ).dropped


def _droppable(store: MemoryStore, cutoff: dt.datetime) -> int | None:
    """How many versions the rule would drop, asked of the index (a cache: None if it cannot say), so a
    scheduled round skips, without walking its history, a store with nothing to drop. Git decides."""
    store.index.catch_up()
    try:
        (count,) = store.index.db.execute(
            "SELECT count(*) FROM versions v WHERE v.created_at <= ? AND NOT ("
            " v.redacted_at IS NULL AND v.memory_id IN (SELECT memory_id FROM notes) AND"
            " (SELECT count(*) FROM versions w WHERE w.memory_id = v.memory_id AND w.redacted_at IS NULL"
            "  AND w.seq > v.seq) < ?)",
            (to_micros(cutoff), NEWEST_KEPT),
        ).fetchone()
        return int(count)
    except sqlite3.Error:
        return None


def _version_count(store: MemoryStore) -> int:
    try:
        return int(store.index.db.execute("SELECT count(*) FROM versions").fetchone()[0])
    except sqlite3.Error:
        return 0


def _absorb(report: PruneReport, rewrite: RewriteReport) -> None:
    report.rewrite = rewrite
    report.versions_before = rewrite.versions_before
    report.versions_kept = rewrite.versions_after
    report.dropped = list(rewrite.dropped)
    report.replayed = rewrite.replayed
    report.blobs_purged = list(rewrite.blobs_purged)
    report.blobs_shared = list(rewrite.blobs_shared)
    report.blobs_unpurged = list(rewrite.blobs_unpurged)
    report.bytes_before = rewrite.bytes_before
    report.bytes_after = rewrite.bytes_after


def prune_info(
    gm: Gitmem, info: StoreInfo, *, dry_run: bool = False, progress: Progress | None = None, lock_timeout: float = 60.0
) -> PruneReport:
    """Prune one store of the catalog with its workspace's retention setting."""
    try:
        days = retention_days(gm.catalog.workspace(info.workspace_id).settings)
    except GitmemError as exc:
        report = _report(info.id, info.workspace_id, None, dry_run)
        report.error = exc.message
        return report
    path = gm.repo_path(info.id)
    if not path.exists():
        report = _report(info.id, info.workspace_id, days, dry_run)
        report.skipped = "no repository"
        return report
    # A store object of our own, closed afterwards: the pruner may visit thousands of stores.
    store = MemoryStore(
        path,
        info.id,
        clock=gm.clock,
        database_url=gm.index_database_url,
        durability=gm.durability,
        signer=gm.signer,
    )
    try:
        return prune_store(
            store,
            days=days,
            dry_run=dry_run,
            workspace_id=info.workspace_id,
            progress=progress,
            lock_timeout=lock_timeout,
            ledger=gm.catalog.erasures,
        )
    finally:
        store.close()


def prune_all(
    gm: Gitmem,
    *,
    dry_run: bool = False,
    progress: Callable[[StoreInfo, PruneReport], None] | None = None,
    workspace_id: str | None = None,
    lock_timeout: float = 60.0,
    stop: threading.Event | None = None,
) -> list[PruneReport]:
    """Apply retention to every store of the home (or of one workspace). One store's failure is
    reported in its :class:`PruneReport` and does not stop the others; ``stop`` set ends the round
    after the store in progress (a stopping server)."""
    reports = []
    for info in gm.all_stores():
        if stop is not None and stop.is_set():
            break
        if workspace_id is not None and info.workspace_id != workspace_id:
            continue
        try:
            report = prune_info(gm, info, dry_run=dry_run, lock_timeout=lock_timeout)
        except Exception as exc:  # a broken store must not stop the pruner
            log.exception("pruning %s failed", info.id)
            report = _report(info.id, info.workspace_id, None, dry_run)
            report.error = f"{type(exc).__name__}: {exc}"
        if report.error:
            log.warning("pruning %s: %s", info.id, report.error)
        if not dry_run:
            _count(report)
        reports.append(report)
        if progress is not None:
            progress(info, report)
    return reports


def _count(report: PruneReport) -> None:
    """A store's run in the metrics: its outcome, and for a rewrite its time and what it removed."""
    outcome = "failed" if not report.ok else "skipped" if report.skipped else "ok"
    metrics.RETENTION_RUNS.labels(outcome).inc()
    if report.rewrite is not None and outcome != "skipped":
        metrics.RETENTION_SECONDS.observe(report.seconds)
        metrics.RETENTION_REMOVED_VERSIONS.inc(len(report.dropped))
        metrics.RETENTION_REMOVED_BYTES.inc(max(0, report.bytes_before - report.bytes_after))


__all__ = [
    "DEFAULT_RETENTION_DAYS",
    "KEEP_ALL",
    "PruneReport",
    "keep_mask",
    "prune_all",
    "prune_info",
    "prune_store",
    "retention_days",
    "retention_plan",
]
