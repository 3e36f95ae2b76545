"""The PostgreSQL side of :mod:`gitmem.db`: psycopg 3 with a connection pool.

A read outside a transaction borrows a pooled connection for one autocommit statement and returns it
with the rows fetched (:class:`Rows`); a transaction keeps one connection until it ends, and the
thread's other reads join it. Rows read by name and position (:class:`Row`, like ``sqlite3.Row``).
Statements arrive in SQLite's form and :func:`to_postgres` rewrites their placeholders. Listening uses
one dedicated connection a process (:class:`gitmem.db.pg_listener.Listener`), outside the pool.
Statements and rows: :mod:`gitmem.db.pg_rows`.

**When the server goes away** (a crash, a failover, a restart), nothing waits long: a connection attempt
gives up after ``CONNECT_TIMEOUT_SECONDS``, a request waits at most ``POOL_WAIT_SECONDS`` for a
connection (then ``PoolTimeout``), a statement on a cut connection fails at once, and TCP keepalives and
``tcp_user_timeout`` end one whose peer vanished without a word. :func:`gitmem.db.database_unreachable`
tells these from the server's own refusals, and the API answers them 503 with ``Retry-After``. An idle
pooled connection the server has hung up on is readable: it is dropped when taken
(:meth:`PostgresDatabase.connection`, one ``poll``), never used. The event loop's reads (a key's
lookup) take only an idle connection (:meth:`PostgresDatabase.without_waiting`), else go to a thread,
so no request waits behind another's wait. Coming back is quick: the pool's own reconnection backs off
1, 2, 4, 8 s ..., so a connection of ours keeps trying every ``RECONNECT_EVERY_SECONDS`` for
``RECONNECT_WINDOW_SECONDS`` first (:func:`_patient_connection`): the server is used again within a
fraction of a second of its return.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from gitmem.db.interface import LOCK_TIMEOUT_SECONDS, Database, Dialect, Params
from gitmem.db.pg_listener import Listener
from gitmem.db.pg_rows import Row, Rows, lock_id, returns_rows, row_factory, run, run_all, to_postgres

if TYPE_CHECKING:
    from psycopg import Connection

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 2  # libpq's connect_timeout: whole seconds
POOL_WAIT_SECONDS = 3.0  # a request waits this long for a connection, then is told to retry (503)
_NO_WAIT_SECONDS = 0.001
RECONNECT_EVERY_SECONDS = 0.25
RECONNECT_WINDOW_SECONDS = 20.0
# A peer that vanished (no FIN, no RST) ends a connection within about this many seconds.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 2}
_TCP_USER_TIMEOUT_MS = 10_000


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
        self._closing = threading.Event()
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            kwargs={
                "autocommit": True,
                "row_factory": row_factory,
                "application_name": application_name,
                "options": options,
                "connect_timeout": CONNECT_TIMEOUT_SECONDS,
                "tcp_user_timeout": _TCP_USER_TIMEOUT_MS,
                **_KEEPALIVES,
            },
            connection_class=_patient_connection(psycopg.Connection, self._closing),
            timeout=POOL_WAIT_SECONDS,
            name="gitmem",
            open=False,
        )
        self.pool.open(wait=True, timeout=LOCK_TIMEOUT_SECONDS)
        self._local = threading.local()
        self._listener: Listener | None = None
        self._listener_guard = threading.Lock()

    def _current(self) -> Any:
        return getattr(self._local, "conn", None)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection[Any]]:
        """A pooled connection the server has not hung up on (those are closed, and the pool replaces
        them). In :meth:`without_waiting`, only one that is idle now: else ``PoolTimeout`` at once. The
        tries share one wait: a hung-up connection handed over after a wait does not start another."""
        wait = _NO_WAIT_SECONDS if getattr(self._local, "no_wait", False) else self.pool.timeout
        deadline = time.monotonic() + wait
        for _ in range(self.pool.max_size + 1):
            with self.pool.connection(max(deadline - time.monotonic(), _NO_WAIT_SECONDS)) as conn:
                if _hung_up(conn):
                    conn.close()
                    continue
                yield conn
                return
        raise self._psycopg.OperationalError("every pooled connection was cut off")

    @contextlib.contextmanager
    def without_waiting(self) -> Iterator[None]:
        """Within it, this thread takes only a connection that is idle now (``PoolTimeout`` if none):
        for the event loop, which must not wait ``POOL_WAIT_SECONDS`` for a server that is away."""
        before = getattr(self._local, "no_wait", False)
        self._local.no_wait = True
        try:
            yield
        finally:
            self._local.no_wait = before

    def execute(self, sql: str, params: Params = ()) -> Rows:
        conn = self._current()
        if conn is not None:
            return self._after_deferred(conn, sql, params)
        with self.connection() as conn:
            return run(conn, sql, params)

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
            with self.connection() as conn:
                return run_all(conn, statements)
        deferred = self._local.deferred  # the transaction's own list: emptied, never replaced
        sent = list(deferred)
        deferred.clear()
        return run_all(conn, statements, sent)

    def _after_deferred(self, conn: Any, sql: str, params: Params) -> Rows:
        if not self._local.deferred:
            return run(conn, sql, params)
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
        with self.connection() as conn, begun(conn, opening, self._local.deferred, read) as rows:
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
                self._listener = Listener(self.url)
            self._listener.add(channel, callback)

    def delivers_changes(self) -> bool:
        listener = self._listener
        return listener is not None and listener.trusted

    def close(self) -> None:
        self._closing.set()  # a reconnection waiting for the server stops waiting
        with self._listener_guard:
            if self._listener is not None:
                self._listener.stop()
                self._listener = None
        self.pool.close()


def _hung_up(conn: Any) -> bool:
    """Whether the server hung up on this idle connection: an idle connection has nothing to read
    unless the server closed it (its socket at EOF, or a FATAL such as 57P01 waiting). One ``poll``, no
    round trip (``select`` refuses a descriptor past 1,023, and a server holding thousands of stores has
    them)."""
    if conn.closed or conn.broken:
        return True
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def _patient_connection(base: type[Connection[Any]], closing: threading.Event) -> type[Connection[Any]]:
    """``base`` whose ``connect`` keeps trying, every ``RECONNECT_EVERY_SECONDS`` for
    ``RECONNECT_WINDOW_SECONDS``, before it fails: the pool's own retries back off (1, 2, 4, 8 s ...),
    which left writes failing for seconds after the server was back. A pool worker waits in here,
    never a request (a request waits for the pool, at most ``POOL_WAIT_SECONDS``)."""
    import psycopg

    class PatientConnection(base):  # type: ignore[valid-type, misc]
        @classmethod
        def connect(cls, *args: Any, **kwargs: Any) -> Any:
            give_up = time.monotonic() + RECONNECT_WINDOW_SECONDS
            while True:
                try:
                    return super().connect(*args, **kwargs)
                except psycopg.OperationalError:
                    if closing.is_set() or time.monotonic() >= give_up:
                        raise
                    closing.wait(RECONNECT_EVERY_SECONDS)

    return PatientConnection


__all__ = [
    "PostgresDatabase",
    "Row",
    "Rows",
    "begun",
    "lock_id",
    "redact_url",
    "returns_rows",
    "run_all",
    "to_postgres",
]
