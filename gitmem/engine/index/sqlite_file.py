"""What only the SQLite file of a store's index needs: its tables, and finding it damaged and setting it aside.

The index is derived from Git, so a damaged file (garbage bytes, a file cut short) is moved aside and
rebuilt from history rather than repaired (:class:`gitmem.engine.index.store_index.StoreIndex`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
import zlib
from pathlib import Path

from gitmem import ids
from gitmem.engine.index import stored
from gitmem.recent import Recent

log = logging.getLogger("gitmem.engine.index.store_index")  # what an operator has always seen it as

# The index's tables in the SQLite file (PostgreSQL's: gitmem.engine.index.postgres_schema).
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
-- Hashes (blob_id, sha256, commit_id) and ids (memory_id, version_id, actor_id, redacted_by_id) are
-- their bytes (.stored); files made before hold their text in columns declared TEXT, until pack_keys
-- converts them.
CREATE TABLE IF NOT EXISTS notes (
    memory_id BLOB PRIMARY KEY, path TEXT NOT NULL UNIQUE, blob_id BLOB NOT NULL,
    sha256 BLOB NOT NULL, size INTEGER NOT NULL, version_id BLOB NOT NULL,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS versions (
    seq INTEGER PRIMARY KEY, version_id BLOB NOT NULL UNIQUE, memory_id BLOB NOT NULL,
    operation TEXT NOT NULL, path TEXT, sha256 BLOB, size INTEGER, blob_id BLOB,
    created_at INTEGER NOT NULL, actor_type TEXT, actor_id BLOB, commit_id BLOB NOT NULL,
    redacted_at INTEGER, redacted_by_type TEXT, redacted_by_id BLOB);
-- Every entry of an index ends with its row's seq (the rowid), so (memory_id) finds a note's versions
-- in seq order; an actor's id names its kind.
CREATE INDEX IF NOT EXISTS versions_memory ON versions (memory_id);
CREATE INDEX IF NOT EXISTS versions_actor ON versions (actor_id);
-- Finds a path's case-only twins (paths.fold) without a scan; lower() folds ASCII, the rest is checked
-- in Python. Only paths with an upper-case letter: the others are their own lower case, which the
-- path's own index finds (queries._twin_candidates), so a store of lower-case paths keeps none.
CREATE INDEX IF NOT EXISTS notes_upper ON notes (lower(path)) WHERE path <> lower(path);
-- Count and bytes of the notes, kept by triggers: every write checks the limits, and a scan of the
-- notes on each write grew with the store.
CREATE TABLE IF NOT EXISTS totals (id INTEGER PRIMARY KEY CHECK (id = 1), notes INTEGER NOT NULL,
                                   bytes INTEGER NOT NULL);
INSERT OR IGNORE INTO totals SELECT 1, count(*), coalesce(sum(size), 0) FROM notes;
CREATE TRIGGER IF NOT EXISTS notes_added AFTER INSERT ON notes
    BEGIN UPDATE totals SET notes = notes + 1, bytes = bytes + NEW.size; END;
CREATE TRIGGER IF NOT EXISTS notes_removed AFTER DELETE ON notes
    BEGIN UPDATE totals SET notes = notes - 1, bytes = bytes - OLD.size; END;
CREATE TRIGGER IF NOT EXISTS notes_resized AFTER UPDATE OF size ON notes
    BEGIN UPDATE totals SET bytes = bytes - OLD.size + NEW.size; END;
"""
# Pages of a new index file: its two dozen tables and indexes take a page each at least, so SQLite's
# 4 KiB made an index of one note 84 KiB; at 1 KiB it is about 24 KiB (a store at rest costs what Git
# costs, issue 27). Existing files keep theirs.
PAGE_SIZE = 1024
# WAL pages after which a write's commit checkpoints the index (SQLite's default; 1 MiB at 1 KiB pages):
# at the catalog's 64, a batch's commit checkpointed every few writes, each time flushing the file twice
# (synchronous=NORMAL), 0.65 ms of CPU a write more and a p50 1.0 ms longer (4.43 against 3.42 ms, one
# writer, two stores side by side). A store gone quiet still empties its WAL (``checkpoint``).
WRITTEN_WAL_PAGES = 1000
SCHEMA_MARK = zlib.crc32(SCHEMA.encode()) & 0x7FFFFFFF  # kept in PRAGMA user_version

_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}  # not "locked" or "busy": those are not damage


# path -> (inode, size, mtime) of index files this process checked whole, or closed cleanly itself; the
# most recent only, so that 10,000 stores touched do not keep 10,000 (a file forgotten is checked whole
# again when it reopens: a few pages for a small store).
VERIFIED_FILES = 4096
_verified: Recent[str, tuple[int, int, int]] = Recent(VERIFIED_FILES)


def _seen_sound(path: Path, stat: os.stat_result) -> None:
    _verified.put(str(path), (stat.st_ino, stat.st_size, stat.st_mtime_ns))


def _probe(path: Path) -> None:
    """Open ``path`` and read it whole once per file (and size) in this process: a file cut short can
    open and answer the first queries, and ``quick_check`` reads every page (about 35 ms for 50,000
    versions). Raises ``sqlite3.DatabaseError`` if it is damaged."""
    if not path.exists():
        return
    stat = path.stat()
    if _verified.get(str(path)) == (stat.st_ino, stat.st_size, stat.st_mtime_ns):
        return
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        damage = [row[0] for row in db.execute("PRAGMA quick_check")]
    if damage != ["ok"]:
        raise sqlite3.DatabaseError("; ".join(map(str, damage[:3])))
    _seen_sound(path, stat)


