"""The storage interface (gitmem/db.py) on SQLite and on a throwaway PostgreSQL."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem.db import (
    Database,
    PostgresDatabase,
    SQLiteDatabase,
    integrity_errors,
    open_database,
    redact_url,
    to_postgres,
)
from gitmem.db.postgres import POOL_WAIT_SECONDS


@pytest.fixture
def db(database_url: str | None, tmp_path: Path) -> Iterator[Database]:
    found = open_database(database_url, tmp_path / "db.sqlite3")
    integer = "BIGINT" if found.dialect == "postgresql" else "INTEGER"
    found.executescript(f"CREATE TABLE t (k TEXT PRIMARY KEY, n {integer} NOT NULL, note TEXT);")
    yield found
    found.close()


def test_placeholders_are_translated_outside_quotes_only() -> None:
    assert to_postgres("SELECT ? WHERE a LIKE 'x?%' AND b=?") == "SELECT %s WHERE a LIKE 'x?%%' AND b=%s"
    assert to_postgres('SELECT "?"') == 'SELECT "?"'


def test_rows_read_by_position_and_name(db: Database) -> None:
    with db.transaction() as tx:
        tx.executemany("INSERT INTO t (k, n) VALUES (?, ?)", [("a", 1), ("b", 2)])
    row = db.execute("SELECT k, n, note FROM t WHERE k=?", ("b",)).fetchone()
    assert (row[0], row["n"], row["note"]) == ("b", 2, None)
    k, n, _ = row
    assert (k, n) == ("b", 2)
    assert dict(db.execute("SELECT k, n FROM t ORDER BY k").fetchall()) == {"a": 1, "b": 2}
    assert [r["k"] for r in db.execute("SELECT k FROM t WHERE k LIKE 'a%' ORDER BY k")] == ["a"]
    assert db.execute("SELECT k FROM t WHERE k='zz'").fetchone() is None
    assert db.execute("UPDATE t SET n=n+1").rowcount == 2


def test_a_failed_transaction_changes_nothing(db: Database) -> None:
    with pytest.raises(ZeroDivisionError), db.transaction() as tx:  # noqa: PT012  the transaction's block is what is refused
        tx.execute("INSERT INTO t (k, n) VALUES ('a', 1)")
        assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 1  # the thread sees its own write
        raise ZeroDivisionError
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 0


def test_upserts_and_integrity_errors(db: Database) -> None:
    with db.transaction() as tx:
        tx.execute("INSERT INTO t (k, n) VALUES ('a', 1)")
        assert tx.execute("INSERT INTO t (k, n) VALUES (?, ?) ON CONFLICT DO NOTHING", ("a", 2)).rowcount == 0
        tx.execute("INSERT INTO t (k, n) VALUES ('b', 1) ON CONFLICT (k) DO UPDATE SET n=excluded.n WHERE t.n<>?", (5,))
    with pytest.raises(integrity_errors()), db.transaction() as tx:
        tx.execute("INSERT INTO t (k, n) VALUES ('a', 3)")
    assert db.execute("SELECT n FROM t").fetchone()[0] == 1


def test_a_deferred_write_that_fails_at_the_commit_fails_the_transaction(postgres_url: str) -> None:
    """A deferred statement goes to PostgreSQL with the ``COMMIT``, in one round trip: its error is
    raised there, nothing of the transaction stays, and the connection serves again."""
    db = PostgresDatabase(postgres_url, max_size=2)
    try:
        db.executescript("CREATE TABLE deferred (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
        db.execute("INSERT INTO deferred (k, n) VALUES ('a', 1)")
        for _ in range(3):  # every pooled connection that took part is clean afterwards
            with pytest.raises(integrity_errors()), db.transaction() as tx:  # noqa: PT012  the transaction's block is what is refused
                tx.execute("INSERT INTO deferred (k, n) VALUES ('b', 2)")
                db.defer("INSERT INTO deferred (k, n) VALUES ('a', 3)")
        assert dict(db.execute("SELECT k, n FROM deferred").fetchall()) == {"a": 1}
        with db.transaction():
            db.defer("INSERT INTO deferred (k, n) VALUES ('c', 4)")
        assert dict(db.execute("SELECT k, n FROM deferred ORDER BY k").fetchall()) == {"a": 1, "c": 4}
    finally:
        db.close()


def test_the_lock_makes_read_modify_write_exact_across_threads(db: Database) -> None:
    """Eight threads each add one 20 times, reading then writing: with the lock no increment is lost."""
    with db.transaction() as tx:
        tx.execute("INSERT INTO t (k, n) VALUES ('counter', 0)")

    def bump() -> None:
        for _ in range(20):
            with db.transaction() as tx:
                tx.lock("counter")
                (n,) = tx.execute("SELECT n FROM t WHERE k='counter'").fetchone()
                tx.execute("UPDATE t SET n=? WHERE k='counter'", (n + 1,))

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.execute("SELECT n FROM t WHERE k='counter'").fetchone()[0] == 160


def test_notifications_reach_listeners_after_commit_only(db: Database, database_url: str | None) -> None:
    got: list[str] = []
    seen = threading.Event()

    def heard(payload: str) -> None:
        got.append(payload)
        seen.set()

    other = open_database(database_url, Path(getattr(db, "path", "unused"))) if database_url else db
    try:
        other.listen("changes", heard)
        with pytest.raises(RuntimeError), db.transaction() as tx:  # noqa: PT012  the transaction's block is what is refused
            tx.notify("changes", "rolled-back")
            raise RuntimeError
        with db.transaction() as tx:
            tx.notify("changes", "k1")
        assert seen.wait(5)
        time.sleep(0.1)
        assert got == ["k1"]
    finally:
        if other is not db:
            other.close()


def test_the_password_never_shows(postgres_url: str) -> None:
    assert redact_url("postgresql://gm:s3cret@db.example:5432/gitmem") == "postgresql://gm:***@db.example:5432/gitmem"
    db = PostgresDatabase(postgres_url)
    try:
        assert "s3cret" not in db.display_name
        assert db.dialect == "postgresql"
    finally:
        db.close()


def test_sqlite_keeps_one_connection_per_thread(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "x.sqlite3")
    seen: list[object] = []
    t = threading.Thread(target=lambda: seen.append(db.conn))
    t.start()
    t.join()
    assert seen[0] is not db.conn
    db.close()


def test_a_nested_transaction_is_refused_not_deadlocked(db: Database) -> None:
    with db.transaction(), pytest.raises(RuntimeError, match="open on this thread"), db.transaction():
        pass


def test_a_connection_past_descriptor_1023_is_used(postgres_url: str) -> None:
    """A server holding thousands of stores has descriptors past 1,023 (``gitmem serve`` raises its
    limit), and ``select`` refuses those: the check of an idle pooled connection must not."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit of open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # the next sockets land past 1,023
    db = PostgresDatabase(postgres_url, max_size=1)
    try:
        for _ in range(2):  # the second takes the idle connection back from the pool: the hang-up check
            with db.connection() as conn:
                assert conn.fileno() > 1023
                assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        db.close()
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_hung_up_connection_handed_over_after_a_wait_does_not_start_a_second_wait(postgres_url: str) -> None:
    """The pool's one connection is held for 1.5 s, and the server hangs up on it before it comes back:
    the waiter it goes to drops it and waits again, behind another waiter who takes its replacement.
    Both waits together stay within the pool's wait (a request was answered 503 after two, 6 s)."""
    import psycopg
    import psycopg_pool

    db = PostgresDatabase(postgres_url, max_size=1)
    holding, second_waiting = threading.Event(), threading.Event()
    timings: dict[str, float] = {}

    def holder() -> None:
        with db.connection() as conn:
            holding.set()
            second_waiting.wait(10)
            time.sleep(1.0)
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
            time.sleep(0.2)  # the server's hang-up reaches the socket

    def other() -> None:  # queued behind the waiter: the replacement connection is its, for 2.5 s
        time.sleep(0.2)
        second_waiting.set()
        with db.connection():
            time.sleep(2.5)

    def waiter() -> None:
        holding.wait(10)
        began = time.monotonic()
        try:
            with db.connection():
                timings["got"] = time.monotonic() - began
        except psycopg_pool.PoolTimeout:
            timings["refused"] = time.monotonic() - began

    threads = [threading.Thread(target=f) for f in (holder, waiter, other)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert "refused" in timings, timings  # the replacement went to the other waiter
        assert timings["refused"] < POOL_WAIT_SECONDS + 0.5, timings
    finally:
        db.close()
