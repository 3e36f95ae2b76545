"""The catalog: workspaces, API keys and users (hashed), and stores' metadata, on a :class:`Database`.

Shared by every process on a data home, and by every node of a cluster on PostgreSQL: short
transactions, each holding the catalog's write lock (:data:`CATALOG_LOCK`: SQLite's ``BEGIN
IMMEDIATE`` or one ``pg_advisory_xact_lock``) so a count checked before an insert cannot race. Reads
see the committed rows, so a key revoked on one node holds on every other at once. Every change is
also announced (:meth:`Catalog.changed`, over ``LISTEN/NOTIFY`` on PostgreSQL), and :attr:`Catalog.cache`
keeps what each write asks only while this process hears every announcement
(:mod:`gitmem.engine.catalog.cache`). Secrets are
shown once and stored as SHA-256 digests (they are long random strings, so a fast hash is enough).

:class:`Catalog` is made of one class a table, each in its module: :class:`~.workspaces.WorkspaceRows`,
:class:`~.credentials.CredentialRows` (keys, users' and tasks' tokens, authentication) and
:class:`~.stores.StoreRows`, on what they share (:class:`~.base.CatalogBase`: the database, the write
transaction, the announcements). Here: the tables' schema and the catalog of a home.
"""

from __future__ import annotations

from pathlib import Path

from gitmem.clock import Clock, system_clock
from gitmem.db import Database, SQLiteDatabase, open_database
from gitmem.db.migrations import Migration, migrate
from gitmem.engine.catalog.base import CHANGES, CatalogBase, CatalogBusy
from gitmem.engine.catalog.cache import CatalogCache
from gitmem.engine.catalog.credentials import (
    ROLES,
    Credential,
    CredentialRows,
    Principal,
    hash_secret,
    principal_task_id,
)
from gitmem.engine.catalog.erasures import MIGRATIONS as ERASURES
from gitmem.engine.catalog.erasures import ErasureLedger
from gitmem.engine.catalog.stores import StoreRows, store_info
from gitmem.engine.catalog.workspaces import Workspace, WorkspaceRows

SCHEMA = """
CREATE TABLE IF NOT EXISTS workspaces (
    id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS credentials (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, workspace_id TEXT NOT NULL, name TEXT NOT NULL,
    role TEXT NOT NULL, secret_hash TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL,
    revoked_at INTEGER, task_id TEXT);
CREATE TABLE IF NOT EXISTS stores (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,
    metadata TEXT NOT NULL, kind TEXT NOT NULL, encrypted INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, archived_at INTEGER);
CREATE INDEX IF NOT EXISTS stores_workspace ON stores (workspace_id, created_at, id);
"""
MIGRATIONS = (Migration("catalog", 1, SCHEMA), *ERASURES)


class Catalog(WorkspaceRows, CredentialRows, StoreRows):
    """A home's catalog: its tables' rows (one class each), the cache of what a write asks, the
    ledger of erasures."""

    def __init__(self, database: Database | Path, clock: Clock = system_clock) -> None:
        self.db = database if isinstance(database, Database) else SQLiteDatabase(database)
        self.path = self.db.path if isinstance(self.db, SQLiteDatabase) else None
        self.clock = clock
        migrate(self.db, MIGRATIONS)
        self.cache = CatalogCache(self.db, self.on_change)
        self.erasures = ErasureLedger(self.db)  # what was erased, for restores (gitmem.engine.catalog.erasures)

    @classmethod
    def for_home(cls, home: Path, url: str | None = None, clock: Clock = system_clock) -> Catalog:
        """The catalog of a data home: PostgreSQL at ``url``, else ``catalog.sqlite3`` in the home."""
        return cls(open_database(url, home / "catalog.sqlite3"), clock)

    def close(self) -> None:
        self.db.close()


__all__ = [
    "CHANGES",
    "MIGRATIONS",
    "ROLES",
    "Catalog",
    "CatalogBase",
    "CatalogBusy",
    "Credential",
    "Principal",
    "Workspace",
    "hash_secret",
    "principal_task_id",
    "store_info",
]
