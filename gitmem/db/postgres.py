"""The PostgreSQL side of :mod:`gitmem.db`: psycopg 3 with a connection pool.

A read outside a transaction borrows a pooled connection for one autocommit statement and returns it
with the rows fetched (:class:`Rows`); a transaction keeps one connection until it ends, and the
thread's other reads join it. Rows read by name and position (:class:`Row`, like ``sqlite3.Row``).
Statements arrive in SQLite's form and :func:`to_postgres` rewrites their placeholders. Listening uses
one dedicated connection a process (:class:`_Listener`), outside the pool.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gitmem.db.interface import LOCK_TIMEOUT_SECONDS, Database, Dialect, Params

log = logging.getLogger(__name__)


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


# libpq's PGRES_TUPLES_OK (psycopg.pq.ExecStatus.TUPLES_OK): psycopg is imported only when used.
_TUPLES_OK = 2


@functools.lru_cache(maxsize=512)
def _row_class(names: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"_index": {name: i for i, name in enumerate(names)}})


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    result = cursor.pgresult  # the column names without cursor.description's column objects
    names = () if result is None else tuple(result.fname(i).decode() for i in range(result.nfields))
    row_class = _row_class(names)
    return lambda values: row_class(values)


def returns_rows(cursor: Any) -> bool:
    """Whether the cursor's statement returned rows (``cursor.description is not None`` answers the
    same, but builds an object a column: several microseconds a statement, a dozen statements a write)."""
    result = cursor.pgresult
    return result is not None and result.status == _TUPLES_OK


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
    rows = cursor.fetchall() if returns_rows(cursor) else []
    return Rows(rows, cursor.rowcount)


def run_all(conn: Any, statements: Sequence[tuple[str, Params]], before: Sequence[tuple[str, Any]] = ()) -> list[Rows]:
    """Each statement's rows, all sent in one pipeline (one round trip) after the ``before`` ones."""
    with conn.pipeline():
        for statement in before:
            conn.execute(*statement)
        cursors = [conn.execute(to_postgres(sql), tuple(params)) for sql, params in statements]
    return [Rows(c.fetchall() if returns_rows(c) else [], c.rowcount) for c in cursors]


