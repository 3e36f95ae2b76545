"""What every table of the catalog shares: its database, its clock, the write transaction holding the
catalog's write lock, the announcement of a change, and reads that never wait.

Each table's rows are a class of their own (:mod:`.workspaces`, :mod:`.credentials`, :mod:`.stores`)
on this base; :class:`gitmem.engine.catalog.catalog.Catalog` is made of them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from gitmem.clock import Clock, to_micros
from gitmem.db import CATALOG_LOCK, Database, PostgresDatabase, SQLiteDatabase, Transaction
from gitmem.db.migrations import Migration, migrate
from gitmem.engine.catalog.erasures import ErasureLedger

CHANGES = "gitmem_catalog"  # the channel of :meth:`CatalogBase.on_change`: "<kind> <id>"


class CatalogBusy(Exception):
    """Raised inside :meth:`CatalogBase.without_waiting` where the work would have had to wait."""


class CatalogBase:
    db: Database
    path: Path | None
    clock: Clock
    erasures: ErasureLedger  # what was erased, for restores (gitmem.engine.catalog.erasures)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A write transaction holding the catalog's write lock (every writer of every node takes turns)."""
        with self.db.transaction() as tx:
            tx.lock(CATALOG_LOCK)
            yield tx

    def ensure_schema(self, migrations: tuple[Migration, ...]) -> None:
        """Other engine modules (tasks, profiles, dreams) add their tables through this."""
        migrate(self.db, migrations)

    @staticmethod
    def changed(tx: Transaction, kind: str, key: str) -> None:
        """Announce, when ``tx`` commits, that a ``kind`` row (credential, store, workspace, a workspace's
        webhooks) changed."""
        tx.notify(CHANGES, f"{kind} {key}")

    def on_change(self, callback: Callable[[str, str], None]) -> None:
        """Call ``callback(kind, id)`` after any node commits such a change (``("*", "")``: maybe missed some)."""
        self.db.listen(CHANGES, lambda payload: callback(*([*payload.split(" ", 1), ""])[:2]))

    def _now(self) -> int:
        return to_micros(self.clock())

    @contextlib.contextmanager
    def without_waiting(self) -> Iterator[None]:
        """Within it, this thread's catalog reads never wait for a lock: SQLite being busy, or an attempt
        to write, raises :class:`CatalogBusy` (redo the work outside, where it may wait). PostgreSQL's
        reads never wait for a writer, but may wait for a pooled connection (all busy, or the server
        away): that is :class:`CatalogBusy` too."""
        if isinstance(self.db, PostgresDatabase):
            import psycopg_pool

            try:
                with self.db.without_waiting():
                    yield
            except psycopg_pool.PoolTimeout as exc:
                raise CatalogBusy(str(exc)) from exc
            return
        if not isinstance(self.db, SQLiteDatabase):
            yield
            return
        try:
            with self.db.without_waiting():
                yield
        except sqlite3.OperationalError as exc:
            raise CatalogBusy(str(exc)) from exc
