"""One storage interface for everything that is not a Git object: SQLite beside the repositories, or PostgreSQL.

The engine writes its SQL once, in SQLite's dialect as it always has (``?`` placeholders, ``count(*)``,
``coalesce``, ``ON CONFLICT ... DO UPDATE``), and talks to a :class:`Database`:

- ``db.execute(sql, params)`` / ``db.executemany(sql, rows)``: one statement; the result has
  ``fetchone()``, ``fetchall()``, iteration and ``rowcount``, and every row reads by position and by
  column name (``row[0]``, ``row["id"]``, ``dict(...)`` of pairs, tuple unpacking).
- ``with db.transaction() as tx:`` a write transaction, committed on success, rolled back on any
  exception. Inside it, ``db.execute`` on the same thread runs in that transaction too (as SQLite's
  per-thread connection always did), so code that reads through a helper mid-transaction sees its own
  writes and never asks the pool for a second connection.
- ``tx.lock(key)``: a lock held until the transaction ends, whatever ends it (a crashed process's lock
  dies with its connection). PostgreSQL: ``pg_advisory_xact_lock`` on a 64-bit hash of the key. SQLite:
  nothing more to take, since ``BEGIN IMMEDIATE`` already holds the file's one write lock.
- ``tx.notify(channel, payload)``: sent to every listener when the transaction commits (PostgreSQL's
  ``NOTIFY``; SQLite has no other node to tell: listeners in this process are called after the commit).
- ``db.dialect`` (``"sqlite"`` or ``"postgresql"``) for the few statements that differ: schemas
  (``BIGINT`` and identity keys, triggers as PL/pgSQL functions: :mod:`gitmem.engine.migrations`) and
  JSON functions. ``INSERT OR IGNORE``/``OR REPLACE`` are written ``INSERT ... ON CONFLICT DO NOTHING``
  / ``DO UPDATE SET``, which both engines read (qualify the table's own columns in its ``WHERE``).

Why SQLite's dialect as the written form: every existing statement is already in it, both engines read
it with one mechanical change (``?`` becomes ``%s``, a literal ``%`` becomes ``%%``), and the statements
that truly differ are few enough to branch on ``dialect`` where they are.

**SQLite** (:class:`SQLiteDatabase`) keeps what :mod:`gitmem.engine.thread_db` guarantees: one
connection per thread (a transaction belongs to a connection; a shared one let one thread's rollback
end another's transaction), writers of a process taking turns on one lock per file, other processes
meeting SQLite's own lock. ``durable=False`` is for what is rebuildable (indexes): ``synchronous=NORMAL``.

**PostgreSQL** (:class:`PostgresDatabase`) uses psycopg 3 with a :class:`psycopg_pool.ConnectionPool`:
a read outside a transaction borrows a connection for one autocommit statement and returns it with the
rows fetched; a transaction keeps one connection until it ends. Transactions run at READ COMMITTED,
so code that must not race (a count before an insert) takes a :meth:`Transaction.lock` first: the
catalog takes one lock for every write (:data:`CATALOG_LOCK`), which is what SQLite's file lock gave.
Listening (:meth:`PostgresDatabase.listen`) uses one dedicated connection a process, outside the pool.

See docs/architecture.md ("Where the rows live").
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import re
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

from gitmem.engine.thread_db import ThreadConnections

log = logging.getLogger(__name__)

Dialect = Literal["sqlite", "postgresql"]
Params = Sequence[Any]
CATALOG_LOCK = "gitmem:catalog"
LOCK_TIMEOUT_SECONDS = 30.0  # a lock or a busy database waited for longer than this is an error


class Result(Protocol):
    """What :meth:`Database.execute` returns: ``sqlite3.Cursor`` has this shape, and so does :class:`Rows`."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Transaction(Protocol):
    """The handle ``with db.transaction() as tx`` gives."""

    def execute(self, sql: str, params: Params = ()) -> Result: ...

    def executemany(self, sql: str, rows: Iterable[Params]) -> Result: ...

    def executescript(self, script: str) -> None: ...

    def lock(self, key: str) -> None: ...

    def notify(self, channel: str, payload: str = "") -> None: ...


