"""The index file's contentless text table (search_table): what it is handed back when a note changes
or leaves is exactly what it was given, even for a version whose blob is not packed yet, and an index
of schema 1 (its own copy of every text) is migrated when first opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index import stored as keys
from gitmem.engine.store.store import MemoryStore
from gitmem.git import repository
from tests.unit.engine.index.test_search import found
from tests.unit.engine.store.test_group_commit import Writers

# Schema 1's text tables, as indexes made before this change hold them (and how they were filled).
SCHEMA_1 = (
    "CREATE TABLE search_docs (docid INTEGER PRIMARY KEY, memory_id TEXT NOT NULL UNIQUE, path TEXT NOT NULL)",
    "CREATE INDEX search_docs_path ON search_docs (path)",
    "CREATE VIRTUAL TABLE search_text USING fts5(path, body, tokenize='porter unicode61')",
    """CREATE TRIGGER notes_unsearchable AFTER DELETE ON notes BEGIN
    DELETE FROM search_text WHERE rowid IN (SELECT docid FROM search_docs WHERE memory_id = OLD.memory_id);
    DELETE FROM search_docs WHERE memory_id = OLD.memory_id;
END""",
)


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}


def pages(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA page_count").fetchone()[0])


def free_pages(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA freelist_count").fetchone()[0])


def texts_indexed(store: MemoryStore) -> int:
    return int(store.index.db.execute("SELECT count(*) FROM note_text_docsize").fetchone()[0])


def test_the_text_is_not_copied_and_old_words_leave(store: MemoryStore) -> None:
    note = store.create("/people/sam.md", "Sam prefers a wombat.")
    other = store.create("/people/ana.md", "Ana keeps a wombat too.")
    assert "search_text" not in tables(store.index.path) and "note_text_content" not in tables(store.index.path)
    store.update(note.id, content="Sam prefers a quokka.", path="/team/sam.md")
    assert found(store, "wombat") == ["/people/ana.md"] and found(store, "quokka") == ["/team/sam.md"]
    assert found(store, "people") == ["/people/ana.md"]  # the old path's words left with it
    store.delete(other.id)
    assert found(store, "wombat") == [] and texts_indexed(store) == 1
    assert store.search("quokka").items[0].snippets == ("Sam prefers a **quokka**.",)


def test_a_note_changed_twice_in_one_batch_keeps_one_text(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    note = store.create("/n.md", "first aardvark")
    writers = Writers(store)
    with repository.writer_lock(store.path):  # the leader waits here; the rest queue up as one batch
        writers.start("lead", lambda: store.create("/lead.md", "leader"), queued=0)
        writers.start("b", lambda: store.update(note.id, content="second badger"), queued=1)
        # c takes back b's text, whose blob is not packed yet when c is indexed
        writers.start("c", lambda: store.update(note.id, content="third cheetah"), queued=2)
        writers.start("d", lambda: store.create("/d.md", "a dingo"), queued=3)
        writers.start("e", lambda: store.delete(store.index.note_id_at("/d.md") or ""), queued=None)
    writers.join()
    assert not any(isinstance(result, Exception) for name, result in writers.results.items() if name != "e")
    assert found(store, "aardvark") == [] and found(store, "badger") == [] and found(store, "cheetah") == ["/n.md"]
    assert texts_indexed(store) == len(list(store.index.all_notes()))
    assert not [r for r in caplog.records if "is missing" in r.getMessage()]  # not by filling the table anew
    store.index.rebuild()  # what history alone gives: the same answers
    assert found(store, "badger") == [] and found(store, "cheetah") == ["/n.md"]


def make_schema_1(store: MemoryStore) -> None:
    """Turn the store's index file into what schema 1 left: its own copy of each note's text."""
    rows = [(n.memory_id, n.path, store.repo[n.blob_id].read_raw().decode()) for n in store.index.all_notes()]
    with sqlite3.connect(store.index.path) as db:
        db.execute("DROP TABLE note_text")
        for statement in SCHEMA_1:
            db.execute(statement)
        for memory_id, path, body in rows:
            docid = db.execute("INSERT INTO search_docs (memory_id, path) VALUES (?,?)", (memory_id, path)).lastrowid
            db.execute("INSERT INTO search_text (rowid, path, body) VALUES (?,?,?)", (docid, path, body))


def test_an_index_of_schema_1_is_migrated_when_opened(store: MemoryStore, gm: Gitmem, workspace: Workspace) -> None:
    for i in range(200):
        store.create(f"/topic/{i:03d}.md", f"note {i} about the {'numbat' if i % 2 else 'platypus'} " + "words " * 60)
    kept = store.create("/kept.md", "an old okapi")
    make_schema_1(store)
    assert {"search_text", "search_docs", "notes_unsearchable"} <= tables(store.index.path)
    before = pages(store.index.path)

    again = Gitmem.open(gm.home, fsync="never").store(workspace.id, store.id)
    names = tables(again.index.path)
    assert "note_text" in names and not names & {"search_text", "search_docs", "notes_unsearchable"}
    again.index.checkpoint()
    assert pages(again.index.path) < before and free_pages(again.index.path) == 0  # the copies' pages given back
    assert len(found(again, "numbat", limit=100)) == 100 and found(again, "okapi") == ["/kept.md"]
    assert again.search("okapi").items[0].snippets == ("an old **okapi**",)
    again.update(kept.id, content="a new serval")  # the migrated text is taken back exactly
    assert found(again, "okapi") == [] and found(again, "serval") == ["/kept.md"]
    assert texts_indexed(again) == 201


@pytest.mark.parametrize("change", ["update", "delete"])
def test_a_text_whose_blob_is_gone_fills_the_table_anew(
    store: MemoryStore, change: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A contentless row is taken back with the text it was given; if the blob that text came from can no
    longer be read, the table is filled again from the notes' blobs, and the write still lands."""
    note = store.create("/lost.md", "a lost tapir")
    store.create("/kept.md", "a kept ibis")
    with store.index.transaction() as db:  # the note's row names a blob the repository does not have
        db.execute(
            "UPDATE notes SET blob_id=? WHERE memory_id=?",
            (keys.hash_key("0" * 40, "sqlite"), keys.note_key(note.id, "sqlite")),
        )
    if change == "update":
        store.update(note.id, content="a found kiwi")
        assert found(store, "kiwi") == ["/lost.md"]
    else:
        store.delete(note.id)
    assert "filled anew" in caplog.text
    assert found(store, "tapir") == [] and found(store, "ibis") == ["/kept.md"]
    assert texts_indexed(store) == len(list(store.index.all_notes()))
