"""The SQLite side of :mod:`gitmem.db`: a file seen through one connection per thread."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from gitmem.db.interface import Database, Dialect, Params, sqlite_statements
from gitmem.db.thread_connections import ThreadConnections

log = logging.getLogger(__name__)


class _Listeners:
    """In-process listeners, for SQLite (the only processes to tell are this one's)."""

    def __init__(self) -> None:
        self._callbacks: dict[str, list[Callable[[str], None]]] = {}
        self._guard = threading.Lock()

    def add(self, channel: str, callback: Callable[[str], None]) -> None:
        with self._guard:
            self._callbacks.setdefault(channel, []).append(callback)

    def fire(self, pending: list[tuple[str, str]]) -> None:
        for channel, payload in pending:
            for callback in list(self._callbacks.get(channel, ())):
                try:
                    callback(payload)
                except Exception:
                    log.exception("a listener of %s failed", channel)


class _SQLiteTransaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.pending: list[tuple[str, str]] = []

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Params]) -> sqlite3.Cursor:
        return self.conn.executemany(sql, rows)

    def executescript(self, script: str) -> None:
        """Inside the transaction (``sqlite3``'s own ``executescript`` would commit it first)."""
        for statement in sqlite_statements(script):
            self.conn.execute(statement)

    def lock(self, key: str) -> None:
        """Held already: ``BEGIN IMMEDIATE`` took the file's write lock, which excludes every writer."""

    def notify(self, channel: str, payload: str = "") -> None:
        self.pending.append((channel, payload))


class SQLiteDatabase(Database):
    """A SQLite file through :class:`~gitmem.db.thread_connections.ThreadConnections`."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self.display_name = str(path)
        self.connections = ThreadConnections(path, durable=durable)
        self._listeners = _Listeners()
        self._local = threading.local()

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection (inside :meth:`without_waiting`, its read-only one that never waits)."""
        quick: sqlite3.Connection | None = getattr(self._local, "quick", None)
        if quick is not None and getattr(self._local, "no_wait", False):
            return quick
        return self.connections.get()

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Params]) -> sqlite3.Cursor:
        return self.conn.executemany(sql, rows)

    def executescript(self, script: str) -> None:
        self.connections.get().executescript(script)  # manages its own transaction

    @contextlib.contextmanager
    def transaction(self) -> Iterator[_SQLiteTransaction]:
        if getattr(self._local, "no_wait", False):
            raise sqlite3.OperationalError("a write cannot run where waiting is not allowed")
        if self.in_transaction():  # the process's write lock is not reentrant: say so rather than hang
            raise RuntimeError("a transaction is open on this thread already")
        with self.connections.transaction() as conn:
            tx = _SQLiteTransaction(conn)
            self._local.depth = getattr(self._local, "depth", 0) + 1
            try:
                yield tx
            finally:
                self._local.depth -= 1
        self._listeners.fire(tx.pending)

    def in_transaction(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    @contextlib.contextmanager
    def without_waiting(self) -> Iterator[None]:
        """Within it, this thread's reads use a read-only connection that never waits for a lock:
        ``sqlite3.OperationalError`` where it would have waited (or an attempt to write)."""
        if getattr(self._local, "quick", None) is None:
            quick = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
            quick.row_factory = sqlite3.Row
            quick.execute("PRAGMA query_only=ON")
            self._local.quick = quick
        self._local.no_wait = True
        try:
            yield
        finally:
            self._local.no_wait = False

    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        self._listeners.add(channel, callback)

    def close(self) -> None:
        self.connections.close()
