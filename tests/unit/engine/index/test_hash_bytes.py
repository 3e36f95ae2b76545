"""An index file keeps Git and SHA-256 hashes as their bytes, not their hex (half the size: 124 B a note
less), gives them back in hex, and converts a file made before when it first opens it."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3

from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from tests.checks import index_snapshot
from tests.unit.engine.index.test_text_table import free_pages, pages

HASHES = {"notes": ("blob_id", "sha256"), "versions": ("sha256", "blob_id", "commit_id")}
LENGTHS = {"blob_id": 20, "sha256": 32, "commit_id": 20}


def stored(store: MemoryStore) -> set[tuple[str, str, str, int]]:
    """(table, column, SQLite type, length) of every hash in the store's index file."""
    found: set[tuple[str, str, str, int]] = set()
    with sqlite3.connect(store.index.path) as db:
        for table, columns in HASHES.items():
            for column in columns:
                sql = f"SELECT DISTINCT typeof({column}), length({column}) FROM {table} WHERE {column} IS NOT NULL"  # noqa: S608  the test's own names
                found |= {(table, column, kind, length) for kind, length in db.execute(sql)}
    return found


def fill(store: MemoryStore) -> None:
    for i in range(150):
        store.create(f"/topic/{i:03d}.md", f"note {i} " + "words " * 40)
    first = store.create("/a.md", "a\nb\nc\n")
    store.update(first.id, content="A\nb\nc\n")
    store.delete(store.create("/gone.md", "soon gone").id)


def test_an_index_file_keeps_hashes_as_their_bytes_and_gives_back_hex(store: MemoryStore) -> None:
    fill(store)
    assert stored(store) == {
        (table, column, "blob", LENGTHS[column]) for table, columns in HASHES.items() for column in columns
    }
    note = store.index.note_at("/a.md")
    assert note is not None and note.sha256 == hashlib.sha256(b"A\nb\nc\n").hexdigest()
    assert note.blob_id == str(store.repo.revparse_single("main").tree["a.md"].id)
    versions = store.index.versions_of(note.memory_id)
    assert [v.record.content_sha256 for v in versions] == [
        hashlib.sha256(t).hexdigest() for t in (b"a\nb\nc\n", b"A\nb\nc\n")
    ]
    assert store.repo[versions[-1].commit_id].type_str == "commit"
    # A write that names an older version's hash finds it (the stale merge looks it up by its bytes).
    base = hashlib.sha256(b"a\nb\nc\n").hexdigest()
    merged = store.update(note.memory_id, content="a\nb\nC\n", expected_sha256=base, merge=True)
    assert store.get(merged.id).content == "A\nb\nC\n"


def test_an_index_with_hex_hashes_is_converted_when_opened(
    store: MemoryStore, gm: Gitmem, workspace: Workspace
) -> None:
    fill(store)
    before = index_snapshot(store)
    store.index.checkpoint()
    with contextlib.closing(sqlite3.connect(store.index.path, isolation_level=None)) as db:  # a file made before
        for table, columns in HASHES.items():
            for column in columns:  # (hex() of NULL would be '')
                db.execute(f"UPDATE {table} SET {column}=lower(hex({column})) WHERE {column} IS NOT NULL")  # noqa: S608  the test's own names
        db.execute("VACUUM")
        db.execute("PRAGMA user_version=1")
    gm._forget(store.id)
    old_pages = pages(store.index.path)
    assert {kind for _, _, kind, _ in stored(store)} == {"text"}

    again = Gitmem.open(gm.home, fsync="never").store(workspace.id, store.id)
    assert {kind for _, _, kind, _ in stored(again)} == {"blob"}
    assert index_snapshot(again) == before  # the same notes and versions, read back in hex
    again.index.checkpoint()
    assert pages(again.index.path) < old_pages and free_pages(again.index.path) == 0  # the hex's pages given back
    assert again.create("/after.md", "still writable").path == "/after.md"
