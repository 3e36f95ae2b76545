"""A store's index on PostgreSQL: one schema per store, found through ``search_path``.

**Why a schema per store, not a ``store_id`` column.** The index's SQL is written once, in the form
the SQLite file per store has always used (``SELECT * FROM notes WHERE path=?``), and it is spread
over the index, search, diff, review and retention. A schema per store keeps every one of those
statements as it is: each transaction (and each read outside one) runs with the store's schema first
on its ``search_path``. A ``store_id`` column would put a store id into every statement and every key
of both engines (the SQLite file would carry a column that is the same on every row) and make every
b-tree hold all stores, so one large store slows the lookups of the others. What a schema per store
costs: about a dozen relations a store in PostgreSQL's catalog (100,000 stores make a million
relations; each backend's relation cache grows with the stores it touches, which is why the index has
its own small pool of connections), and upgrades run store by store, as they do for SQLite files
today (the schema mark, on first open). Deleting a store is ``DROP SCHEMA ... CASCADE``.

**Locks.** Two transaction-scoped advisory locks a store (:func:`gitmem.db.lock_id`):
the *writer* lock (one writer of the store's Git history at a time across every node: a batch of API
writes, a push, a history rewrite) and the *index* lock (one transaction writing the index rows at a
time: a writer's, or a reader's catch-up). A writer takes the writer lock first, then the index lock,
never the other way round. A push holds the writer lock in the server while ``git receive-pack`` runs,
and its hooks catch the index up under the index lock alone. A lock is waited for at most
:data:`STORE_LOCK_TIMEOUT_SECONDS` (then :class:`~gitmem.errors.StoreBusy`, which a client may retry);
a node that dies holding one loses its connection and the lock with it.

**Search.** ``search_text`` holds each plain note's path and text and a generated ``tsvector`` (path
weighted A, body D) under the ``gitmem_text.porter`` configuration: English Snowball stems without
stop words, on text whose punctuation is made spaces first, which is how SQLite's ``porter unicode61``
tokenizer sees it. A foreign key on ``notes`` removes the text of a note that leaves.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from gitmem.db import PostgresDatabase, Rows, lock_id, to_postgres
from gitmem.db.postgres import begun, returns_rows, run_all
from gitmem.errors import StoreBusy
from gitmem.recent import Recent

log = logging.getLogger(__name__)

STORE_LOCK_TIMEOUT_SECONDS = 15.0  # a store whose writer lock is held longer than this answers "busy"
POOL_SIZE = 16

# Shared by every store: the text search configuration (English stems, no stop words).
TEXT_CONFIG = """
CREATE SCHEMA IF NOT EXISTS gitmem_text;
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_ts_dict d JOIN pg_namespace n ON n.oid = d.dictnamespace
                 WHERE n.nspname = 'gitmem_text' AND d.dictname = 'stem') THEN
    CREATE TEXT SEARCH DICTIONARY gitmem_text.stem (TEMPLATE = snowball, Language = english);
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace
                 WHERE n.nspname = 'gitmem_text' AND c.cfgname = 'porter') THEN
    CREATE TEXT SEARCH CONFIGURATION gitmem_text.porter (COPY = pg_catalog.simple);
    ALTER TEXT SEARCH CONFIGURATION gitmem_text.porter ALTER MAPPING FOR asciiword, word, numword,
        asciihword, hword, hword_part, hword_asciipart, hword_numpart WITH gitmem_text.stem;
  END IF;
