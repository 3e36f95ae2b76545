"""Full-text search over a store's current notes: BM25 (SQLite FTS5, ``porter unicode61``), the path
weighted above the body, snippets with the matched words in ``**``.

Plain stores keep their text table in the store's index file, kept by the index itself in the step
that applies each version (:mod:`gitmem.engine.index.search_table`): a note is findable once its write returns.

Encrypted stores put no text on disk: each process keeps an in-memory FTS table per store, filled
from decrypted notes on the first search and brought up to date, note by note, whenever ``main`` has
moved since the last one.

**A time budget.** The query's bounds (:mod:`gitmem.engine.index.search_query`) keep what one query may
ask for small; what it may still cost on a big store is bounded by the store's ``search_budget``
(``GITMEM_SEARCH_BUDGET`` seconds): SQLite's progress handler stops the statement once the budget is
spent, PostgreSQL's ``statement_timeout`` (set for the search's transaction alone) does the same there,
and either is :class:`~gitmem.errors.SearchTooCostly`, a 400 on every surface.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pygit2

from gitmem import metrics
from gitmem.crypto.codec import ContentCodec, PlainCodec
from gitmem.engine.index import postgres_schema as index_pg
from gitmem.engine.index.queries import note_row
from gitmem.engine.index.search_query import groups, to_fts
from gitmem.engine.index.search_table import forget, memory_schema, put, snippets
from gitmem.engine.index.search_table import text as blob_text
from gitmem.engine.index.store_index import NoteRow, StoreIndex, upper_bound
from gitmem.errors import InvalidRequest, SearchTooCostly
from gitmem.git.repository import blob_at
from gitmem.model import Note, Page
from gitmem.rules import paths
from gitmem.rules.paging import check_limit

MAX_SEARCH_PAGE = 100
MAX_OFFSET = 1_000_000  # a page token deeper than this is not one we made
PATH_WEIGHT, BODY_WEIGHT = 5.0, 1.0
MARK = "**"  # around each matched word in a snippet
SNIPPET_TOKENS = 24
MEMORY_INDEXES_PER_PROCESS = 32  # encrypted stores whose text a process keeps in memory
SEARCH_BUDGET_SECONDS = 1.0  # the default of GITMEM_SEARCH_BUDGET
PROGRESS_STEPS = 1000  # SQLite virtual machine steps between two looks at the clock


class Searched(Protocol):
    """What search reads of a store (:class:`gitmem.engine.store.store.MemoryStore`)."""

    path: Path
    index: StoreIndex
    codec: ContentCodec
    search_budget: float  # seconds one search may take in the database

    @property
    def repo(self) -> pygit2.Repository: ...

    def note_from_row(self, row: NoteRow, with_content: bool) -> Note: ...


@dataclass(frozen=True)
class SearchHit:
    note: Note  # the basic view: no content
    score: float  # higher is better
    snippets: tuple[str, ...]


# -- encrypted stores: in memory -----------------------------------------------------------------


class _MemoryText:
    """One encrypted store's text in an in-memory SQLite database, shared by the process's threads."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA temp_store=MEMORY")  # sorts and temporary tables never spill to disk
        memory_schema(self.db)
        self.lock = threading.Lock()
        self.tip: str | None = None
        self.seen: dict[str, tuple[str, str]] = {}  # memory_id -> (path, blob_id)

    def sync(self, store: Searched) -> None:
        """Bring the table to the store's (caught-up) index: only the notes that changed."""
        tip = store.index.indexed_tip()
        if tip == self.tip:
            return
        current = {row.memory_id: (row.path, row.blob_id) for row in store.index.all_notes()}
        self.db.execute("BEGIN")
        try:
            for memory_id in self.seen.keys() - current.keys():
                forget(self.db, memory_id)
            for memory_id, (path, blob_id) in current.items():
                if self.seen.get(memory_id) != (path, blob_id):
                    body = store.codec.decode(path, blob_at(store.repo, blob_id).read_raw()).decode("utf-8", "replace")
                    put(self.db, memory_id, path, body)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        self.tip, self.seen = tip, current


_memory_texts: OrderedDict[str, _MemoryText] = OrderedDict()
_memory_texts_lock = threading.Lock()


def _memory_text(store: Searched) -> _MemoryText:
    key = str(store.path.resolve())
    with _memory_texts_lock:
        text = _memory_texts.get(key)
        if text is None:
            text = _memory_texts[key] = _MemoryText()
            while len(_memory_texts) > MEMORY_INDEXES_PER_PROCESS:
                _memory_texts.popitem(last=False)[1].db.close()
        _memory_texts.move_to_end(key)
        return text


def forget_store(store_path: Path) -> None:
    """Drop a deleted store's in-memory text (if this process holds any)."""
    with _memory_texts_lock:
        text = _memory_texts.pop(str(store_path.resolve()), None)
    if text is not None:
        text.db.close()


# -- searching ------------------------------------------------------------------------------------

