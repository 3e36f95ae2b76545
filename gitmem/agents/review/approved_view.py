"""A store as it stood at its review mark: what tasks read under ``read_approved_only``.

Built from the index's versions: each note's newest unredacted version at or before the mark, left
out if that version deleted it. The rows go into a small in-memory SQLite table shaped like the
index's ``notes`` table, so listing, paging and path lookups are the index's own queries (one rule).
Built once per (mark, tip) and shared by every thread; a new tip or a new mark builds it again.

Versions after the mark are not there for the view (neither listed, nor read, nor diffed): their
content is what the review has not seen; nor are the store's conflicts, for the same reason. Writes go
to the store itself: a task's own writes are pending until a reviewer approves them, so it does not
read them back. They are planned on the store as the view shows it (:mod:`.approved_writes`): what
the task cannot read does not exist for its writes either.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

from gitmem.agents.review.approved_writes import FencedBatch, may_change
from gitmem.agents.review.mark import ReviewMark, mark_seq
from gitmem.engine.index.store_index import NoteRow, StoreIndex
from gitmem.engine.store.conflicts import ConflictLog, hidden
from gitmem.engine.store.diff import VersionDiff
from gitmem.engine.store.group_commit import Landed, Plan
from gitmem.engine.store.store import MemoryStore, check_listing
from gitmem.errors import NotFound
from gitmem.model import Actor, MemoryPrefix, Note, Page, Version
from gitmem.recent import Recent

_NOTES_TABLE = """CREATE TABLE notes (
    memory_id TEXT PRIMARY KEY, path TEXT NOT NULL UNIQUE, blob_id TEXT NOT NULL, sha256 TEXT NOT NULL,
    size INTEGER NOT NULL, version_id TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)"""

# At or before the mark: each note's newest version that says what it holds (redacted ones do not).
_APPROVED = """
SELECT v.memory_id, v.path, v.blob_id, v.sha256, v.size, v.version_id,
       (SELECT min(f.created_at) FROM versions f WHERE f.memory_id = v.memory_id) AS created_at,
       v.created_at AS updated_at, v.operation
FROM versions v JOIN (SELECT memory_id, max(seq) AS seq FROM versions
                      WHERE seq <= ? AND redacted_at IS NULL GROUP BY memory_id) last ON v.seq = last.seq
"""


class ApprovedNotes:
    """The approved notes in memory, queried with :class:`StoreIndex`'s own methods."""

    def __init__(self, store: MemoryStore, upto_seq: int) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute(_NOTES_TABLE)
        rows = store.index.db.execute(_APPROVED, (upto_seq,)).fetchall()
        self.db.execute("BEGIN")
        for r in rows:
            if r["operation"] == "deleted" or r["blob_id"] is None or r["path"] is None:
                continue
            # Two notes could claim one path only if retention dropped the version that moved one
            # away; the later claim wins, as the replay of history does.
            self.db.execute("INSERT OR REPLACE INTO notes VALUES (?,?,?,?,?,?,?,?)", tuple(r)[:8])
        self.db.execute("COMMIT")
        self.lock = threading.Lock()
        self.upto_seq = upto_seq
        self.tokens = store.index.tokens  # list_notes signs its page tokens as the store's index does
        self.dialect = store.index.dialect  # the rows hold the index's values, keys as it keeps them

    def note(self, memory_id: str) -> NoteRow | None:
        with self.lock:
            return StoreIndex.note(self, memory_id)  # type: ignore[arg-type]

    def note_at(self, path: str) -> NoteRow | None:
        with self.lock:
            return StoreIndex.note_at(self, path)  # type: ignore[arg-type]

    def list_notes(
        self, prefix: str, depth: int, limit: int, page: str | None
    ) -> tuple[list[NoteRow | MemoryPrefix], str | None]:
        with self.lock:
            return StoreIndex.list_notes(self, prefix, depth, limit, page)  # type: ignore[arg-type]

    def totals(self) -> tuple[int, int]:
        with self.lock:
            count, size = self.db.execute("SELECT count(*), coalesce(sum(size), 0) FROM notes").fetchone()
        return int(count), int(size)


# One view a store, for the stores read under review most recently (each is an in-memory table).
APPROVED_VIEWS_KEPT = 64
_cache: Recent[tuple[str, str | None, str | None], ApprovedNotes] = Recent(APPROVED_VIEWS_KEPT)


def approved_notes(store: MemoryStore, mark: ReviewMark | None) -> ApprovedNotes:
    tip = store.index.catch_up()
    key = (str(store.path), mark.record_id if mark else None, str(tip) if tip else None)
    found = _cache.get(key)
    if found is None:
        found = ApprovedNotes(store, mark_seq(store, mark))
        _cache.drop(lambda k: k[0] == key[0])  # one view a store: an older mark or tip is not read again
        _cache.put(key, found)
    return found