END $$;
"""

# One store's tables; {s} is its schema. Columns as the SQLite file's (sqlite_file.SCHEMA), with
# BIGINT for numbers and the C collation on paths, so that range scans order paths as SQLite does.
SCHEMA = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS {s}.notes (
    memory_id TEXT PRIMARY KEY, path TEXT COLLATE "C" NOT NULL UNIQUE, blob_id TEXT NOT NULL,
    sha256 TEXT NOT NULL, size BIGINT NOT NULL, version_id TEXT NOT NULL,
    created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.versions (
    seq BIGINT PRIMARY KEY, version_id TEXT NOT NULL UNIQUE, memory_id TEXT NOT NULL,
    operation TEXT NOT NULL, path TEXT COLLATE "C", sha256 TEXT, size BIGINT, blob_id TEXT,
    created_at BIGINT NOT NULL, actor_type TEXT, actor_id TEXT, commit_id TEXT NOT NULL,
    redacted_at BIGINT, redacted_by_type TEXT, redacted_by_id TEXT);
CREATE INDEX IF NOT EXISTS versions_memory ON {s}.versions (memory_id, seq);
CREATE INDEX IF NOT EXISTS versions_actor ON {s}.versions (actor_type, actor_id, seq);
CREATE INDEX IF NOT EXISTS versions_created ON {s}.versions (created_at);
CREATE INDEX IF NOT EXISTS notes_lower ON {s}.notes (lower(path));
CREATE TABLE IF NOT EXISTS {s}.totals (id INTEGER PRIMARY KEY CHECK (id = 1), notes BIGINT NOT NULL,
                                       bytes BIGINT NOT NULL);
INSERT INTO {s}.totals SELECT 1, count(*), coalesce(sum(size), 0) FROM {s}.notes ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION {s}.follow_totals() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP = 'INSERT' THEN UPDATE {s}.totals SET notes = notes + 1, bytes = bytes + NEW.size;
    ELSIF TG_OP = 'DELETE' THEN UPDATE {s}.totals SET notes = notes - 1, bytes = bytes - OLD.size;
    ELSE UPDATE {s}.totals SET bytes = bytes - OLD.size + NEW.size; END IF;
    RETURN NULL; END $$;
CREATE OR REPLACE TRIGGER notes_totals AFTER INSERT OR DELETE OR UPDATE OF size ON {s}.notes
    FOR EACH ROW EXECUTE FUNCTION {s}.follow_totals();
CREATE TABLE IF NOT EXISTS {s}.search_text (
    memory_id TEXT PRIMARY KEY REFERENCES {s}.notes (memory_id) ON DELETE CASCADE,
    path TEXT COLLATE "C" NOT NULL, body TEXT NOT NULL,
    document tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('gitmem_text.porter', regexp_replace(path, '[^[:alnum:]]+', ' ', 'g')), 'A') ||
        setweight(to_tsvector('gitmem_text.porter', regexp_replace(body, '[^[:alnum:]]+', ' ', 'g')), 'D')
    ) STORED);
CREATE INDEX IF NOT EXISTS search_text_document ON {s}.search_text USING gin (document);
CREATE INDEX IF NOT EXISTS search_text_path ON {s}.search_text (path);
"""
SCHEMA_MARK = hashlib.sha256((TEXT_CONFIG + SCHEMA).encode()).hexdigest()[:16]


def schema_name(store_id: str) -> str:
    """The store's schema: its id folded to what an unquoted identifier may hold."""
    cleaned = "".join(c if c.isascii() and c.isalnum() else "_" for c in store_id.lower())
    return f"gitmem_{cleaned}"[:63]


_databases: dict[str, PostgresDatabase] = {}
_databases_guard = threading.Lock()


def index_database(url: str) -> PostgresDatabase:
    """This process's pool for store indexes at ``url``: apart from the catalog's, so that the session
    ``search_path`` an index read leaves on a connection is never seen by a catalog statement."""
    with _databases_guard:
        found = _databases.get(url)
        if found is None:
            found = _databases[url] = PostgresDatabase(url, max_size=POOL_SIZE, application_name="gitmem-index")
        return found


_open = threading.local()  # .schema: the store whose index transaction this thread has open
# (url, schema) whose tables this process has seen current, the most recent only (one a store: 10,000
# stores touched would keep 10,000); one forgotten is checked again by one query.
ENSURED_KEPT = 4096
_ensured: Recent[tuple[str, str], bool] = Recent(ENSURED_KEPT)


