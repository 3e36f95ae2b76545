"""The ledger of erasures: every redaction, every retention drop and every deleted store, in the catalog.

A backup is a copy of a moment; what was erased after that moment is still in it. The ledger is how a
restore knows what to erase again before the restored home serves
(docs/backup.md, "Erased stays erased"). The history rewrite writes a row the moment it erases, under
the store's writer lock right after ``main`` is swapped
(:func:`gitmem.engine.rewrite.rewrite.rewrite_history`'s ``erased``); the conflict rewrite right after
its refs move; :meth:`gitmem.engine.catalog.catalog.Catalog.delete_store` in the transaction that
deletes the store's row (which is also when an encrypted store's key goes).

A row names what was erased, never what it held: the store, the version or conflict ids, the ids of
the blobs purged, when, and for a redaction its ``Redacted-At`` and ``Redacted-By`` (so a re-applied
redaction reads exactly as the first one). ``id`` is the same in every copy of the ledger (a backup's,
a restored home's); ``seq`` orders one database's rows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from gitmem import ids
from gitmem.clock import from_micros, to_micros
from gitmem.db import Database, Transaction
from gitmem.db.migrations import Migration
from gitmem.model import Actor, ActorType

ErasureKind = Literal["redaction", "retention", "conflict_redaction", "conflict_retention", "store_deleted"]
KINDS: tuple[ErasureKind, ...] = ("redaction", "retention", "conflict_redaction", "conflict_retention", "store_deleted")
PREFIX = "erasure"

SCHEMA = """
CREATE TABLE IF NOT EXISTS erasures (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, store_id TEXT NOT NULL,
    kind TEXT NOT NULL, version_ids TEXT NOT NULL DEFAULT '[]', conflict_ids TEXT NOT NULL DEFAULT '[]',
    blob_ids TEXT NOT NULL DEFAULT '[]', redacted_at INTEGER, redacted_by TEXT, erased_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS erasures_store ON erasures (store_id, seq);
"""
MIGRATIONS = (Migration("erasures", 1, SCHEMA),)
COLUMNS = "id, store_id, kind, version_ids, conflict_ids, blob_ids, redacted_at, redacted_by, erased_at"


@dataclass(frozen=True)
class Erasure:
    """One erasure as the ledger keeps it."""

    store_id: str
    kind: ErasureKind
    erased_at: dt.datetime
    version_ids: tuple[str, ...] = ()
    conflict_ids: tuple[str, ...] = ()
    blob_ids: tuple[str, ...] = ()
    redacted_at: dt.datetime | None = None  # a redaction's Redacted-At
    redacted_by: Actor | None = None  # a redaction's Redacted-By (None: the service)
    id: str = field(default_factory=lambda: ids.new_id(PREFIX))
    seq: int = 0  # this database's order (0 until recorded)

    def row(self) -> tuple[object, ...]:
        by = self.redacted_by
        by_text = None if by is None else json.dumps({"type": by.type, "id": by.id})
        return (
            self.id,
            self.store_id,
            self.kind,
            json.dumps(list(self.version_ids)),
            json.dumps(list(self.conflict_ids)),
            json.dumps(sorted(self.blob_ids)),
            None if self.redacted_at is None else to_micros(self.redacted_at),
            by_text,
            to_micros(self.erased_at),
        )


def erasure_of(row: Any) -> Erasure:
    by = json.loads(row["redacted_by"]) if row["redacted_by"] else None
    return Erasure(
        id=row["id"],
        seq=int(row["seq"]),
        store_id=row["store_id"],
        kind=cast(ErasureKind, row["kind"]),
        version_ids=tuple(json.loads(row["version_ids"])),
        conflict_ids=tuple(json.loads(row["conflict_ids"])),
        blob_ids=tuple(json.loads(row["blob_ids"])),
        redacted_at=None if row["redacted_at"] is None else from_micros(int(row["redacted_at"])),
        redacted_by=None if by is None else Actor(cast(ActorType, by["type"]), by["id"]),
        erased_at=from_micros(int(row["erased_at"])),
    )


class ErasureLedger:
    """The ledger's rows in one database (a home's catalog, or a backup's copy of it)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, erasure: Erasure, tx: Transaction | None = None) -> None:
        """Add ``erasure`` (in ``tx`` if given, else a transaction of its own); a row already there
        (same id: copied from another ledger) is left as it is."""
        sql = f"INSERT INTO erasures ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"  # noqa: S608  COLUMNS and the conditions are the code's own; values bound
        if tx is not None:
            tx.execute(sql, erasure.row())
            return
        with self.db.transaction() as own:
            own.execute(sql, erasure.row())

    def record_all(self, erasures: Iterable[Erasure]) -> None:
        with self.db.transaction() as tx:
            for erasure in erasures:
                self.record(erasure, tx)

    def since(self, seq: int = 0, kind: ErasureKind | None = None) -> list[Erasure]:
        """The rows recorded after ``seq`` (of one ``kind``, if given), oldest first."""
        where, params = ("seq > ? AND kind = ?", (seq, kind)) if kind else ("seq > ?", (seq,))
        rows = self.db.execute(f"SELECT seq, {COLUMNS} FROM erasures WHERE {where} ORDER BY seq", params)  # noqa: S608  COLUMNS and the conditions are the code's own; values bound
        return [erasure_of(r) for r in rows]

    def last_seq(self) -> int:
        (value,) = self.db.execute("SELECT coalesce(max(seq), 0) FROM erasures").fetchone()
        return int(value)

    def ids(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT id FROM erasures")}


__all__ = ["KINDS", "MIGRATIONS", "Erasure", "ErasureKind", "ErasureLedger", "erasure_of"]