def mark_sound(path: Path) -> None:
    """``path`` is as this process left it, its connections closed cleanly (a store closed by the
    cache of open stores): reopening it skips the whole read, unless another process changed it."""
    try:
        stat = path.stat()
    except OSError:
        return
    _seen_sound(path, stat)


def set_aside_if_damaged(path: Path) -> Path | None:
    """The index is derived from Git, so a damaged one (garbage bytes, a file cut short) is moved aside
    as ``index.sqlite3.corrupt-<time>`` and ``catch_up`` fills a new one from history. Returns where a
    damaged file was set aside (``None`` if it was sound)."""
    try:
        found = path.stat().st_ino
    except FileNotFoundError:
        return None
    try:
        _probe(path)
        return None
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(exc, sqlite3.OperationalError) or (code is not None and code not in _DAMAGED):
            raise
        reason = str(exc)
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        # Only the file found damaged: another process may already have set it aside and made a new one.
        if path.stat().st_ino == found:
            path.rename(aside)
            for suffix in ("-wal", "-shm"):  # a stale log must never be replayed into the new file
                sidecar = path.with_name(path.name + suffix)
                if sidecar.exists():
                    sidecar.rename(aside.with_name(aside.name + suffix))
            log.warning("index %s was damaged (%s); set aside as %s and rebuilt from history", path, reason, aside.name)
    except FileNotFoundError:
        pass
    return aside


# Indexes whose columns changed: dropped where a file has them otherwise, for SCHEMA to make anew.
_INDEX_COLUMNS = {"versions_memory": ["memory_id"], "versions_actor": ["actor_id"]}
# Indexes no longer kept: every path's lower case (now notes_upper), and the versions by time (a time
# filter without a note or an actor scans the versions: 6.5 ms for 50,000, 18 B a note less).
_GONE = ("notes_lower", "versions_created")


Value = bytes | str | None  # a hash or an id in an index file's row
# What each table keeps as bytes (.stored), and which rows are not converted yet.
_KEYS = {
    "notes": (
        f"blob_id=h(blob_id), sha256=h(sha256), memory_id=i(memory_id, '{ids.MEMORY}'),"
        f" version_id=i(version_id, '{ids.VERSION}')",
        "typeof(sha256)='text' OR typeof(memory_id)='text'",
    ),
    "versions": (
        f"sha256=h(sha256), blob_id=h(blob_id), commit_id=h(commit_id), memory_id=i(memory_id, '{ids.MEMORY}'),"
        f" version_id=i(version_id, '{ids.VERSION}'), actor_id=a(actor_type, actor_id),"
        " redacted_by_id=a(redacted_by_type, redacted_by_id)",
        "typeof(commit_id)='text' OR typeof(version_id)='text' OR typeof(actor_id)='text'"
        " OR typeof(redacted_by_id)='text'",
    ),
}


def redefine_indexes(db: sqlite3.Connection) -> None:
    """Drop the indexes of :data:`_INDEX_COLUMNS` that a file made before has on other columns, and
    those of :data:`_GONE`."""
    for name in _GONE:
        db.execute(f"DROP INDEX IF EXISTS {name}")
    for name, columns in _INDEX_COLUMNS.items():
        found = [row[2] for row in db.execute(f"PRAGMA index_info({name})")]
        if found and found != columns:
            db.execute(f"DROP INDEX {name}")


def pack_keys(db: sqlite3.Connection) -> bool:
    """Turn the hashes and ids a file made before keeps as text into the bytes the index keeps now, in
    one transaction (an id made elsewhere stays text); returns whether any value changed, so that the
    caller compacts the file once (not a file whose only text is ids made elsewhere)."""
    converted = 0

    def kept(value: str, key: Value) -> Value:
        nonlocal converted
        converted += key != value  # an id made elsewhere keeps its text
        return key

    # SQL functions of the UPDATEs below; a value no longer text (a row converted already) stays as it is.
    def h(value: Value) -> Value:
        return kept(value, stored.hash_key(value, "sqlite")) if isinstance(value, str) else value

    def i(value: Value, prefix: str) -> Value:
        return kept(value, stored.id_key(value, prefix, "sqlite")) if isinstance(value, str) else value

    def a(kind: str | None, value: Value) -> Value:
        return kept(value, stored.actor_id_key(kind, value, "sqlite")) if kind and isinstance(value, str) else value

    db.create_function("h", 1, h, deterministic=True)
    db.create_function("i", 2, i, deterministic=True)
    db.create_function("a", 2, a, deterministic=True)
    db.execute("BEGIN IMMEDIATE")
    try:
        for table, (sets, old) in _KEYS.items():
            db.execute(f"UPDATE {table} SET {sets} WHERE {old}")  # noqa: S608  the code's own SQL
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return converted > 0


def compact(db: sqlite3.Connection, write_lock: threading.Lock) -> None:
    """Give back the free pages of a file whose tables were just replaced (a migration), once: a
    VACUUM, skipped (left for a later rewrite's) if another connection is writing or reading."""
    with write_lock:
        try:
            db.execute("VACUUM")
        except sqlite3.OperationalError as exc:
            log.info("index %s not compacted after its migration: %s", db, exc)


__all__ = ["compact", "mark_sound", "pack_keys", "redefine_indexes", "set_aside_if_damaged"]
