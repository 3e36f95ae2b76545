"""Erased stays erased: a restored home erases again what was erased after its backup was made.

The erasures a restore must apply are the rows of the erasure ledger (:mod:`gitmem.engine.catalog.erasures`)
that the backup's catalog copy does not hold, read from every later ledger it can find: the backups
made after it under the same destination, the home it was made from if it is still there, and any
catalog named with ``--erasures-from``. Rows carry the same id in every copy, so a row read twice is
applied once, and applying one again changes nothing.

Per store, in one history rewrite (:func:`gitmem.engine.rewrite.rewrite.rewrite_history`): versions a
retention run dropped are dropped, versions redacted are redacted with their original ``Redacted-At``
and ``Redacted-By``. The later versions that made the erasure allowed (a redacted version was not its
note's newest) may not be in the backup, so the rewritten history may end with other notes than the
backup's (the note falls back to its previous version, as a redacted version's replay does). Conflicts
are dropped or redacted on their own lines, a deleted store is deleted with its key. Then every blob
the ledger says was purged must be unreadable in the restored repository; one that is not is a problem
the restore reports.

The same later catalogs also say which keys and tokens were revoked since: they are revoked in the
restored home too (a key revoked after the backup must not work again because of a restore).
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitmem.backup.layout import CATALOG, backups
from gitmem.db import open_database
from gitmem.engine.catalog.erasures import COLUMNS, Erasure, ErasureLedger, erasure_of
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.conflicts import rewrite_conflicts
from gitmem.engine.rewrite.history import Entry
from gitmem.engine.rewrite.rewrite import rewrite_history
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import NotFound
from gitmem.git.conflict_records import ConflictRecord
from gitmem.git.repository import git
from gitmem.model import Actor

log = logging.getLogger(__name__)


@dataclass
class ErasedAgain:
    applied: list[Erasure] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)  # credentials revoked since the backup, revoked again
    sources: list[str] = field(default_factory=list)  # the ledgers read
    stores_deleted: list[str] = field(default_factory=list)
    versions_dropped: int = 0
    versions_redacted: int = 0
    conflicts_erased: int = 0
    problems: list[str] = field(default_factory=list)


REVOKED = "SELECT id FROM credentials WHERE revoked_at IS NOT NULL"


@dataclass
class Later:
    """What the catalogs later than a backup say: erasures it does not hold, credentials revoked, and
    which catalogs were read."""

    erasures: list[Erasure] = field(default_factory=list)
    revoked: set[str] = field(default_factory=set)
    sources: list[str] = field(default_factory=list)


def file_erasures(catalog: Path) -> list[Erasure]:
    """The ledger of a SQLite catalog file (a backup's or a home's), read without writing to it."""
    return _read_file(catalog)[0]


def _read_file(catalog: Path) -> tuple[list[Erasure], set[str]]:
    db = sqlite3.connect(f"file:{catalog}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        revoked = {r[0] for r in db.execute(REVOKED)}
        try:
            rows = [erasure_of(r) for r in db.execute(f"SELECT seq, {COLUMNS} FROM erasures ORDER BY seq")]  # noqa: S608  COLUMNS is a constant
        except sqlite3.OperationalError:  # a catalog older than the ledger
            rows = []
        return rows, revoked
    finally:
        db.close()


def _read_database(url: str) -> tuple[str, list[Erasure], set[str]]:
    db = open_database(url, Path("."))
    try:
        return db.display_name, ErasureLedger(db).since(0), {r[0] for r in db.execute(REVOKED)}
    finally:
        db.close()


def later_catalogs(backup: Path, home: Path | None, extra: Sequence[str | Path]) -> Later:
    """What every catalog later than ``backup`` found says (see :class:`Later`): the backups after it
    under its destination, ``home`` (the one it was made from) if still there, and ``extra``."""
    known = {e.id for e in file_erasures(backup / CATALOG)}
    found: dict[str, Erasure] = {}
    later = Later()

    def add(source: str, erasures: Iterable[Erasure], revoked: set[str]) -> None:
        later.sources.append(source)
        later.revoked |= revoked
        for erasure in erasures:
            if erasure.id not in known:
                found.setdefault(erasure.id, erasure)

    for newer in backups(backup.parent):
        if newer.name > backup.name:
            add(str(newer), *_read_file(newer / CATALOG))
    if home is not None and (home / CATALOG).is_file():
        add(str(home), *_read_file(home / CATALOG))
    for source in extra:
        if str(source).startswith("postgresql://"):
            add(*_read_database(str(source)))
        else:
            path = Path(source)
            add(str(path), *_read_file(path / CATALOG if path.is_dir() else path))
    later.erasures = sorted(found.values(), key=lambda e: (e.erased_at, e.seq))
    return later


def erase_again(gm: Gitmem, later: Later) -> ErasedAgain:
    """Apply what ``later`` says to the restored home ``gm`` (see the module's docstring)."""
    done = ErasedAgain(sources=later.sources)
    held = {r[0] for r in gm.catalog.db.execute(REVOKED)}
    for cred_id in sorted(later.revoked - held):
        try:
            gm.catalog.revoke(cred_id)
            done.revoked.append(cred_id)
        except NotFound:
            pass  # made after the backup
    by_store: dict[str, list[Erasure]] = defaultdict(list)
    for erasure in later.erasures:
        by_store[erasure.store_id].append(erasure)
    for store_id, items in by_store.items():
        try:
            info = gm.catalog.store(store_id)
        except NotFound:
            continue  # made after the backup, or gone already: nothing of it here
        if any(e.kind == "store_deleted" for e in items):
            gm.delete_store(info.workspace_id, store_id, force=True)
            done.stores_deleted.append(store_id)
        else:
            with gm.leases():  # one store open at a time
                store = gm.store(info.workspace_id, store_id)
                _versions(store, items, done)
                _conflicts(store, items, done)
                done.problems += _still_readable(store, items)
        done.applied += items
    gm.catalog.erasures.record_all(done.applied)
    return done


Redaction = tuple[dt.datetime | None, Actor | None]


def _versions(store: MemoryStore, items: Sequence[Erasure], done: ErasedAgain) -> None:
    drop = {v for e in items if e.kind == "retention" for v in e.version_ids}
    redact: dict[str, Redaction] = {
        v: (e.redacted_at, e.redacted_by) for e in items if e.kind == "redaction" for v in e.version_ids
    }
    if not drop and not redact:
        return

    def plan(entries: Sequence[Entry], live: frozenset[str]) -> list[Entry | None]:  # noqa: ARG001  rewrite_history's plan signature
        out: list[Entry | None] = []
        for entry in entries:
            version_id = entry.record.version_id
            if version_id in drop:
                out.append(None)
            elif version_id in redact and not entry.redacted:
                when, by = redact[version_id]
                out.append(entry.redact(when or store.clock(), by))
            else:
                out.append(entry)
        return out

    report = rewrite_history(store, plan, notes_may_change=True)
    done.versions_dropped += len(report.dropped)
    done.versions_redacted += len(report.redacted)


def _conflicts(store: MemoryStore, items: Sequence[Erasure], done: ErasedAgain) -> None:
    drop = {c for e in items if e.kind == "conflict_retention" for c in e.conflict_ids}
    redact: dict[str, Redaction] = {
        c: (e.redacted_at, e.redacted_by) for e in items if e.kind == "conflict_redaction" for c in e.conflict_ids
    }
    if not drop and not redact:
        return

    def plan(record: ConflictRecord) -> ConflictRecord | None:
        if record.conflict_id in drop:
            return None
        if record.conflict_id in redact and record.redacted_at is None:
            when, by = redact[record.conflict_id]
            return record.redacted(when or store.clock(), by)
        return record

    report = rewrite_conflicts(store, plan)
    done.conflicts_erased += len(report.dropped) + len(report.redacted)


def _still_readable(store: MemoryStore, items: Sequence[Erasure]) -> list[str]:
    """The ledger's purged blobs that the restored repository still holds (there should be none)."""
    blobs = sorted({b for e in items for b in e.blob_ids})
    if not blobs:
        return []
    result = git(store.path, "cat-file", "--batch-check", input="\n".join(blobs).encode() + b"\n")
    present = [line.split(" ", 1)[0] for line in result.stdout.decode().splitlines() if not line.endswith(" missing")]
    return [f"{store.id}: blob {blob} was erased after the backup and is still readable" for blob in present]


__all__ = ["ErasedAgain", "Later", "erase_again", "file_erasures", "later_catalogs"]
