"""Writing a version's row into a store's index, SQLite or PostgreSQL (for :mod:`.store_index`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gitmem.clock import to_micros
from gitmem.engine.index import stored
from gitmem.git.commits import VersionRecord


def insert(
    write: Callable[[str, tuple[Any, ...]], None],
    on_postgres: bool,
    db: Any,
    commit_id: str,
    record: VersionRecord,
    blob_id: str | None,
) -> None:
    """The version's row, last in ``seq`` order (``write``: the index's, which PostgreSQL defers)."""
    # As SQLite's INSERT OR REPLACE on its rowid: a version applied again goes last, seq = max + 1.
    dialect = "postgresql" if on_postgres else "sqlite"
    if not on_postgres:
        db.execute("DELETE FROM versions WHERE version_id=?", (stored.version_key(record.version_id, dialect),))
        replace, next_seq = "", "(SELECT coalesce(max(seq), 0) + 1 FROM versions)"
        params: tuple[Any, ...] = ()
    else:  # the same in one round trip: the rows the CTE deletes are still seen by max(seq)
        replace = "WITH gone AS (DELETE FROM versions WHERE version_id=? RETURNING seq) "
        next_seq = "(SELECT coalesce(max(seq), 0) + 1 FROM versions WHERE seq NOT IN (SELECT seq FROM gone))"
        params = (record.version_id,)
    write(
        replace + "INSERT INTO versions (seq, version_id, memory_id, operation, path, sha256, size, blob_id,"  # noqa: S608  the code's own SQL and placeholders; values bound
        " created_at, actor_type, actor_id, commit_id, redacted_at, redacted_by_type, redacted_by_id)"
        f" VALUES ({next_seq},?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            *params,
            stored.version_key(record.version_id, dialect),
            stored.note_key(record.memory_id, dialect),
            record.operation,
            record.path,
            stored.hash_key(record.content_sha256, dialect),
            record.content_size,
            stored.hash_key(blob_id, dialect),
            to_micros(record.created_at),
            record.created_by.type if record.created_by else None,
            stored.actor_key(record.created_by, dialect),
            stored.hash_key(commit_id, dialect),
            to_micros(record.redacted_at) if record.redacted_at else None,
            record.redacted_by.type if record.redacted_by else None,
            stored.actor_key(record.redacted_by, dialect),
        ),
    )


__all__ = ["insert"]
