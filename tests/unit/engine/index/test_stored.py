"""An index file keeps Git and SHA-256 hashes and the ids of notes and versions as their bytes, not their
text (124 and about 100 B a note less), gives them back as text, and converts a file made before when it
first opens it."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gitmem import ids
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index import queries, sqlite_file
from gitmem.engine.index import stored as keys
from gitmem.engine.store.store import MemoryStore
from gitmem.model import Actor
from tests.checks import index_snapshot
from tests.unit.engine.index.test_text_table import free_pages, pages

KEYS = {
    "notes": ("blob_id", "sha256", "memory_id", "version_id"),
    "versions": ("sha256", "blob_id", "commit_id", "memory_id", "version_id", "actor_id"),
}
KEY = Actor("api_actor", ids.new_id(ids.API_KEY))
ELSEWHERE = Actor("service_account_actor", "svac_made-elsewhere")  # kept as its text
PREFIXES = {"memory_id": ids.MEMORY, "version_id": ids.VERSION}
LENGTHS = {"blob_id": 20, "sha256": 32, "commit_id": 20, "memory_id": 16, "version_id": 16, "actor_id": 16}
# Every hash and id as its bytes, but the one id made elsewhere.
STORED = {(table, column, "blob", LENGTHS[column]) for table, columns in KEYS.items() for column in columns} | {
    ("versions", "actor_id", "text", len(ELSEWHERE.id))
}


def stored(store: MemoryStore) -> set[tuple[str, str, str, int]]:
    """(table, column, SQLite type, length) of every hash and id in the store's index file."""
    found: set[tuple[str, str, str, int]] = set()
    with contextlib.closing(sqlite3.connect(store.index.path)) as db:
        for table, columns in KEYS.items():
            for column in columns:
                sql = f"SELECT DISTINCT typeof({column}), length({column}) FROM {table} WHERE {column} IS NOT NULL"  # noqa: S608  the test's own names
                found |= {(table, column, kind, length) for kind, length in db.execute(sql)}
    return found


def indexes(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}


def fill(store: MemoryStore) -> None:
    for i in range(150):
        store.create(f"/topic/{i:03d}.md", f"note {i} " + "words " * 40, actor=KEY)
    store.create("/elsewhere.md", "by a service account", actor=ELSEWHERE)
    first = store.create("/a.md", "a\nb\nc\n")
    store.update(first.id, content="A\nb\nc\n")
    store.delete(store.create("/gone.md", "soon gone").id)


def make_text_keys(store: MemoryStore) -> None:
    """Turn the index file into what one made before holds: hashes in hex, ids as text."""
    with contextlib.closing(sqlite3.connect(store.index.path, isolation_level=None)) as db:
        db.create_function("hex_of", 1, lambda v: v.hex() if isinstance(v, bytes) else v)
        db.create_function("id_of", 2, lambda v, prefix: ids.id_from_bytes(prefix, v) if isinstance(v, bytes) else v)
        for table, columns in KEYS.items():
            sets = [f"{c}=id_of({c}, '{PREFIXES[c]}')" if c in PREFIXES else f"{c}=hex_of({c})" for c in columns]
            sets = [s.replace("hex_of(actor_id)", f"id_of(actor_id, '{ids.API_KEY}')") for s in sets]
            db.execute(f"UPDATE {table} SET {', '.join(sets)}")  # noqa: S608  the test's own names
        db.execute("VACUUM")
        db.execute("PRAGMA user_version=1")


def test_an_index_file_keeps_hashes_and_ids_as_their_bytes_and_gives_back_text(store: MemoryStore) -> None:
    fill(store)
    assert stored(store) == STORED
    note = store.index.note_at("/a.md")
    assert note is not None and note.sha256 == hashlib.sha256(b"A\nb\nc\n").hexdigest()
    assert note.blob_id == str(store.repo.revparse_single("main").tree["a.md"].id)
    assert store.index.note(note.memory_id) == note and ids.has_prefix(note.memory_id, ids.MEMORY)
    versions = store.index.versions_of(note.memory_id)
    assert [v.record.content_sha256 for v in versions] == [
        hashlib.sha256(t).hexdigest() for t in (b"a\nb\nc\n", b"A\nb\nc\n")
    ]
    assert store.repo[versions[-1].commit_id].type_str == "commit"
    assert store.index.version(versions[-1].record.version_id) == versions[-1]
    assert store.index.version_before(versions[-1].record.version_id) == versions[0].record.version_id
    for actor, count in ((KEY, 150), (ELSEWHERE, 1)):  # found by who made them, given back as they were
        made = store.index.list_versions(
            memory_id=None, operation=None, actor=actor, created_gte=None, created_lte=None, limit=200, page=None
        )[0]
        assert len(made) == count and {v.record.created_by for v in made} == {actor}
    # A write that names an older version's hash finds it (the stale merge looks it up by its bytes).
    base = hashlib.sha256(b"a\nb\nc\n").hexdigest()
    merged = store.update(note.memory_id, content="a\nb\nC\n", expected_sha256=base, merge=True)
    assert store.get(merged.id).content == "A\nb\nC\n"