class ApprovedView:
    """Reads like a :class:`MemoryStore` (``get``, ``get_by_path``, ``list``, ``search``) and writes
    to it through a fence (``create``, ``upsert``, ``update``, ``delete``, ``commit_plan``); the rest
    is the store's."""

    def __init__(self, store: MemoryStore, notes: ApprovedNotes, mark: ReviewMark | None) -> None:
        self._store = store
        self._notes = notes
        self.mark = mark
        self.approved_only = True

    @classmethod
    def of(cls, store: MemoryStore, mark: ReviewMark | None) -> ApprovedView:
        return cls(store, approved_notes(store, mark), mark)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @property
    def conflicts(self) -> ConflictLog:
        """None to read: a conflict's text is what no reviewer has seen (the task's own are still kept)."""
        return hidden(self._store.conflicts)

    def _note(self, row: NoteRow, with_content: bool) -> Note:
        return self._store.note_from_row(row, with_content)

    def get(self, memory_id: str, with_content: bool = True) -> Note:
        row = self._notes.note(memory_id)
        if row is None:
            raise NotFound(f"memory {memory_id} not found")
        return self._note(row, with_content)

    def get_by_path(self, path: str, with_content: bool = True) -> Note:
        row = self._notes.note_at(path)
        if row is None:
            raise NotFound(f"no memory at {path}")
        return self._note(row, with_content)

    def list(
        self,
        path_prefix: str | None = None,
        depth: int = 0,
        limit: int = 20,
        page: str | None = None,
        with_content: bool = False,
    ) -> Page[Note | MemoryPrefix]:
        prefix = check_listing(path_prefix, depth, limit, with_content=with_content)
        rows, token = self._notes.list_notes(prefix, depth, limit, page)
        return Page([r if isinstance(r, MemoryPrefix) else self._note(r, with_content) for r in rows], token)

    def totals(self) -> tuple[int, int]:
        return self._notes.totals()

    def _approved(self, version_id: str) -> bool:
        row = self._store.index.version(version_id)
        return row is not None and row.seq <= self._notes.upto_seq

    def version(self, version_id: str, with_content: bool = True) -> Version:
        if not self._approved(version_id):
            raise NotFound(f"memory version {version_id} not found")
        return self._store.version(version_id, with_content)

    def versions(self, **filters: Any) -> Page[Version]:
        """The store's listing without the versions after the mark (a page may hold fewer)."""
        found = self._store.versions(**filters)
        return Page([v for v in found.items if self._approved(v.id)], found.next_page)

    def diff(self, version_id: str, against: str | None = None) -> VersionDiff:
        for wanted in (version_id, against):
            if wanted is not None and not self._approved(wanted):
                raise NotFound(f"memory version {wanted} not found")
        return self._store.diff(version_id, against)

    def search(self, query: str, path_prefix: str | None = None, limit: int = 20, page: str | None = None) -> Page[Any]:
        """The store's search, keeping only hits whose approved content is what was matched (a page
        may hold fewer than ``limit`` hits)."""
        found = self._store.search(query, path_prefix, limit, page)
        kept = []
        for hit in found.items:
            row = self._notes.note(hit.note.id)
            if row is not None and row.blob_id == hit.note.blob_id:
                kept.append(hit)
        return Page(kept, found.next_page)

    # -- writing: to the store, as the view shows it -------------------------------------------------

    def _writer(self) -> MemoryStore:
        notes = self._notes
        return self._store.fenced(lambda view: FencedBatch(view, notes))

    def commit_plan(self, plan: Plan, *, archived_ok: bool = False, keep_conflicts: bool = True) -> Landed | None:
        return self._writer().commit_plan(plan, archived_ok=archived_ok, keep_conflicts=keep_conflicts)

    def create(self, path: str, content: str, actor: Actor | None = None) -> Note:
        return self._writer().create(path, content, actor)

    def upsert(
        self, path: str, content: str, actor: Actor | None = None, expected_sha256: str | None = None
    ) -> tuple[Note, bool]:
        return self._writer().upsert(path, content, actor, expected_sha256)

    def update(self, memory_id: str, *args: Any, **kwargs: Any) -> Note:
        may_change(self._store.index, self._notes, memory_id)
        return self._writer().update(memory_id, *args, **kwargs)

    def delete(self, memory_id: str, **kwargs: Any) -> Version:
        may_change(self._store.index, self._notes, memory_id)
        return self._writer().delete(memory_id, **kwargs)