class PgIndexDb:
    """One store's index on PostgreSQL, shaped like the SQLite connection it replaces: ``execute``
    (in this thread's open transaction if there is one, else on a pooled connection with the store's
    schema on its path), plus the index's transactions and locks."""

    dialect = "postgresql"

    def __init__(self, url: str, store_id: str) -> None:
        self.url = url
        self.store_id = store_id
        self.schema = schema_name(store_id)
        self.search_path = f"{self.schema}, public"
        self.database = index_database(url)
        self._ensure_schema()

    def _ensure_schema(self) -> None:
        key = (self.url, self.schema)
        if _ensured.get(key):
            return
        row = self.execute("SELECT value FROM meta WHERE key='schema_mark'").fetchone() if self._exists() else None
        if row is None or row[0] != SCHEMA_MARK:
            with self.database.transaction() as tx:
                tx.lock("gitmem:index-schema")  # CREATE ... IF NOT EXISTS races with itself
                tx.conn.execute(TEXT_CONFIG + SCHEMA.format(s=self.schema))  # a script: no parameters
                tx.execute(
                    f"INSERT INTO {self.schema}.meta VALUES ('schema_mark', ?)"  # noqa: S608  the schema name is derived from the store id (schema_name)
                    " ON CONFLICT (key) DO UPDATE SET value=excluded.value",
                    (SCHEMA_MARK,),
                )
        _ensured.put(key, True)

    def _exists(self) -> bool:
        found = self.database.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname=? AND tablename='meta'", (self.schema,)
        ).fetchone()
        return found is not None

    # -- statements -------------------------------------------------------------------------------

    def execute(self, sql: str, params: Any = ()) -> Rows:
        if self.database.in_transaction():
            self._check_same_store()
            return self.database.execute(sql, params)
        return self.read_all([(sql, params)])[0]

    def read_all(self, statements: list[tuple[str, Any]]) -> list[Rows]:
        """Each statement's rows, the statements sent together (one round trip)."""
        if self.database.in_transaction():
            self._check_same_store()
            return self.database.read_all(statements)
        with self.database.connection() as conn:
            # The pool is the index's alone: a search_path left on a connection is only ever ours.
            if getattr(conn, "_gitmem_search_path", None) != self.search_path:
                conn.execute("SELECT set_config('search_path', %s, false)", (self.search_path,))
                conn._gitmem_search_path = self.search_path  # type: ignore[attr-defined]
            if len(statements) == 1:
                cursor = conn.execute(to_postgres(statements[0][0]), tuple(statements[0][1]))
                return [Rows(cursor.fetchall() if returns_rows(cursor) else [], cursor.rowcount)]
            return run_all(conn, statements)

    def read_bounded(self, sql: str, params: Any, seconds: float) -> Rows:
        """One read, outside any transaction, that the server stops after ``seconds``
        (``statement_timeout`` for its own transaction alone): then :class:`TimeoutError`."""
        import psycopg

        if self.database.in_transaction():
            raise RuntimeError("a bounded read runs in a transaction of its own")
        settings = "SELECT set_config('search_path', ?, true), set_config('statement_timeout', ?, true)"
        timeout = f"{max(1, round(seconds * 1000))}ms"
        with self.database.connection() as conn:
            try:
                with begun(conn, (settings, (self.search_path, timeout)), [], (sql, params)) as rows:
                    assert rows is not None  # noqa: S101  narrows the type for mypy; never a check of input
                    return rows
            except psycopg.errors.QueryCanceled:
                raise TimeoutError(f"statement_timeout {timeout}") from None

    def defer(self, sql: str, params: Any = ()) -> None:
        """``execute`` for a write whose row count nobody reads: in a transaction, it goes to the
        server with the next statement or the ``COMMIT`` (one round trip less)."""
        if self.database.in_transaction():
            self._check_same_store()
            self.database.defer(sql, params)
        else:
            self.execute(sql, params)

    @property
    def in_transaction(self) -> bool:
        return self.database.in_transaction()

    # -- transactions and locks -------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, *, writer: bool = False) -> Iterator[PgIndexDb]:
        """A transaction holding the store's index lock (and first its writer lock, with ``writer``),
        committed on success. Inside an open one (a writer's plan reading through a helper that
        catches up), it simply runs in that one: its locks are held already."""
        if self.database.in_transaction():
            self._check_same_store()
            yield self
            return
        begin = functools.partial(
            self.database.transaction,
            read=(f"SELECT value FROM {self.schema}.meta WHERE key='tip'", ()),  # noqa: S608  the schema name is derived from the store id (schema_name)
        )
        with self._locked(begin, ("writer", "index") if writer else ("index",), True) as tx:
            _open.schema = self.schema
            _open.tip = tx.opened  # read under the locks, with the BEGIN: see take_opened_tip
            try:
                yield self
            finally:
                _open.schema = _open.tip = None

    def take_opened_tip(self) -> Rows | None:
        """The indexed tip as this transaction read it right after taking its locks (once: None after,
        and after :meth:`forget_opened_tip`, so a tip written since is read again)."""
        if not self.database.in_transaction():
            return None
        rows, _open.tip = getattr(_open, "tip", None), None
        return rows

    def forget_opened_tip(self) -> None:
        _open.tip = None

    def _check_same_store(self) -> None:
        """The transaction open on this thread is this store's: its ``search_path`` names no other."""
        if getattr(_open, "schema", None) != self.schema:
            raise RuntimeError(f"another store's index transaction is open on this thread, not {self.store_id}'s")

    @contextlib.contextmanager
    def _locked(self, begin: Any, kinds: tuple[str, ...], search_path: bool) -> Iterator[Any]:
        """``begin(opening)``'s transaction, opened holding the store's locks of ``kinds`` (taken in
        order, waiting at most the lock timeout) in the same round trip as its ``BEGIN``
        (PostgreSQL evaluates a select list left to right: the settings come first)."""
        import psycopg

        with contextlib.ExitStack() as stack:
            try:  # only the locks' own timeout means busy, not a statement's inside the block
                tx = stack.enter_context(begin(self._lock_statement(kinds, search_path)))
            except psycopg.errors.LockNotAvailable:
                raise StoreBusy(f"memory store {self.store_id} is busy; try again") from None
            yield tx

    def _lock_statement(self, kinds: tuple[str, ...], search_path: bool) -> tuple[str, list[object]]:
        settings = ["set_config('lock_timeout', ?, true)"]
        params: list[object] = [f"{int(STORE_LOCK_TIMEOUT_SECONDS * 1000)}ms"]
        if search_path:
            settings.insert(0, "set_config('search_path', ?, true)")
            params.insert(0, self.search_path)
        locks = ["pg_advisory_xact_lock(?)"] * len(kinds)
        params += [lock_id(f"gitmem:{kind}:{self.store_id}") for kind in kinds]
        return "SELECT " + ", ".join(settings + locks), params

    @contextlib.contextmanager
    def writer_lock(self) -> Iterator[None]:
        """The store's writer lock alone, in a transaction of its own held for the block (a push, the
        swap and purge of a history rewrite); the index is written by other transactions meanwhile."""
        with (
            self.database.connection() as conn,
            self._locked(functools.partial(begun, conn, deferred=[]), ("writer",), False),
        ):
            yield

    def compact(self) -> None:
        """Rewrite the store's tables after a history rewrite, so that no dead row version keeps the
        text of a redacted or expired note (PostgreSQL's WAL and backups keep it until recycled)."""
        with self.database.connection() as conn:
            conn.execute(f"VACUUM FULL {self.schema}.notes, {self.schema}.versions, {self.schema}.search_text")

    def drop(self) -> None:
        """Forget the store's index (the store is deleted)."""
        with self.database.transaction() as tx:
            tx.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")
        _ensured.forget((self.url, self.schema))

    def close(self) -> None:
        """Nothing of a store's own: the pool is the process's."""


