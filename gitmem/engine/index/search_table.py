"""The text table a store's index keeps for search (SQLite FTS5, ``porter unicode61``).

The index calls :func:`index_note` in the same transaction that applies each version, and a trigger
on ``notes`` removes the text of every note that leaves it (deleted, displaced at its path, a
rebuild), so whatever moves ``main`` (a write, a push, a rewrite) keeps the text current. A history
rewrite rebuilds the index from scratch (:func:`clear`) and then compacts the file, so redacted or
expired text leaves its bytes too. Encrypted blobs are never indexed here (see :mod:`gitmem.engine.index.search`).

On PostgreSQL the text lives in the store schema's ``search_text`` (:mod:`gitmem.engine.index.postgres_schema`):
the same calls, a ``tsvector`` instead of FTS5, and a foreign key instead of the trigger.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pygit2

from gitmem.crypto.codec import is_encrypted
from gitmem.engine.index.postgres_schema import put_text
from gitmem.git.repository import blob_at

_TABLES = (
    "CREATE TABLE IF NOT EXISTS search_docs (docid INTEGER PRIMARY KEY, memory_id TEXT NOT NULL UNIQUE,"
    " path TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS search_docs_path ON search_docs (path)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS search_text USING fts5(path, body, tokenize='porter unicode61')",
)
# Every way a note leaves the index's ``notes`` table (deleted, displaced at its path, a rebuild)
# takes its text along.
_REMOVAL_TRIGGER = """
CREATE TRIGGER IF NOT EXISTS notes_unsearchable AFTER DELETE ON notes BEGIN
    DELETE FROM search_text WHERE rowid IN (SELECT docid FROM search_docs WHERE memory_id = OLD.memory_id);
    DELETE FROM search_docs WHERE memory_id = OLD.memory_id;
END"""


def _on_postgres(db: Any) -> bool:
    return getattr(db, "dialect", "sqlite") == "postgresql"


def ensure_schema(db: sqlite3.Connection, repo: pygit2.Repository | None = None) -> None:
    """The text tables beside an index's ``notes`` table (or alone, in memory). An index made before
    search existed gets its notes' text from ``repo`` once. (SQLite: PostgreSQL's store schema has them.)"""
    present = {
        row[0]
        for row in db.execute(
            "SELECT name FROM sqlite_master WHERE name IN ('search_text', 'search_docs', 'notes_unsearchable')"
        )
    }
    if len(present) == 3:
        return  # the usual case: no write lock taken to open a store
    db.execute("BEGIN IMMEDIATE")
    try:
        fresh = not db.execute("SELECT 1 FROM sqlite_master WHERE name='search_text'").fetchone()
        for statement in _TABLES:
            db.execute(statement)
        if db.execute("SELECT 1 FROM sqlite_master WHERE name='notes'").fetchone():
            db.execute(_REMOVAL_TRIGGER)
            if fresh and repo is not None:
                for memory_id, path, blob_id in db.execute("SELECT memory_id, path, blob_id FROM notes").fetchall():
                    index_note(db, repo, memory_id, path, blob_id)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def clear(db: Any) -> None:
    """Empty the text tables before a rebuild. Dropping the FTS table (rather than deleting its rows)
    leaves no old segment behind; the rewriter's VACUUM then removes the freed pages. (PostgreSQL: the
    rows go with their notes.)"""
    if _on_postgres(db):
        return
    db.execute("DROP TABLE IF EXISTS search_text")
    db.execute("DELETE FROM search_docs")
    for statement in _TABLES:
        db.execute(statement)


def put(db: Any, memory_id: str, path: str, body: str) -> None:
    if _on_postgres(db):
        put_text(db, memory_id, path, body)
        return
    row = db.execute("SELECT docid FROM search_docs WHERE memory_id=?", (memory_id,)).fetchone()
    if row is None:
        docid = db.execute("INSERT INTO search_docs (memory_id, path) VALUES (?,?)", (memory_id, path)).lastrowid
    else:
        docid = row[0]
        db.execute("DELETE FROM search_text WHERE rowid=?", (docid,))
        db.execute("UPDATE search_docs SET path=? WHERE docid=?", (path, docid))
    db.execute("INSERT INTO search_text (rowid, path, body) VALUES (?,?,?)", (docid, path, body))


def forget(db: Any, memory_id: str) -> None:
    if _on_postgres(db):
        db.execute("DELETE FROM search_text WHERE memory_id=?", (memory_id,))
        return
    db.execute("DELETE FROM search_text WHERE rowid IN (SELECT docid FROM search_docs WHERE memory_id=?)", (memory_id,))
    db.execute("DELETE FROM search_docs WHERE memory_id=?", (memory_id,))


def index_note(
    db: Any,
    repo: pygit2.Repository,
    memory_id: str,
    path: str,
    blob_id: str,
    *,
    data: bytes | None = None,
) -> None:
    """A note's current path and text, as the index applies its version. An encrypted blob is never
    indexed on disk (its store is searched in memory). ``data``: the blob, when it is not in the
    repository yet (the write path indexes a batch before its pack is written)."""
    if data is None:
        data = blob_at(repo, blob_id).read_raw()
    if is_encrypted(data):
        forget(db, memory_id)
        return
    put(db, memory_id, path, data.decode("utf-8", "replace"))


__all__ = ["clear", "ensure_schema", "forget", "index_note", "put"]
