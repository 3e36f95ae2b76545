"""SQLite files shared by threads (gitmem.db.thread_connections)."""

from __future__ import annotations

import contextlib
import os
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


def descriptors_of(path: Path) -> int:
    """This process's open descriptors of ``path`` itself (not its ``-wal`` or ``-shm``)."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            found += os.readlink(f"/proc/self/fd/{fd}") == str(path)
    return found


def used_at_once(files: ThreadConnections, threads: int) -> None:
    """``threads`` threads read ``files`` at once, each on a connection of its own."""
    together = threading.Barrier(threads)

    def read() -> None:
        files.get().execute("SELECT count(*) FROM t").fetchone()
        together.wait(timeout=10)  # every thread holds its connection at this moment

    workers = [threading.Thread(target=read) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def test_parking_after_two_threads_keeps_one_connection_and_makes_no_checkpoint(tmp_path: Path) -> None:
    """A file two threads used at once is parked without the checkpoint a last close makes (two flushes,
    while the caller holds the lock of every open store): the log keeps its pages, and the next thread
    takes the connection kept for it, opening none."""
    files = ThreadConnections(tmp_path / "index.sqlite3")
    with files.transaction() as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (1)")
    files.park()
    wal = tmp_path / "index.sqlite3-wal"
    logged = wal.stat().st_size
    used_at_once(files, 2)
    assert files.open_connections == 2
    files.park()
    assert files.open_connections == 1
    assert wal.stat().st_size == logged > 0  # a checkpoint on the way out would have cut it to nothing
    # SQLite keeps the closed one's descriptor of the file and gives it to the next connection there:
    # parking after two threads again and again keeps two, not one more each time.
    assert descriptors_of(files.path) == 2
    for _ in range(3):
        used_at_once(files, 2)
        files.park()
    assert descriptors_of(files.path) == 2
    kept: list[sqlite3.Connection] = []
    taker = threading.Thread(target=lambda: kept.append(files.get()))
    taker.start()
    taker.join()
    assert files.open_connections == 1 and kept[0].execute("SELECT x FROM t").fetchone()[0] == 1
    files.close()
    assert not wal.exists()  # the last close checkpoints, and SQLite removes the log


def test_parking_after_many_threads_closes_every_connection(tmp_path: Path) -> None:
    """Past the descriptors a file may keep for connections closed beside an open one, parking closes them
    all: a file that eight threads used at once keeps no descriptor of theirs."""
    files = ThreadConnections(tmp_path / "index.sqlite3")
    with files.transaction() as db:
        db.execute("CREATE TABLE t (x)")
    files.park()  # this thread's connection goes to one of theirs
    used_at_once(files, THREADS)
    assert files.open_connections == THREADS
    files.park()
    assert files.open_connections == 0
    assert not (tmp_path / "index.sqlite3-wal").exists()