# -- search ---------------------------------------------------------------------------------------

PATH_WEIGHT, BODY_WEIGHT = 5.0, 1.0
# ts_rank's weights are for D, C, B, A: the body is D, the path A.
SEARCH_QUERY = (
    "SELECT t.memory_id, ts_rank('{{{body}, 0, 0, {path}}}', t.document, q) AS score,"
    " ts_headline('gitmem_text.porter', t.body, q, 'StartSel=**, StopSel=**, MaxWords={words},"
    " MinWords={min_words}, ShortWord=0') FROM search_text t, to_tsquery('gitmem_text.porter', ?) q"
    " WHERE t.document @@ q AND t.path >= ? AND t.path < ? ORDER BY score DESC, t.path LIMIT ? OFFSET ?"
)


def search_sql(snippet_words: int) -> str:
    return SEARCH_QUERY.format(
        body=BODY_WEIGHT / PATH_WEIGHT, path=1.0, words=snippet_words, min_words=max(1, snippet_words // 2)
    )


def to_tsquery(groups: list[list[Any]]) -> str | None:
    """The ``to_tsquery`` text of the search box's terms (:func:`gitmem.engine.index.search_query.groups`):
    groups ANDed, terms in a group ORed, a term's words a phrase, its last word a prefix if starred.
    Terms hold only letters and digits (the query parser made everything else a space)."""
    parts = []
    for group in groups:
        alternatives = []
        for term in group:
            words = [f"'{word}'" for word in term.text.split()]
            if not words:
                continue
            if term.prefix:
                words[-1] += ":*"
            alternatives.append("(" + " <-> ".join(words) + ")")
        if alternatives:
            parts.append("(" + " | ".join(alternatives) + ")")
    return " & ".join(parts) if parts else None


def put_text(db: PgIndexDb, memory_id: str, path: str, body: str) -> None:
    db.defer(
        "INSERT INTO search_text (memory_id, path, body) VALUES (?,?,?)"
        " ON CONFLICT (memory_id) DO UPDATE SET path=excluded.path, body=excluded.body",
        (memory_id, path, body.replace("\x00", " ")),
    )


__all__ = [
    "STORE_LOCK_TIMEOUT_SECONDS",
    "PgIndexDb",
    "index_database",
    "put_text",
    "schema_name",
    "search_sql",
    "to_tsquery",
]