def test_an_index_of_text_keys_is_converted_when_opened(store: MemoryStore, gm: Gitmem, workspace: Workspace) -> None:
    fill(store)
    before = index_snapshot(store)
    store.index.checkpoint()
    make_text_keys(store)
    gm._forget(store.id)
    old_pages = pages(store.index.path)
    assert {kind for _, _, kind, _ in stored(store)} == {"text"}
    with contextlib.closing(sqlite3.connect(store.index.path)) as db:  # and the indexes made before
        db.execute("DROP INDEX versions_actor")
        db.execute("CREATE INDEX versions_actor ON versions (actor_type, actor_id, seq)")
        db.execute("CREATE INDEX versions_created ON versions (created_at)")
        db.execute("CREATE INDEX notes_lower ON notes (lower(path))")

    again = Gitmem.open(gm.home, fsync="never").store(workspace.id, store.id)
    assert stored(again) == STORED
    with contextlib.closing(sqlite3.connect(store.index.path)) as db:
        assert [row[2] for row in db.execute("PRAGMA index_info(versions_actor)")] == ["actor_id"]
        assert indexes(db) >= {"notes_upper"} and not indexes(db) & {"notes_lower", "versions_created"}
    assert index_snapshot(again) == before  # the same notes and versions, read back as text
    again.index.checkpoint()
    assert pages(again.index.path) < old_pages and free_pages(again.index.path) == 0  # the text's pages given back
    assert again.create("/after.md", "still writable").path == "/after.md"


@given(st.integers(0, 2**128 - 1), st.sampled_from([ids.MEMORY, ids.VERSION]))
def test_an_id_made_here_is_its_16_bytes_and_back(number: int, prefix: str) -> None:
    made = ids.id_from_bytes(prefix, number.to_bytes(16, "big"))
    assert len(made) == len(prefix) + 27 and keys.id_key(made, prefix, "sqlite") == number.to_bytes(16, "big")
    assert keys.id_text(number.to_bytes(16, "big"), prefix) == made
    assert keys.id_key(made, prefix, "postgresql") == made  # PostgreSQL keeps the text


@given(st.text(max_size=40))
def test_any_other_id_keeps_its_text(text: str) -> None:
    for value in (text, "mem_" + text, "mem_" + text.lower() + "0" * 26, "mem_8" + "0" * 25):
        key = keys.id_key(value, ids.MEMORY, "sqlite")
        assert keys.id_text(key, ids.MEMORY) == value  # bytes only where they spell the same id back


def test_new_and_derived_ids_have_their_bytes() -> None:
    for made in (ids.new_id(ids.MEMORY), ids.derived_id(ids.MEMORY, "a commit", "/a.md")):
        assert isinstance(keys.id_key(made, ids.MEMORY, "sqlite"), bytes)
    assert isinstance(keys.id_key(ids.new_id(ids.VERSION), ids.MEMORY, "sqlite"), str)  # another kind's prefix


def test_only_paths_with_upper_case_are_in_the_index_of_their_lower_case(store: MemoryStore) -> None:
    for i in range(30):
        store.create(f"/lower/{i}.md", "x")
    upper = store.create("/Mixed/Case.md", "y")
    with contextlib.closing(sqlite3.connect(store.index.path)) as db:
        rows = db.execute("SELECT count(*) FROM notes INDEXED BY notes_upper WHERE path<>lower(path)").fetchone()
    assert rows == (1,)
    # Case twins are found either way: of a lower-case path, of a path with capitals, of a folder.
    for path, twin in (
        ("/lower/3.MD", "/lower/3.md"),
        ("/LOWER/3.md", "/lower/0.md"),  # a folder's twin: its first note
        ("/mixed/case.md", "/Mixed/Case.md"),
        ("/MIXED/b.md", "/Mixed/Case.md"),
    ):
        found = store.index.case_twin(path)
        assert found is not None and found.path == twin, path
    assert (
        store.index.case_twin("/lower/30.md") is None and store.index.case_twin(upper.path, other_than=upper.id) is None
    )


def test_finding_a_case_twin_scans_no_table(store: MemoryStore) -> None:
    store.create("/Mixed/Case.md", "y")
    sql, params = queries._twin_candidates("/some/Path.md", None)
    with contextlib.closing(sqlite3.connect(store.index.path)) as db:
        plan = [row[-1] for row in db.execute("EXPLAIN QUERY PLAN " + sql, params)]
    assert not [step for step in plan if step.startswith("SCAN")], plan
    assert any("notes_upper" in step for step in plan), plan


def test_a_file_whose_only_text_is_ids_made_elsewhere_is_not_compacted_again(
    store: MemoryStore, gm: Gitmem, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new schema mark runs the conversion again; the service account's id stays text, so nothing
    was converted and the file is not rewritten whole (a VACUUM of a big store on every upgrade)."""
    fill(store)
    store.index.checkpoint()
    with contextlib.closing(sqlite3.connect(store.index.path, isolation_level=None)) as db:
        db.execute("PRAGMA user_version=1")
    gm._forget(store.id)
    compacted: list[object] = []
    monkeypatch.setattr(sqlite_file, "compact", lambda *args: compacted.append(args))

    again = Gitmem.open(gm.home, fsync="never").store(workspace.id, store.id)
    assert again.index.note_at("/elsewhere.md") is not None  # the schema ran: the index opened
    assert stored(again) == STORED and compacted == []