_SNIPPET = f"snippet({{table}}, 1, '{MARK}', '{MARK}', '…', {SNIPPET_TOKENS})"
_RANK = f"bm25({PATH_WEIGHT}, {BODY_WEIGHT})"
# In memory (an encrypted store's text, with its content): the snippets come with the hits.
_MEMORY_QUERY = (
    f"SELECT d.memory_id, -rank, {_SNIPPET.format(table='search_text')}"  # noqa: S608  constants; the query is bound
    " FROM search_text JOIN search_docs d ON d.docid = search_text.rowid"
    f" WHERE search_text MATCH ? AND rank MATCH '{_RANK}'"
    " AND d.path >= ? AND d.path < ? ORDER BY rank LIMIT ? OFFSET ?"
)
# In the index file (no copy of the texts, search_table): the hits with their notes' rows, then the page's
# snippets from their blobs.
_QUERY = (
    "SELECT d.*, -rank AS score FROM note_text JOIN notes d ON d.rowid = note_text.rowid"  # noqa: S608  constants; the query is bound
    f" WHERE note_text MATCH ? AND rank MATCH '{_RANK}'"
    " AND d.path >= ? AND d.path < ? ORDER BY rank LIMIT ? OFFSET ?"
)


def over_budget(seconds: float) -> SearchTooCostly:
    return SearchTooCostly(
        f"this search was stopped after {seconds:g} s, the most one search may take here;"
        " search with fewer OR alternatives, fewer prefixes (word*) or longer ones"
    )


@contextlib.contextmanager
def _budget(db: sqlite3.Connection, seconds: float) -> Iterator[None]:
    """The block's statements on ``db`` stopped (:class:`SearchTooCostly`) once ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    db.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
    try:
        yield
    except sqlite3.OperationalError as error:
        if str(error) != "interrupted":
            raise
        raise over_budget(seconds) from None
    finally:
        db.set_progress_handler(None, 0)


def _fingerprint(query: str, prefix: str) -> str:
    return hashlib.sha256(f"{prefix}\x00{query}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _offset(index: StoreIndex, page: str | None, fingerprint: str) -> int:
    if page is None:
        return 0
    offset, found = index.tokens.decode(page, "search", int, str)
    if not 0 <= offset <= MAX_OFFSET:
        raise InvalidRequest("invalid page token")
    if found != fingerprint:
        raise InvalidRequest("invalid page token: it belongs to another search")
    return int(offset)


def search(
    store: Searched, query: str, path_prefix: str | None = None, limit: int = 20, page: str | None = None
) -> Page[SearchHit]:
    """The store's current notes that match ``query`` (see :mod:`gitmem.engine.index.search_query`), best first."""
    with metrics.SEARCH_SECONDS.time():
        return _search(store, query, path_prefix, limit, page)


def _search(store: Searched, query: str, path_prefix: str | None, limit: int, page: str | None) -> Page[SearchHit]:
    check_limit(limit, MAX_SEARCH_PAGE, full=False)
    prefix = paths.validate_prefix(path_prefix or "/")
    fingerprint = _fingerprint(query, prefix)
    offset = _offset(store.index, page, fingerprint)
    expression = to_fts(query)
    store.index.catch_up()
    if expression is None:
        return Page([], None)
    upper = upper_bound(prefix) if prefix != "/" else "0"
    args = (prefix, upper, limit + 1, offset)
    budget = store.search_budget
    if not isinstance(store.codec, PlainCodec):
        text = _memory_text(store)
        with text.lock:
            text.sync(store)
            with _budget(text.db, budget):
                rows = text.db.execute(_MEMORY_QUERY, (expression, *args)).fetchall()
    elif store.index.dialect == "postgresql":
        statement = index_pg.search_sql(SNIPPET_TOKENS)
        tsquery = index_pg.to_tsquery(groups(query))
        try:
            rows = store.index.db.read_bounded(statement, (tsquery, *args), budget).fetchall()
        except TimeoutError:
            raise over_budget(budget) from None
    else:
        with _budget(store.index.db, budget):
            found = store.index.db.execute(_QUERY, (expression, *args)).fetchall()
        shown = _with_snippets(store, expression, [(note_row(r), r["score"]) for r in found[:limit]])
        return _page(store, shown, len(found) > limit, offset + limit, fingerprint)
    # The text is apart from the notes here: a hit's note may have been deleted by another process since.
    looked_up = [(store.index.note(memory_id), score, snippet) for memory_id, score, snippet in rows[:limit]]
    return _page(store, looked_up, len(rows) > limit, offset + limit, fingerprint)


def _page(
    store: Searched,
    rows: list[tuple[NoteRow | None, float, str | None]],
    more: bool,
    next_offset: int,
    fingerprint: str,
) -> Page[SearchHit]:
    hits = []
    for row, score, snippet in rows:
        if row is not None:
            shown = (snippet.strip(),) if snippet and snippet.strip() else ()
            hits.append(SearchHit(store.note_from_row(row, with_content=False), float(score), shown))
    return Page(hits, store.index.tokens.encode("search", next_offset, fingerprint) if more else None)


def _with_snippets(
    store: Searched, expression: str, hits: list[tuple[NoteRow, float]]
) -> list[tuple[NoteRow | None, float, str | None]]:
    """The index file's hits of a page with their snippets, made from the blobs their notes name."""
    texts = [(row.path, blob_text(blob_at(store.repo, row.blob_id).read_raw()) or "") for row, _ in hits]
    made = snippets(expression, texts, _SNIPPET.format(table="t"))
    return [(row, score, snippet) for (row, score), snippet in zip(hits, made, strict=True)]


__all__ = ["MAX_SEARCH_PAGE", "SEARCH_BUDGET_SECONDS", "SearchHit", "forget_store", "over_budget", "search"]
