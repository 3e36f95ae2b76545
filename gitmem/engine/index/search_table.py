"""The text tables search reads (SQLite FTS5, ``porter unicode61``): in a store's index file, and in memory.

**In the index file** the table is ``note_text``, *contentless* (``content=''``): FTS5 keeps its word
lists but no copy of any text, and its rowid is the note's rowid in ``notes``, so no table of its own
maps the two. The text is the note's blob, which Git keeps anyway: a copy of every body made the index
half as big again (517 of 1,790 B a note, issue 34), and the map from rowids to notes three b-trees
more (a page each in a small store, issue 27). The price, paid here and in :mod:`.search`:

- a contentless row is removed with FTS5's ``delete`` command, which must be handed the very text
  that was indexed: the blob the ``notes`` row still names, read from the repository, or from what
  the write path handed over for blobs not packed yet (:class:`~gitmem.engine.index.store_index.StoreIndex`
  does that, since it alone knows both). So every way a note leaves ``notes`` goes through the index's
  code, not a trigger;
- FTS5 cannot make snippets without the text, so :mod:`.search` makes them from the blobs of the page's
  hits alone (:func:`snippets`, the same tokenizer and query in memory: a snippet depends only on its
  own note's text).

The index calls these in the same transaction that applies each version, so whatever moves ``main``
(a write, a push, a rewrite) keeps the text current. A history rewrite rebuilds the index from
scratch (:func:`clear`) and then compacts the file, so redacted or expired words leave its bytes too.
Encrypted blobs are never indexed here (see :mod:`gitmem.engine.index.search`).

**In memory** (an encrypted store's text, :mod:`.search`) the table keeps its content, beside a map of
note ids (``search_docs``): nothing of it reaches a disk, and it has no ``notes`` table to lean on.

On PostgreSQL the text lives in the store schema's ``search_text`` (:mod:`gitmem.engine.index.postgres_schema`):
the same calls, a ``tsvector`` instead of FTS5, and a foreign key instead of the removal code.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pygit2

from gitmem.crypto.codec import is_encrypted
from gitmem.engine.index import stored
from gitmem.engine.index.postgres_schema import put_text
from gitmem.git.repository import blob_at

log = logging.getLogger(__name__)

TOKENIZE = "tokenize='porter unicode61'"
# The index file's text table: no content, rowid = notes.rowid.
_NOTE_TEXT = f"CREATE VIRTUAL TABLE IF NOT EXISTS note_text USING fts5(path, body, content='', {TOKENIZE})"
# What indexes made before schema 2 kept instead (dropped when such a file is opened).
_OLD_TABLES = ("search_text", "search_docs")
_OLD_TRIGGER = "notes_unsearchable"
# An encrypted store's text in memory: with its content, keyed by note id.
_MEMORY_TABLES = (
    "CREATE TABLE IF NOT EXISTS search_docs (docid INTEGER PRIMARY KEY, memory_id TEXT NOT NULL UNIQUE,"
    " path TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS search_docs_path ON search_docs (path)",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS search_text USING fts5(path, body, {TOKENIZE})",
)


def _on_postgres(db: Any) -> bool:
    return getattr(db, "dialect", "sqlite") == "postgresql"


def text(data: bytes) -> str | None:
    """What search indexes of a blob: its text, or ``None`` for an encrypted one (never on disk)."""
    return None if is_encrypted(data) else data.decode("utf-8", "replace")


# -- the index file ---------------------------------------------------------------------------------


def ensure_schema(db: sqlite3.Connection, fill: Callable[[], None]) -> bool:
    """The index file's text table beside its ``notes`` table. A file made before it (with no text
    table, or schema 1's copy of every text) gets it, filled once by ``fill`` from the notes' blobs,
    and loses the old tables; returns whether it did (the caller then compacts the file)."""
    present = {
        row[0]
        for row in db.execute(
            "SELECT name FROM sqlite_master WHERE name IN ('note_text', 'search_text', 'search_docs', ?)",
            (_OLD_TRIGGER,),
        )
    }
    if present == {"note_text"}:
        return False  # the usual case: no write lock taken to open a store
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(f"DROP TRIGGER IF EXISTS {_OLD_TRIGGER}")
        for table in _OLD_TABLES:
            db.execute(f"DROP TABLE IF EXISTS {table}")
        db.execute("DROP TABLE IF EXISTS note_text")  # filled anew below, whatever it held
        db.execute(_NOTE_TEXT)
        fill()
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return bool(present - {"note_text"})


def clear(db: Any) -> None:
    """Empty the text table before a rebuild. Dropping it (rather than deleting its rows) leaves no
    old segment behind; the rewriter's VACUUM then removes the freed pages. (PostgreSQL: the rows go
    with their notes.)"""
    if _on_postgres(db):
        return
    db.execute("DROP TABLE IF EXISTS note_text")
    db.execute(_NOTE_TEXT)


def index(db: sqlite3.Connection, rowid: int, path: str, body: str) -> None:
    """The text of the note at ``notes.rowid`` = ``rowid``."""
    db.execute("INSERT INTO note_text (rowid, path, body) VALUES (?,?,?)", (rowid, path, body))


def unindex(db: sqlite3.Connection, rowid: int, path: str, body: str) -> None:
    """Take back what :func:`index` was given for ``rowid`` (exactly that path and text)."""
    db.execute("INSERT INTO note_text (note_text, rowid, path, body) VALUES ('delete',?,?,?)", (rowid, path, body))


def unindex_all(db: sqlite3.Connection) -> None:
    db.execute("INSERT INTO note_text (note_text) VALUES ('delete-all')")


class NoteTexts:
    """The text of an index file's notes, kept in step with ``notes`` by the index's code (each
    thread on its own connection and repository, as the index gives them)."""

    def __init__(self, db: Callable[[], sqlite3.Connection], repo: Callable[[], pygit2.Repository]) -> None:
        self._db, self._repo = db, repo
        self._handed = threading.local()  # blob id -> bytes handed over in this thread's transaction

    def transaction_ended(self) -> None:
        self._handed.blobs = {}

    def _blobs(self) -> dict[str, bytes]:
        blobs: dict[str, bytes] | None = getattr(self._handed, "blobs", None)
        if blobs is None:
            blobs = self._handed.blobs = {}
        return blobs

    def _text_of(self, blob_id: str) -> str | None:
        data = self._blobs().get(blob_id)
        return text(data if data is not None else blob_at(self._repo(), blob_id).read_raw())

    def place(self, rowid: int, path: str, blob_id: str, data: bytes | None) -> None:
        """The text of the note at ``notes.rowid`` = ``rowid``, now at ``path`` with ``blob_id``."""
        if data is not None:  # handed over before its pack is written: a later version in this batch
            self._blobs()[blob_id] = data  # takes its text back from here (an id names its bytes)
        body = self._text_of(blob_id)
        if body is not None:
            index(self._db(), rowid, path, body)

    def remove(self, memory_id: str) -> None:
        """Take the note's text out (before its row changes or goes)."""
        db = self._db()
        row = db.execute(
            "SELECT n.rowid, n.path, n.blob_id FROM notes n JOIN note_text_docsize t ON t.id = n.rowid"
            " WHERE n.memory_id=?",
            (stored.note_key(memory_id, "sqlite"),),
        ).fetchone()
        if row is None:
            return  # no such note, or never indexed (encrypted, or its blob unreadable when it was)
        rowid, path, blob_id = row[0], row[1], stored.hash_hex(row[2])
        try:
            body = self._text_of(blob_id)
        except KeyError:  # the indexed text cannot be read back: index every other note anew
            log.warning("the blob %s of %s is missing; its store's text table is filled anew", blob_id, path)
            unindex_all(db)
            self.fill()
            return
        if body is not None:
            unindex(db, rowid, path, body)

    def fill(self) -> None:
        """Index every note of ``notes`` whose blob can be read (a new or emptied text table)."""
        db = self._db()
        for rowid, path, blob_id in db.execute("SELECT rowid, path, blob_id FROM notes").fetchall():
            try:
                self.place(rowid, path, stored.hash_hex(blob_id), None)
            except KeyError:
                log.warning("the blob %s of %s is missing; the note is not searchable", blob_id, path)