def sqlite_statements(script: str) -> list[str]:
    """A script cut into whole statements (a trigger's body keeps its own semicolons)."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


class Database(ABC):
    """See the module docstring. One object a process and a database, shared by its threads."""

    dialect: Dialect
    #: What an operator may be shown: a path, or the URL without its password.
    display_name: str

    @abstractmethod
    def execute(self, sql: str, params: Params = ()) -> Result: ...

    @abstractmethod
    def executemany(self, sql: str, rows: Iterable[Params]) -> Result: ...

    @abstractmethod
    def executescript(self, script: str) -> None:
        """Several statements without parameters (schemas), in one transaction."""

    @abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[Transaction]: ...

    @abstractmethod
    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(payload)`` for every notification on ``channel`` committed by any process
        (PostgreSQL) or by this process (SQLite, where no other node exists to tell)."""

    @abstractmethod
    def close(self) -> None: ...

    def in_transaction(self) -> bool:
        """Whether this thread is inside :meth:`transaction`."""
        return False


# -- SQLite ------------------------------------------------------------------------------------------


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
    """A SQLite file through :class:`~gitmem.engine.thread_db.ThreadConnections`."""

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
        quick = getattr(self._local, "quick", None)
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


# -- PostgreSQL --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def to_postgres(sql: str) -> str:
    """SQLite's form of a statement in psycopg's: ``?`` outside quotes becomes ``%s``, ``%`` becomes ``%%``."""
    out: list[str] = []
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        out.append("%%" if ch == "%" else ch)
    return "".join(out)


class Row(tuple):
    """A row read by position and by column name, like ``sqlite3.Row`` (one subclass a column list)."""

    _index: dict[str, int] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


@functools.lru_cache(maxsize=512)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"_index": {name: i for i, name in enumerate(names)}})


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    row_class = _row_class(tuple(c.name for c in cursor.description or ()))
    return lambda values: row_class(values)


class Rows:
    """A statement's rows, fetched before its connection went back to the pool."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self._next = 0

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rest, self._next = self._rows[self._next :], len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


def _run(conn: Any, sql: str, params: Params) -> Rows:
    cursor = conn.execute(to_postgres(sql), tuple(params))
    rows = cursor.fetchall() if cursor.description is not None else []
    return Rows(rows, cursor.rowcount)


def lock_id(key: str) -> int:
    """A key's 64-bit advisory lock number (signed, as PostgreSQL's ``bigint``)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


class _PostgresTransaction:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Params = ()) -> Rows:
        return _run(self.conn, sql, params)

    def executemany(self, sql: str, rows: Iterable[Params]) -> Rows:
        with self.conn.cursor() as cursor:
            cursor.executemany(to_postgres(sql), [tuple(r) for r in rows])
            return Rows([], cursor.rowcount)

    def executescript(self, script: str) -> None:
        self.conn.execute(script)  # no parameters: psycopg sends it as one simple query

    def lock(self, key: str) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id(key),))

    def notify(self, channel: str, payload: str = "") -> None:
        self.conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


