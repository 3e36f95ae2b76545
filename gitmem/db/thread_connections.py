"""SQLite connections to one file, one per thread, and one write lock per file in the process.

A transaction belongs to a connection, so a connection shared by threads lets one thread's
``ROLLBACK`` end another's transaction. Here every thread takes its own connection on first use;
writers of one process take turns on a lock per file (SQLite's busy handler sleeps in growing
steps), and other processes meet SQLite's own lock.

A thread keeps its connection until the file's owner says no thread is using it (:meth:`park`): the
bindings are then dropped, a connection is kept for whichever thread comes next and the rest closed,
so a file that many threads touched once does not hold a connection (two descriptors, the file and
its ``-wal``, beside the ``-shm`` they share) per thread for ever. :meth:`close` closes them all, the last one after
checkpointing the log into the file and truncating it, so a file at rest has no log beside it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

from gitmem.db import descriptors

# WAL pages after which a commit checkpoints (SQLite's default is 1,000, i.e. a 4 MB WAL), and the size
# the WAL file is cut back to when it restarts: while written, the file's disk stays near its own size;
# once its writers are quiet, :func:`checkpoint` empties the WAL.
WAL_AUTOCHECKPOINT_PAGES = 64
WAL_SIZE_LIMIT_BYTES = 0
QUIET_CHECKPOINT_TIMEOUT = 1.0
IDLE_CONNECTIONS = 1  # kept open by park() for the next threads (a cold connection costs ~0.1 ms)
SPARE_DESCRIPTORS = 2  # descriptors of connections park() closed that a file may keep (see park)

BUSY_TIMEOUT_SECONDS = 30.0
CONNECT_ATTEMPTS = 4


class _Connection(sqlite3.Connection):
    """A connection that can be referred to weakly: a thread that ends drops its own, and with it the
    connection, as it did when each thread held its connection alone."""


# Weakly: each ThreadConnections keeps its file's lock, so a closed store's goes with it.
_write_locks: weakref.WeakValueDictionary[str, threading.Lock] = weakref.WeakValueDictionary()
_write_locks_guard = threading.Lock()


def write_lock(path: Path) -> threading.Lock:
    """The lock this process's writers of ``path`` take turns on."""
    key = str(path.resolve())
    with _write_locks_guard:
        lock = _write_locks.get(key)
        if lock is None:
            lock = _write_locks[key] = threading.Lock()
        return lock


class ThreadConnections:
    """A WAL-mode SQLite file seen through one connection per thread."""

    def __init__(
        self,
        path: Path,
        *,
        durable: bool = False,
        page_size: int | None = None,
        autocheckpoint_pages: int = WAL_AUTOCHECKPOINT_PAGES,
    ) -> None:
        """``durable``: every commit reaches the disk (``synchronous=FULL``), for what nothing else can
        rebuild (the catalog); otherwise ``NORMAL``, for what Git can (indexes). ``page_size``: of a
        file made here (an existing file keeps its own)."""
        self.path = path
        self.durable = durable
        self.page_size = page_size
        self.autocheckpoint_pages = autocheckpoint_pages  # PRAGMA wal_autocheckpoint of its connections
        self.write_lock = write_lock(path)
        self._local = threading.local()
        # Every connection open, weakly: a thread's own is held by its thread (and dies with it), an idle
        # one by _idle.
        self._all: list[weakref.ref[sqlite3.Connection]] = []
        self._idle: list[sqlite3.Connection] = []  # open, bound to no thread (see park)
        self._all_guard = threading.Lock()

    def get(self) -> sqlite3.Connection:
        """This thread's connection."""
        db = getattr(self._local, "db", None)
        if db is None:
            with self._all_guard:
                db = self._idle.pop() if self._idle else None
            self._local.db = db = db or self._connect()
        return db

    @property
    def open_connections(self) -> int:
        return len(self._live())

    def _live(self) -> list[sqlite3.Connection]:
        with self._all_guard:
            live = [db for ref in self._all if (db := ref()) is not None]
            self._all = [weakref.ref(db) for db in live]
        return live

    def _connect(self) -> sqlite3.Connection:
        """A new connection; when the process is out of descriptors, after others gave some back
        (:func:`gitmem.db.descriptors.relieve`), a few times."""
        for attempt in range(1, CONNECT_ATTEMPTS + 1):
            try:
                return self._connect_once()
            except sqlite3.Error as exc:
                if attempt == CONNECT_ATTEMPTS or not descriptors.out_of_descriptors(exc):
                    raise
                if descriptors.relieve() == 0:
                    time.sleep(0.05 * attempt)  # the requests holding files finish and return them
        raise AssertionError("unreachable")

    def _connect_once(self) -> sqlite3.Connection:
        # check_same_thread=False so that a connection may pass to another thread once parked, and so
        # that close() may close it from any thread.
        db = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_SECONDS,
            isolation_level=None,
            check_same_thread=False,
            factory=_Connection,
        )
        db.row_factory = sqlite3.Row
        try:
            if self.page_size is not None:
                db.execute(f"PRAGMA page_size={int(self.page_size)}")  # a no-op once the file has pages
            self._use_wal(db)
            if self.durable:
                db.execute("PRAGMA synchronous=FULL")
                db.execute("PRAGMA foreign_keys=ON")
            else:
                db.execute("PRAGMA synchronous=NORMAL")  # what it holds is rebuildable; Git holds durability
            db.execute(f"PRAGMA wal_autocheckpoint={int(self.autocheckpoint_pages)}")
            db.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT_BYTES}")
        except BaseException:
            db.close()
            raise
        with self._all_guard:
            self._all = [ref for ref in self._all if ref() is not None]
            self._all.append(weakref.ref(db))
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

    def park(self, keep: int = IDLE_CONNECTIONS) -> None:
        """Unbind every thread's connection, keep ``keep`` open for the next threads and close the rest.
        Only for a caller that knows no thread is using the file at this moment (the store's last user
        has returned it, :mod:`gitmem.engine.open_stores`).

        The rest are closed without the checkpoint the file's last connection makes on its way out: that
        flushes the file twice, and the caller holds the lock of every open store (with eight clients on
        eight stores, one return in ten had two connections to close). SQLite keeps the descriptor of a
        connection closed while another stays open on the file (POSIX locks belong to the process, not
        the descriptor) and hands it to the next connection it opens there; so that a file many threads
        used at once keeps no descriptor each, past ``keep`` + :data:`SPARE_DESCRIPTORS` open all are
        closed, the last one checkpointing."""
        live = self._live()
        if len(live) > keep + SPARE_DESCRIPTORS:
            self.close()
            return
        for db in live[keep:]:
            db.close()
        live = live[:keep]
        with self._all_guard:
            self._local = threading.local()
            self._all, self._idle = [weakref.ref(db) for db in live], list(live)

    def close(self) -> None:
        """Close every connection; the last checkpoints the log into the file and truncates it first
        (SQLite removes the log and its shared memory once no process has the file open)."""
        connections = self._live()
        with self._all_guard:
            self._all, self._idle = [], []
            self._local = threading.local()
        for n, db in enumerate(connections, 1):
            if n == len(connections):
                with contextlib.suppress(sqlite3.Error):
                    db.execute(f"PRAGMA busy_timeout={int(QUIET_CHECKPOINT_TIMEOUT * 1000)}")
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()


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