def lock_id(key: str) -> int:
    """A key's 64-bit advisory lock number (signed, as PostgreSQL's ``bigint``)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big", signed=True)


class _PostgresTransaction:
    def __init__(self, database: PostgresDatabase, conn: Any, opened: Rows | None = None) -> None:
        self.database = database
        self.conn = conn
        self.opened = opened  # the rows of the transaction's first read, if it was given one

    def execute(self, sql: str, params: Params = ()) -> Rows:
        return self.database.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Params]) -> Rows:
        self.database.flush_deferred()
        with self.conn.cursor() as cursor:
            cursor.executemany(to_postgres(sql), [tuple(r) for r in rows])
            return Rows([], cursor.rowcount)

    def executescript(self, script: str) -> None:
        self.database.flush_deferred()
        self.conn.execute(script)  # no parameters: psycopg sends it as one simple query

    def lock(self, key: str) -> None:
        self.execute("SELECT pg_advisory_xact_lock(?)", (lock_id(key),))

    def notify(self, channel: str, payload: str = "") -> None:
        self.execute("SELECT pg_notify(?, ?)", (channel, payload))
        self.database._local.notified.append((channel, payload))


@contextlib.contextmanager
def begun(
    conn: Any,
    opening: tuple[str, Params] | None,
    deferred: list[tuple[str, tuple[Any, ...]]],
    read: tuple[str, Params] | None = None,
) -> Iterator[Rows | None]:
    """A transaction on an autocommit connection whose ``BEGIN`` and ``opening`` (a statement whose
    rows nobody reads) go in one round trip, as do the statements still ``deferred`` at the end and
    the ``COMMIT``; rolled back on an error. (psycopg's ``conn.transaction()`` entered in a pipeline
    keeps the pipeline until it ends, where a read waits for its rows.) Yields the rows of ``read``,
    sent in the same round trip after ``opening`` (so it sees what committed before the locks were had)."""
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            if opening is not None:
                conn.execute(to_postgres(opening[0]), tuple(opening[1]))
            cursor = conn.execute(to_postgres(read[0]), tuple(read[1])) if read is not None else None
        yield Rows(cursor.fetchall(), cursor.rowcount) if cursor is not None else None
        with conn.pipeline():
            for statement in deferred:
                conn.execute(*statement)
            # Not conn.commit(): in a pipeline it syncs and waits, and leaving the pipeline does it again.
            conn.execute("COMMIT")
    except BaseException:
        deferred.clear()
        conn.rollback()
        raise


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
            return self._after_deferred(conn, sql, params)
        with self.pool.connection() as conn:
            return _run(conn, sql, params)

    def defer(self, sql: str, params: Params = ()) -> None:
        """A statement whose rows and row count nobody reads: in a transaction, sent with the next
        statement (or the ``COMMIT``) in one round trip, and its error raised there; else run now."""
        if self._current() is None:
            self.execute(sql, params)
        else:
            self._local.deferred.append((to_postgres(sql), tuple(params)))

    def flush_deferred(self) -> None:
        """Send the statements this thread's transaction deferred (before one that bypasses them)."""
        conn, deferred = self._current(), getattr(self._local, "deferred", [])
        if conn is not None and deferred:
            with conn.pipeline():
                for statement in deferred:
                    conn.execute(*statement)
            deferred.clear()

    def read_all(self, statements: Sequence[tuple[str, Params]]) -> list[Rows]:
        """Each statement's rows, in one round trip (in this thread's transaction if one is open)."""
        conn = self._current()
        if conn is None:
            with self.pool.connection() as conn:
                return run_all(conn, statements)
        deferred = self._local.deferred  # the transaction's own list: emptied, never replaced
        sent = list(deferred)
        deferred.clear()
        return run_all(conn, statements, sent)

    def _after_deferred(self, conn: Any, sql: str, params: Params) -> Rows:
        if not self._local.deferred:
            return _run(conn, sql, params)
        return self.read_all([(sql, params)])[0]

    def executemany(self, sql: str, rows: Iterable[Params]) -> Rows:
        with self.transaction() as tx:
            return tx.executemany(sql, rows)

    def executescript(self, script: str) -> None:
        with self.transaction() as tx:
            tx.executescript(script)

    @contextlib.contextmanager
    def transaction(
        self, opening: tuple[str, Params] | None = None, read: tuple[str, Params] | None = None
    ) -> Iterator[_PostgresTransaction]:
        """A transaction on one pooled connection, committed on success. ``opening``, a statement whose
        rows nobody reads (taking locks, settings), is sent with ``BEGIN`` in one round trip; its
        error (a lock timeout) is raised here, and the transaction rolled back."""
        if self._current() is not None:
            raise RuntimeError("a transaction is open on this thread already")
        self._local.deferred, self._local.notified = [], []
        with self.pool.connection() as conn, begun(conn, opening, self._local.deferred, read) as rows:
            self._local.conn = conn
            try:
                yield _PostgresTransaction(self, conn, rows)
            finally:
                self._local.conn = None
        # This process's own listeners hear of the commit at once, before its NOTIFY comes back.
        listener = self._listener
        if listener is not None:
            for channel, payload in self._local.notified:
                listener.fire(channel, payload)

    def in_transaction(self) -> bool:
        return self._current() is not None

    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        with self._listener_guard:
            if self._listener is None:
                self._listener = _Listener(self.url)
            self._listener.add(channel, callback)

    def delivers_changes(self) -> bool:
        listener = self._listener
        return listener is not None and listener.trusted

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
        # True from the moment every channel is listened to and the callbacks have been told to start
        # afresh, until the connection drops: only then is a cache kept by listening up to date.
        self.trusted = False
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
                self.trusted = True
                while not self.stopping.is_set():
                    for note in conn.notifies(timeout=0.5):
                        self.fire(note.channel, note.payload)
            except psycopg.Error:
                if not self.stopping.is_set():
                    log.warning("the change listener lost its connection; reconnecting")
            finally:
                self.trusted = False
                with self.guard:
                    self.conn = None
                with contextlib.suppress(psycopg.Error):
                    conn.close()

    def fire(self, channel: str, payload: str) -> None:
        for callback in list(self.callbacks.get(channel, ())):
            try:
                callback(payload)
            except Exception:
                log.exception("a listener of %s failed", channel)

    def _fire_all(self, payload: str) -> None:
        for channel in list(self.callbacks):
            self.fire(channel, payload)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)
