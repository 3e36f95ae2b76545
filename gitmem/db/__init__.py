"""One storage interface for everything that is not a Git object: SQLite beside the repositories, or
PostgreSQL.

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
  (``BIGINT`` and identity keys, triggers as PL/pgSQL functions: :mod:`gitmem.db.migrations`) and
  JSON functions. ``INSERT OR IGNORE``/``OR REPLACE`` are written ``INSERT ... ON CONFLICT DO NOTHING``
  / ``DO UPDATE SET``, which both engines read (qualify the table's own columns in its ``WHERE``).

Why SQLite's dialect as the written form: every existing statement is already in it, both engines read
it with one mechanical change (``?`` becomes ``%s``, a literal ``%`` becomes ``%%``), and the statements
that truly differ are few enough to branch on ``dialect`` where they are.

**SQLite** (:class:`SQLiteDatabase`) keeps what :mod:`gitmem.db.thread_connections` guarantees: one
connection per thread (a transaction belongs to a connection; a shared one let one thread's rollback
end another's transaction), writers of a process taking turns on one lock per file, other processes
meeting SQLite's own lock. ``durable=False`` is for what is rebuildable (indexes): ``synchronous=NORMAL``.

**PostgreSQL** (:class:`PostgresDatabase`) uses psycopg 3 with a :class:`psycopg_pool.ConnectionPool`:
a read outside a transaction borrows a connection for one autocommit statement and returns it with the
rows fetched; a transaction keeps one connection until it ends. Transactions run at READ COMMITTED,
so code that must not race (a count before an insert) takes a :meth:`Transaction.lock` first: the
catalog takes one lock for every write (:data:`CATALOG_LOCK`), which is what SQLite's file lock gave.
Listening (:meth:`PostgresDatabase.listen`) uses one dedicated connection a process, outside the pool.

Here: the interface (:mod:`.interface`), its two sides (:mod:`.sqlite`, :mod:`.postgres`, with its
statements and rows in :mod:`.pg_rows` and its listening connection in :mod:`.pg_listener`), the
per-thread connections (:mod:`.thread_connections`), the process's file descriptors and what gives
them back when they run out (:mod:`.descriptors`), migrations (:mod:`.migrations`), background rounds
run once across a home (:mod:`.jobs`) and page tokens (:mod:`.page_tokens`). See docs/architecture.md
("Where the rows live").
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit

from gitmem.db.interface import (
    CATALOG_LOCK,
    LOCK_TIMEOUT_SECONDS,
    Database,
    Dialect,
    Params,
    Result,
    Transaction,
    sqlite_statements,
)
from gitmem.db.postgres import PostgresDatabase, Row, Rows, lock_id, redact_url, to_postgres
from gitmem.db.sqlite import SQLiteDatabase

_URL = re.compile(r"^postgres(ql)?://", re.IGNORECASE)


def is_postgres_url(value: str) -> bool:
    return bool(_URL.match(value))


def check_database_url(url: str) -> None:
    """``ValueError`` naming what is wrong with a database URL, never repeating it (it may hold a password)."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError:
        raise ValueError("is not a URL") from None
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise ValueError("is not a postgresql:// URL (leave it unset for SQLite in the home)")
    if not parts.hostname and "host=" not in parts.query:
        raise ValueError("names no host")
    if not parts.path.strip("/"):
        raise ValueError("names no database")


def open_database(url: str | None, sqlite_path: Path) -> Database:
    """PostgreSQL at ``url`` if one is given, else the SQLite file ``sqlite_path``."""
    if url:
        return PostgresDatabase(url)
    return SQLiteDatabase(sqlite_path)


def database_errors() -> tuple[type[Exception], ...]:
    """Errors of either engine that mean the storage failed (not the request)."""
    import psycopg

    return (sqlite3.Error, psycopg.Error)


def connection_errors() -> tuple[type[Exception], ...]:
    """What a statement raises when it cannot reach PostgreSQL (and some refusals of the server's:
    :func:`database_unreachable` tells them apart)."""
    import psycopg

    return (psycopg.OperationalError,)


# SQLSTATEs of a server that is going away or not yet there: admin, crash and "cannot connect now".
_GOING_AWAY = frozenset({"57P01", "57P02", "57P03"})


def database_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached (no connection in time, a connection cut,
    the server shutting down or starting up): a retry may succeed once it is back. A lock timeout, a
    cancelled statement or a constraint is the server's answer, not this."""
    import psycopg
    import psycopg_pool

    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg_pool.TooManyRequests):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    sqlstate = exc.sqlstate
    # No SQLSTATE: the client's own report (connection refused, closed, timed out): no server answered.
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in _GOING_AWAY


def integrity_errors() -> tuple[type[Exception], ...]:
    """A unique key or another constraint refused the change, on either engine."""
    import psycopg

    return (sqlite3.IntegrityError, psycopg.IntegrityError)


__all__ = [
    "CATALOG_LOCK",
    "LOCK_TIMEOUT_SECONDS",
    "Database",
    "Dialect",
    "Params",
    "PostgresDatabase",
    "Result",
    "Row",
    "Rows",
    "SQLiteDatabase",
    "Transaction",
    "check_database_url",
    "connection_errors",
    "database_errors",
    "database_unreachable",
    "integrity_errors",
    "is_postgres_url",
    "lock_id",
    "open_database",
    "redact_url",
    "sqlite_statements",
    "to_postgres",
]
