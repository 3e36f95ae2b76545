"""SQLite connections to one file, one per thread, and one write lock per file in the process.

A transaction belongs to a connection, so a connection shared by threads lets one thread's
``ROLLBACK`` end another's transaction. Here every thread opens its own connection on first use;
writers of one process take turns on a lock per file (SQLite's busy handler sleeps in growing
steps), and other processes meet SQLite's own lock.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

# WAL pages after which a commit checkpoints (SQLite's default is 1,000, i.e. a 4 MB WAL), and the size
# the WAL file is cut back to when it restarts: while written, the file's disk stays near its own size;
# once its writers are quiet, :func:`checkpoint` empties the WAL.
WAL_AUTOCHECKPOINT_PAGES = 64
WAL_SIZE_LIMIT_BYTES = 0
QUIET_CHECKPOINT_TIMEOUT = 1.0

BUSY_TIMEOUT_SECONDS = 30.0

_write_locks: dict[str, threading.Lock] = {}
_write_locks_guard = threading.Lock()


def write_lock(path: Path) -> threading.Lock:
    """The lock this process's writers of ``path`` take turns on."""
    key = str(path.resolve())
    with _write_locks_guard:
        return _write_locks.setdefault(key, threading.Lock())


class ThreadConnections:
    """A WAL-mode SQLite file seen through one connection per thread."""

    def __init__(self, path: Path, *, durable: bool = False) -> None:
        """``durable``: every commit reaches the disk (``synchronous=FULL``), for what nothing else can
        rebuild (the catalog); otherwise ``NORMAL``, for what Git can (indexes)."""
        self.path = path
        self.durable = durable
        self.write_lock = write_lock(path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_guard = threading.Lock()

    def get(self) -> sqlite3.Connection:
        """This thread's connection."""
        db = getattr(self._local, "db", None)
        if db is None:
            # check_same_thread=False only so that close() may close it from another thread.
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            self._use_wal(db)
            if self.durable:
                db.execute("PRAGMA synchronous=FULL")
                db.execute("PRAGMA foreign_keys=ON")
            else:
                db.execute("PRAGMA synchronous=NORMAL")  # what it holds is rebuildable; Git holds durability
            db.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
            db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
            with self._all_guard:
                self._all.append(db)
            self._local.db = db
        return db

    def _use_wal(self, db: sqlite3.Connection) -> None:
        """WAL mode, which the file keeps once it is set. Setting it on a new file takes an exclusive
        lock, and SQLite answers a second connection that tries at the same moment "database is locked"
        at once, without its busy handler (a wait could deadlock): connections of this process take
        turns, and one that meets another process's try goes on trying."""
        if db.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            return
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        with self.write_lock:
            while True:
                try:
                    db.execute("PRAGMA journal_mode=WAL")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.005)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on this thread's connection, committed on success."""
        db = self.get()
        # Waited for as long as SQLite's own busy timeout, and failing the same way: a wait that never
        # ends (two locks taken in opposite orders) becomes an error instead of a hang.
        if not self.write_lock.acquire(timeout=BUSY_TIMEOUT_SECONDS):
            raise sqlite3.OperationalError("database is locked (by another thread of this process)")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            self.write_lock.release()

    def close(self) -> None:
        with self._all_guard:
            connections, self._all = self._all, []
        for db in connections:
            db.close()
        self._local = threading.local()


def checkpoint(path: Path) -> None:
    """Copy the WAL of ``path`` into the file and cut it to nothing (a store gone quiet keeps no
    log beside its index). Gives up quietly if a reader or writer holds on past a second."""
    uri = path.resolve().as_uri() + "?mode=rw"  # never makes a file that is not there (a store deleted)
    with (
        contextlib.suppress(sqlite3.OperationalError),
        contextlib.closing(sqlite3.connect(uri, uri=True, timeout=QUIET_CHECKPOINT_TIMEOUT)) as db,
    ):
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


__all__ = ["ThreadConnections", "checkpoint", "write_lock"]