def put_on_postgres(db: Any, memory_id: str, path: str, data: bytes) -> None:
    """PostgreSQL's text row of a note (none for an encrypted blob)."""
    body = text(data)
    if body is None:
        db.execute("DELETE FROM search_text WHERE memory_id=?", (memory_id,))
    else:
        put_text(db, memory_id, path, body)


# -- in memory (an encrypted store's) ----------------------------------------------------------------


def memory_schema(db: sqlite3.Connection) -> None:
    for statement in _MEMORY_TABLES:
        db.execute(statement)


def put(db: sqlite3.Connection, memory_id: str, path: str, body: str) -> None:
    row = db.execute("SELECT docid FROM search_docs WHERE memory_id=?", (memory_id,)).fetchone()
    if row is None:
        docid = db.execute("INSERT INTO search_docs (memory_id, path) VALUES (?,?)", (memory_id, path)).lastrowid
    else:
        docid = row[0]
        db.execute("DELETE FROM search_text WHERE rowid=?", (docid,))
        db.execute("UPDATE search_docs SET path=? WHERE docid=?", (path, docid))
    db.execute("INSERT INTO search_text (rowid, path, body) VALUES (?,?,?)", (docid, path, body))


def forget(db: sqlite3.Connection, memory_id: str) -> None:
    db.execute("DELETE FROM search_text WHERE rowid IN (SELECT docid FROM search_docs WHERE memory_id=?)", (memory_id,))
    db.execute("DELETE FROM search_docs WHERE memory_id=?", (memory_id,))


# -- snippets ---------------------------------------------------------------------------------------


def snippets(expression: str, texts: Iterable[tuple[str, str]], snippet_sql: str) -> list[str | None]:
    """``snippet_sql`` (a ``snippet(t, ...)`` call on table ``t``) for each (path, body) that matches
    ``expression``, in order (``None`` for one that does not, as a note changed since it was found)."""
    rows = list(enumerate(texts))
    if not rows:
        return []
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        db.execute(f"CREATE VIRTUAL TABLE t USING fts5(path, body, {TOKENIZE})")
        db.executemany("INSERT INTO t (rowid, path, body) VALUES (?,?,?)", [(i, p, b) for i, (p, b) in rows])
        found = dict(db.execute(f"SELECT rowid, {snippet_sql} FROM t WHERE t MATCH ?", (expression,)))  # noqa: S608  the caller's constant SQL; the query is bound
    return [found.get(i) for i, _ in rows]


__all__ = [
    "NoteTexts",
    "clear",
    "ensure_schema",
    "forget",
    "index",
    "memory_schema",
    "put",
    "put_on_postgres",
    "snippets",
    "text",
    "unindex",
    "unindex_all",
]