def redact_url(url: str) -> str:
    """The URL with its password (if any) replaced by ``***``: what logs and messages may show."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://***"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresDatabase(Database):
    """PostgreSQL through a psycopg 3 connection pool."""

    dialect: Dialect = "postgresql"

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 16, application_name: str = "gitmem") -> None:
        import psycopg
        from psycopg_pool import ConnectionPool

        self.url = url
        self.display_name = redact_url(url)
        self._psycopg = psycopg
        options = f"-c lock_timeout={int(LOCK_TIMEOUT_SECONDS * 1000)}"
        # One plain connection first: an unreachable server or a wrong password fails here at once, with
        # psycopg's reason, where the pool would keep retrying until its timeout.
        psycopg.connect(url, connect_timeout=10).close()
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={
                "autocommit": True,
                "row_factory": _row_factory,
                "application_name": application_name,
                "options": options,
            },
            timeout=LOCK_TIMEOUT_SECONDS,
            name="gitmem",
            open=False,
        )
        self.pool.open(wait=True, timeout=LOCK_TIMEOUT_SECONDS)
        self._local = threading.local()
        self._listener: _Listener | None = None
        self._listener_guard = threading.Lock()

    def _current(self) -> Any:
        return getattr(self._local, "conn", None)

    def execute(self, sql: str, params: Params = ()) -> Rows:
        conn = self._current()
        if conn is not None:
            return _run(conn, sql, params)
        with self.pool.connection() as conn:
            return _run(conn, sql, params)

    def executemany(self, sql: str, rows: Iterable[Params]) -> Rows:
        with self.transaction() as tx:
            return tx.executemany(sql, rows)

    def executescript(self, script: str) -> None:
        with self.transaction() as tx:
            tx.executescript(script)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[_PostgresTransaction]:
        if self._current() is not None:
            raise RuntimeError("a transaction is open on this thread already")
        with self.pool.connection() as conn, conn.transaction():
            self._local.conn = conn
            try:
                yield _PostgresTransaction(conn)
            finally:
                self._local.conn = None

    def in_transaction(self) -> bool:
        return self._current() is not None

    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        with self._listener_guard:
            if self._listener is None:
                self._listener = _Listener(self.url)
            self._listener.add(channel, callback)

    def close(self) -> None:
        with self._listener_guard:
            if self._listener is not None:
                self._listener.stop()
                self._listener = None
        self.pool.close()


class _Listener:
    """One connection that LISTENs for this process, and a thread that calls the callbacks.

    If the connection drops, every callback is called with ``"*"`` (something may have been missed)
    once it is back, so a cache that listens starts afresh rather than trusting what it holds."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.callbacks: dict[str, list[Callable[[str], None]]] = {}
        self.guard = threading.Lock()
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.conn: Any = None
        self.thread = threading.Thread(target=self._run, name="gitmem-listen", daemon=True)
        self.thread.start()

    def add(self, channel: str, callback: Callable[[str], None]) -> None:
        with self.guard:
            fresh = channel not in self.callbacks
            self.callbacks.setdefault(channel, []).append(callback)
        if fresh:
            self._subscribe([channel])

    def _subscribe(self, channels: Iterable[str]) -> None:
        import psycopg
        from psycopg import sql

        # LISTEN from another thread than the one waiting in notifies(): a second short connection
        # would not do (a listener is per connection), so ask the waiting connection to wake and listen.
        self.ready.wait(LOCK_TIMEOUT_SECONDS)
        with self.guard:
            conn = self.conn
        if conn is None:
            return  # the thread subscribes every channel when it (re)connects
        with contextlib.suppress(psycopg.Error):
            for channel in channels:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

    def _run(self) -> None:
        import psycopg
        from psycopg import sql

        first = True
        while not self.stopping.is_set():
            try:
                conn = psycopg.connect(self.url, autocommit=True)
            except psycopg.Error:
                log.warning("cannot connect to listen for changes; retrying")
                self.stopping.wait(1.0)
                continue
            with self.guard:
                self.conn = conn
                channels = list(self.callbacks)
            try:
                for channel in channels:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                self.ready.set()
                if not first:
                    self._fire_all("*")
                first = False
                while not self.stopping.is_set():
                    for note in conn.notifies(timeout=0.5):
                        self._fire(note.channel, note.payload)
            except psycopg.Error:
                if not self.stopping.is_set():
                    log.warning("the change listener lost its connection; reconnecting")
            finally:
                with self.guard:
                    self.conn = None
                with contextlib.suppress(psycopg.Error):
                    conn.close()

    def _fire(self, channel: str, payload: str) -> None:
        for callback in list(self.callbacks.get(channel, ())):
            try:
                callback(payload)
            except Exception:
                log.exception("a listener of %s failed", channel)

    def _fire_all(self, payload: str) -> None:
        for channel in list(self.callbacks):
            self._fire(channel, payload)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)


# -- choosing one ------------------------------------------------------------------------------------

_URL = re.compile(r"^postgres(ql)?://", re.IGNORECASE)


def is_postgres_url(value: str) -> bool:
    return bool(_URL.match(value))


def open_database(url: str | None, sqlite_path: Path) -> Database:
    """PostgreSQL at ``url`` if one is given, else the SQLite file ``sqlite_path``."""
    if url:
        return PostgresDatabase(url)
    return SQLiteDatabase(sqlite_path)


def database_errors() -> tuple[type[Exception], ...]:
    """Errors of either engine that mean the storage failed (not the request)."""
    import psycopg

    return (sqlite3.Error, psycopg.Error)


def integrity_errors() -> tuple[type[Exception], ...]:
    """A unique key or another constraint refused the change, on either engine."""
    import psycopg

    return (sqlite3.IntegrityError, psycopg.IntegrityError)


__all__ = [
    "CATALOG_LOCK",
    "Database",
    "PostgresDatabase",
    "Result",
    "Row",
    "SQLiteDatabase",
    "Transaction",
    "database_errors",
    "integrity_errors",
    "is_postgres_url",
    "lock_id",
    "open_database",
    "redact_url",
    "sqlite_statements",
    "to_postgres",
]
