"""SQLite files shared by threads (gitmem.db.thread_connections)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from gitmem.db.thread_connections import ThreadConnections

THREADS = 8


def open_at_once(path: Path) -> tuple[list[str], list[sqlite3.Error]]:
    """``THREADS`` threads, each with its own :class:`ThreadConnections` on ``path``, write at once;
    the journal mode each then sees, and the errors they met."""
    files = [ThreadConnections(path) for _ in range(THREADS)]
    start = threading.Barrier(THREADS)
    modes: list[str] = []
    errors: list[sqlite3.Error] = []

    def open_and_write(files: ThreadConnections) -> None:
        start.wait()
        try:
            with files.transaction() as db:
                db.execute("CREATE TABLE IF NOT EXISTS t (x)")
                db.execute("INSERT INTO t VALUES (1)")
            modes.append(files.get().execute("PRAGMA journal_mode").fetchone()[0])
        except sqlite3.Error as exc:
            errors.append(exc)

    workers = [threading.Thread(target=open_and_write, args=(each,)) for each in files]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for each in files:
        each.close()
    return modes, errors


def test_threads_opening_a_new_file_at_once_all_get_a_wal_connection(tmp_path: Path) -> None:
    """Turning a new file to WAL takes an exclusive lock that SQLite refuses at once, without waiting,
    to a second connection trying at the same moment (two threads opening a new store's index)."""
    for trial in range(30):
        path = tmp_path / f"{trial}.sqlite3"
        modes, errors = open_at_once(path)
        assert errors == []
        assert modes == ["wal"] * THREADS
        with sqlite3.connect(path) as check:
            assert check.execute("SELECT count(*) FROM t").fetchone()[0] == THREADS
