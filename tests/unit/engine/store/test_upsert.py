"""``MemoryStore.upsert``: create or replace the note at a path, decided inside the write."""

from __future__ import annotations

import hashlib
import threading

import pytest

from gitmem.engine.store.store import MemoryStore
from gitmem.errors import PathConflict, PreconditionFailed
from gitmem.model import Actor
from tests.checks import store_state

USER = Actor("user_actor", "user_01TESTTESTTESTTESTTESTTEST")


def test_upsert_creates_then_updates_the_same_note(store: MemoryStore) -> None:
    created, was_created = store.upsert("/a/b.md", "one", actor=USER)
    assert was_created and created.path == "/a/b.md"
    updated, was_created = store.upsert("/a/b.md", "two", expected_sha256=created.content_sha256)
    assert not was_created and updated.id == created.id and updated.version_id != created.version_id
    assert store.get(created.id).content == "two"
    assert [v.operation for v in store.versions(memory_id=created.id).items] == ["modified", "created"]


def test_upsert_of_the_same_content_makes_no_version(store: MemoryStore) -> None:
    note, _ = store.upsert("/a.md", "same")
    again, was_created = store.upsert("/a.md", "same")
    assert not was_created and again.version_id == note.version_id
    assert len(store.versions().items) == 1


def test_upsert_refusals_change_nothing(store: MemoryStore) -> None:
    note, _ = store.upsert("/a.md", "one")
    before = store_state(store)
    with pytest.raises(PreconditionFailed):
        store.upsert("/a.md", "two", expected_sha256="0" * 64)
    with pytest.raises(PreconditionFailed):  # a precondition on a note that is not there is not met
        store.upsert("/new.md", "two", expected_sha256=note.content_sha256)
    with pytest.raises(PathConflict):
        store.upsert("/a.md/below.md", "x")
    assert store_state(store).without_conflicts() == before
    assert [c.content_sha256 for c in store.conflicts.of_note(note.id)] == [hashlib.sha256(b"two").hexdigest()]


def test_concurrent_upserts_of_one_path_make_one_note(store: MemoryStore) -> None:
    writers = 6
    barrier = threading.Barrier(writers)
    results: list[tuple[str, bool]] = []
    errors: list[BaseException] = []

    def write(n: int) -> None:
        own = MemoryStore(store.path, store.id)  # each writer its own connection, as separate processes
        try:
            barrier.wait()
            note, created = own.upsert("/shared.md", f"writer {n}")
            results.append((note.id, created))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({memory_id for memory_id, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    operations = sorted(v.operation for v in store.versions(limit=100).items)
    assert operations == ["created"] + ["modified"] * (writers - 1)
