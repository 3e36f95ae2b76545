"""The derived index of a store's notes and versions: a SQLite file inside the bare repository, or
the store's schema in PostgreSQL (:mod:`gitmem.engine.index.postgres_schema`).

A cache: Git is the source of truth. The index remembers the commit it reflects; whenever ``main``
has moved on it walks the new commits (a crash between the ref update and the index update loses
nothing, on either engine), and if ``main`` was rewritten it rebuilds from the history alone. Its SQL
is written once and runs on both engines.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2

from gitmem import metrics
from gitmem.clock import to_micros
from gitmem.db import thread_connections as thread_db
from gitmem.db.page_tokens import tokens_for
from gitmem.db.thread_connections import ThreadConnections
from gitmem.durable import DURABLE, Durability
from gitmem.engine.index import search_table as search_index
from gitmem.engine.index import sqlite_file, stored, version_rows
from gitmem.engine.index.postgres_schema import PgIndexDb
from gitmem.engine.index.queries import IndexQueries, NoteRow, VersionRow, upper_bound
from gitmem.git import replay, repository
from gitmem.git.commits import VersionRecord, parse_message
from gitmem.git.pushes import derive_versions
from gitmem.git.repository import blob_at, commit_at, read_tip
from gitmem.rules.paths import api_path, git_path, levels

log = logging.getLogger(__name__)

_PUT_NOTE = (
    "INSERT INTO notes VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(memory_id) DO UPDATE SET"
    " path=excluded.path, blob_id=excluded.blob_id, sha256=excluded.sha256, size=excluded.size,"
    " version_id=excluded.version_id, updated_at=excluded.updated_at"
)

SCHEMA_VERSION = "1"
IDLE_REPOSITORIES = 1  # repository handles kept for the next threads when the store is parked


class StoreIndex(IndexQueries):
    """The index of one store, safe to share between threads.

    Every thread gets its own SQLite connection (:mod:`gitmem.db.thread_connections`) and its own pygit2
    repository, opened on first use. A transaction belongs to a connection: with one connection
    shared by a thread pool, one thread's ``ROLLBACK`` ended another's transaction, whose remaining
    statements then autocommitted one by one. A single index-writer thread would also fix that, but
    every write would then hop to it and back, and readers would still need connections of their
    own; with a connection per thread, WAL readers run in parallel and never wait for a writer, and
    writers of this process take turns on one lock per index file (other processes on SQLite's
    lock). Reads never open a write transaction: :meth:`catch_up` writes only when ``main`` has
    moved past what the index holds.

    With ``database_url`` (PostgreSQL) the rows live in the store's schema there instead
    (:class:`~gitmem.engine.index.postgres_schema.PgIndexDb`, which stands where the SQLite connection does), and
    the store's writer lock is an advisory lock held by the transaction that writes the rows rather
    than a file lock, which a shared volume (NFS) does not reliably give.
    """

    def __init__(
        self,
        repo: pygit2.Repository,
        db_path: Path | None = None,
        *,
        database_url: str | None = None,
        store_id: str | None = None,
        owns_repo: bool = False,
        durability: Durability = DURABLE,
    ) -> None:
        """``owns_repo``: ``repo`` is the index's to free when it closes (else the caller's, who may
        go on using it: a push's repository sees the quarantined objects). ``durability``: the home's,
        for the objects libgit2 writes through the repositories each thread opens."""
        self._repo_path = repo.path
        self._durability = durability
        self._given = None if owns_repo else repo
        self.path = db_path or Path(repo.path) / "gitmem" / "index.sqlite3"
        self.path.parent.mkdir(exist_ok=True)
        self.tokens = tokens_for(self.path.parent)
        self._repos = threading.local()
        self._repos.repo = repo
        self._repos_idle: list[pygit2.Repository] = []
        # Weakly, as the connections (gitmem.db.thread_connections): a thread that ends drops its own.
        self._repos_all: list[weakref.ref[pygit2.Repository]] = [weakref.ref(repo)]
        self._repos_guard = threading.Lock()
        self._pg: PgIndexDb | None = None
        self.set_aside: Path | None = None
        if database_url and db_path is None:
            self.dialect = "postgresql"
            self._pg = PgIndexDb(database_url, store_id or Path(repo.path).name.removesuffix(".git"))
            return
        self.dialect = "sqlite"
        self.set_aside = sqlite_file.set_aside_if_damaged(self.path)
        self._connections = ThreadConnections(
            self.path, page_size=sqlite_file.PAGE_SIZE, autocheckpoint_pages=sqlite_file.WRITTEN_WAL_PAGES
        )
        self.write_lock = self._connections.write_lock
        # The schema script writes; run it only when the file's schema mark differs from this
        # sqlite_file.SCHEMA's, so that opening an index (every thread does) takes no write lock.
        migrated = False
        if self._connections.get().execute("PRAGMA user_version").fetchone()[0] != sqlite_file.SCHEMA_MARK:
            with self.write_lock:
                sqlite_file.redefine_indexes(self._connections.get())
                self._connections.get().executescript(sqlite_file.SCHEMA)
                migrated = sqlite_file.pack_keys(self._connections.get())
                self._connections.get().execute(f"PRAGMA user_version={sqlite_file.SCHEMA_MARK}")
        self.texts = search_index.NoteTexts(self._connections.get, lambda: self.repo)
        if search_index.ensure_schema(self._connections.get(), self.texts.fill) or migrated:
            sqlite_file.compact(self._connections.get(), self.write_lock)  # the old tables' pages

    @property
    def repo(self) -> pygit2.Repository:
        """This thread's repository (libgit2 objects must not be used by two threads at once)."""
        repo = getattr(self._repos, "repo", None)
        if repo is None:
            with self._repos_guard:
                repo = self._repos_idle.pop() if self._repos_idle else None
            if repo is None:
                repo = repository.open_repository(self._repo_path, self._durability)
                with self._repos_guard:
                    self._repos_all = [r for r in self._repos_all if r() is not None]
                    self._repos_all.append(weakref.ref(repo))
            self._repos.repo = repo
        return repo

    @property
    def db(self) -> Any:
        """This thread's connection to the index (``execute`` as ``sqlite3.Connection`` has it)."""
        return self._pg if self._pg is not None else self._connections.get()

    def checkpoint(self) -> None:
        """Empty the write-ahead log into the file (called once the store has gone quiet)."""
        if self._pg is None:
            thread_db.checkpoint(self.path)

    def park(self) -> None:
        """Unbind every thread's connection and repository, keeping a few for the next threads: only
        when no thread is using the store (:mod:`gitmem.engine.open_stores`)."""
        if self._pg is None:
            self._connections.park()
        with self._repos_guard:
            self._repos = threading.local()
            live = [repo for r in self._repos_all if (repo := r()) is not None]
            kept, dropped = live[:IDLE_REPOSITORIES], live[IDLE_REPOSITORIES:]
            self._repos_all, self._repos_idle = [weakref.ref(r) for r in kept], kept
        self._free(dropped)

    @property
    def open_handles(self) -> int:
        """SQLite connections and repository handles open now (each connection is three descriptors)."""
        repos = sum(1 for r in self._repos_all if r() is not None)
        return (0 if self._pg is not None else self._connections.open_connections) + repos

    def close(self) -> None:
        if self._pg is None:
            self._connections.close()
            if self.set_aside is None:
                sqlite_file.mark_sound(self.path)  # a cold reopen in this process need not read it whole again
        with self._repos_guard:
            self._repos = threading.local()
            dropped = [repo for r in self._repos_all if (repo := r()) is not None]
            self._repos_all, self._repos_idle = [], []
        self._free(dropped)

    def _free(self, repos: list[pygit2.Repository]) -> None:
        """Close what libgit2 holds of each (its packs' descriptors and maps) now: a pygit2 repository
        is in a reference cycle, so it would otherwise wait for the garbage collector."""
        for repo in repos:
            if repo is not self._given:
                repo.free()

    def drop(self) -> None:
        """Forget the index (its store is being deleted): PostgreSQL's schema; the SQLite file goes
        with the repository."""
        if self._pg is not None:
            self._pg.drop()

    # -- keeping up with main -------------------------------------------------------------------

    def indexed_tip(self) -> str | None:
        opened = self._pg.take_opened_tip() if self._pg is not None else None
        rows = opened if opened is not None else self.db.execute("SELECT value FROM meta WHERE key='tip'")
        row = rows.fetchone()
        return row[0] if row else None

    def catch_up(self) -> pygit2.Oid | None:
        """Bring the index to ``main``'s tip; return that tip.

        The tip read before taking the write lock only decides whether there is work; the tip that is
        indexed is read again under the lock. Otherwise a tip read before another thread or process
        indexed a newer one looked like a rewrite (the indexed tip is not among its ancestors) and
        triggered a full rebuild, backwards."""
        tip = read_tip(self.repo)
        if (str(tip) if tip else None) == self.indexed_tip():
            return tip
        with self.transaction():
            return self.advance()

    def advance(self) -> pygit2.Oid | None:
        """:meth:`catch_up` for a caller that holds the write transaction."""
        tip = read_tip(self.repo)
        tip_hex = str(tip) if tip else None
        indexed = self.indexed_tip()
        if tip_hex != indexed:
            self._apply_range(tip, indexed)
            self.set_tip(tip_hex)
        return tip

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        """A write whose row count nobody reads (PostgreSQL: sent with the next statement)."""
        if self._pg is not None:
            self._pg.defer(sql, params)
        else:
            self._connections.get().execute(sql, params)

    def flush(self) -> None:
        """Send the writes :meth:`_write` deferred, raising their error now (nothing on SQLite)."""
        if self._pg is not None:
            self._pg.database.flush_deferred()

    def set_tip(self, tip_hex: str | None) -> None:
        if self._pg is not None:
            self._pg.forget_opened_tip()
        self._write(
            "INSERT INTO meta VALUES ('tip', ?), ('schema', ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
            (tip_hex, SCHEMA_VERSION),
        )

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A transaction writing the index, committed on success (SQLite: on this thread's connection,
        under the file's write lock; PostgreSQL: under the store's index lock)."""
        if self._pg is not None:
            return self._pg.transaction()
        return self._sqlite_transaction()

    @contextlib.contextmanager
    def _sqlite_transaction(self) -> Iterator[Any]:
        try:
            with self._connections.transaction() as db:
                yield db
        finally:
            self.texts.transaction_ended()

    def writing(self) -> contextlib.AbstractContextManager[Any]:
        """A writer's transaction: :meth:`transaction` that also holds the store's writer lock (on
        SQLite the caller holds it already, inside :meth:`batch_lock`)."""
        if self._pg is not None:
            return self._pg.transaction(writer=True)
        return self._sqlite_transaction()

    def batch_lock(self) -> contextlib.AbstractContextManager[object]:
        """What a batch of writes holds around its attempts: SQLite's writer ``flock`` (one host);
        nothing on PostgreSQL, where each attempt's :meth:`writing` transaction takes the lock."""
        if self._pg is not None:
            return contextlib.nullcontext()
        return repository.writer_lock(Path(self._repo_path))

    def cluster_writer_lock(self) -> contextlib.AbstractContextManager[object]:
        """On PostgreSQL, the store's writer lock (across nodes) held over a block that writes Git but
        not the index rows (a push, a history rewrite's swap and purge), in a transaction of its own.
        Nothing on SQLite: those callers hold the ``flock`` (a rewrite) or rely on Git's ref lock alone
        (a push), as they always have on one host."""
        if self._pg is not None:
            return self._pg.writer_lock()
        return contextlib.nullcontext()

    def rebuild(self) -> None:
        """Forget everything and rebuild from the history alone (``gitmem reindex``)."""
        with self.transaction():
            self._clear()
            tip = read_tip(self.repo)
            if tip is not None:
                self._apply_range(tip, None)  # counted there
            else:
                metrics.INDEX_REBUILDS.inc()
            self.set_tip(str(tip) if tip else None)

    def _clear(self) -> None:
        if self._pg is not None:
            self._pg.forget_opened_tip()
        search_index.clear(self.db)
        self.db.execute("DELETE FROM notes")  # the triggers bring totals back to zero (the text went first)
        self.db.execute("DELETE FROM versions")
        self.db.execute("DELETE FROM meta WHERE key IN ('tip', 'schema')")  # not PostgreSQL's schema mark

    def _apply_range(self, tip: pygit2.Oid | None, indexed: str | None) -> None:
        pending: list[pygit2.Oid] = []  # ids, not commits: a long history must not sit in memory
        found_base = indexed is None
        oid = tip
        while oid is not None:
            if indexed is not None and str(oid) == indexed:
                found_base = True
                break
            pending.append(oid)
            parents = commit_at(self.repo, oid).parent_ids
            oid = parents[0] if parents else None
        if not found_base:
            log.info("main was rewritten; rebuilding the index of %s", self.repo.path)
            self._clear()
        if found_base and indexed is not None:
            metrics.INDEX_CATCH_UPS.inc()
            metrics.INDEX_CATCH_UP_COMMITS.inc(len(pending))
        else:
            metrics.INDEX_REBUILDS.inc()
        for oid in reversed(pending):
            self._apply_commit(commit_at(self.repo, oid))

    def _apply_commit(self, commit: pygit2.Commit) -> None:
        records = parse_message(commit.message) or derive_versions(self.repo, commit, self.note_id_at)
        for record in records:
            self._apply_record(commit, record)

    def _apply_record(self, commit: pygit2.Commit, record: VersionRecord) -> None:
        blob_id = None
        if record.path is not None and record.operation != "deleted":
            try:
                blob_id = str(commit.tree[git_path(record.path)].id)
            except KeyError:
                log.warning("commit %s names %s but its tree lacks it", commit.id, record.path)
        self.apply_version(str(commit.id), record, blob_id)

    def apply_version(
        self,
        commit_id: str,
        record: VersionRecord,
        blob_id: str | None,
        blob_data: bytes | None = None,
        *,
        displaces_nothing: bool = False,
    ) -> None:
        """Record one version (and its effect on the note, by the one replay rule of
        :mod:`gitmem.git.replay`) made by ``commit_id``; the caller holds the write transaction (the
        write path indexes its own commits as it makes them, and hands over the blob, which is not in
        the repository yet; with ``displaces_nothing`` it has just checked, in this transaction, that
        no other note sits at, above or below the version's path)."""
        version_rows.insert(self._write, self._pg is not None, self.db, commit_id, record, blob_id)
        near = _nothing_near if displaces_nothing else self._notes_near
        step = replay.move(record, near, in_tree=blob_id is not None)
        if step is None:
            return
        for other in step.displaced:
            self._delete_note(other.memory_id)
        if step.path is None:
            self._delete_note(record.memory_id)
            return
        assert blob_id is not None  # a note is placed only where its commit holds the content  # noqa: S101  narrows the type for mypy; never a check of input
        if self._pg is None:
            self.texts.remove(record.memory_id)
        row = (
            stored.note_key(record.memory_id, self.dialect),
            step.path,
            stored.hash_key(blob_id, self.dialect),
            stored.hash_key(record.content_sha256, self.dialect),
            record.content_size,
            stored.version_key(record.version_id, self.dialect),
            to_micros(record.note_created_at),
            to_micros(record.created_at),
        )
        if self._pg is not None:
            self._write(_PUT_NOTE, row)
            data = blob_data if blob_data is not None else blob_at(self.repo, blob_id).read_raw()
            search_index.put_on_postgres(self.db, record.memory_id, step.path, data)
            return
        (rowid,) = self.db.execute(_PUT_NOTE + " RETURNING rowid", row).fetchone()
        self.texts.place(rowid, step.path, blob_id, blob_data)

    def _delete_note(self, memory_id: str) -> None:
        if self._pg is None:
            self.texts.remove(memory_id)  # PostgreSQL's text row goes with it (a foreign key)
        self.db.execute("DELETE FROM notes WHERE memory_id=?", (stored.note_key(memory_id, self.dialect),))

    def _notes_near(self, path: str) -> list[replay.Placed]:
        """The notes at ``path``, in a folder above it or below it (what a note placed there displaces)."""
        above, below = levels(path), path + "/"
        rows = self.db.execute(
            f"SELECT path, memory_id FROM notes WHERE path IN ({','.join('?' * len(above))}) OR (path>? AND path<?)",  # noqa: S608  the code's own SQL and placeholders; values bound
            (*above, below, upper_bound(below)),
        )
        return [replay.Placed(row[0], stored.note_id(row[1])) for row in rows]


def _nothing_near(path: str) -> list[replay.Placed]:  # noqa: ARG001  the signature of _notes_near, which it stands for
    return []


__all__ = ["NoteRow", "StoreIndex", "VersionRow", "api_path", "upper_bound"]
