"""The catalog into a backup and back, consistent at one moment while the home serves.

A SQLite catalog is copied with SQLite's online backup API: one read transaction, so the copy is the
database as it stood at one commit, while writers go on (in WAL mode they are not even held up). A
PostgreSQL catalog is read table by table in one ``REPEATABLE READ, READ ONLY`` transaction (one
snapshot of every table) through the storage interface and written into a SQLite file of the same
schema, so every backup holds its catalog the same way and restores into either engine. The stores'
indexes are not copied: they are rebuilt from history on restore.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from gitmem.db import Database, PostgresDatabase, SQLiteDatabase, Transaction
from gitmem.home_tables import COPIED_TABLES, copy_catalog, migrate_home

BATCH = 1000
SNAPSHOT = ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", ())


def sqlite_copy(source: Path, target: Path) -> None:
    """SQLite's online backup of the database file ``source`` into a new file ``target``."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
    finally:
        dst.close()
        src.close()


def snapshot_catalog(db: Database, target: Path) -> None:
    """The catalog in ``db`` as it stands at one moment, into the SQLite file ``target``."""
    path = getattr(db, "path", None)
    if db.dialect == "sqlite" and isinstance(path, Path):
        sqlite_copy(path, target)
        return
    migrate_home(db)  # every table there, as `gitmem serve` makes them at start (steps only add)
    copy = SQLiteDatabase(target)
    try:
        migrate_home(copy)
        with _snapshot(db) as snap, copy.transaction() as tx:
            for table in COPIED_TABLES:
                result = snap.execute(f"SELECT * FROM {table}")  # noqa: S608  table and column names from the schema; values bound
                rows = result.fetchall()
                if not rows:
                    continue
                columns = list(rows[0].keys())
                sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"  # noqa: S608  table and column names from the schema; values bound
                for start in range(0, len(rows), BATCH):
                    tx.executemany(sql, [tuple(r) for r in rows[start : start + BATCH]])
    finally:
        copy.close()


def _snapshot(db: Database) -> contextlib.AbstractContextManager[Transaction]:
    if isinstance(db, PostgresDatabase):
        return db.transaction(opening=SNAPSHOT)
    return db.transaction()


def restore_catalog(backup_file: Path, home: Path, database: Database | None) -> None:
    """A backup's catalog into a new home: the file itself for SQLite, its rows into ``database`` (an
    empty PostgreSQL database) otherwise. The backup's file is never opened for writing."""
    if database is None:
        sqlite_copy(backup_file, home / "catalog.sqlite3")
        return
    scratch = home / ".restore-catalog.sqlite3"
    sqlite_copy(backup_file, scratch)
    source = SQLiteDatabase(scratch)
    try:
        copy_catalog(source, database)
    finally:
        source.close()
        for leftover in (scratch, scratch.with_name(scratch.name + "-wal"), scratch.with_name(scratch.name + "-shm")):
            leftover.unlink(missing_ok=True)


__all__ = ["restore_catalog", "snapshot_catalog", "sqlite_copy"]
