"""The index is a cache of the history: a rebuild answers exactly as the incrementally kept index does,
a lost index is rebuilt on open, and an index left behind ``main`` catches up."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest

from gitmem import ids
from gitmem.clock import FrozenClock
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.index.store_index import StoreIndex
from gitmem.engine.store.store import MemoryStore
from gitmem.git import repository
from gitmem.git.commits import VersionRecord, author_for, format_message
from gitmem.model import Actor
from tests.checks import assert_fsck_clean, commit, index_snapshot

TASK = Actor("task_actor", "task_01INDEX")
KEY = Actor("api_actor", "apikey_01INDEX")
USER = Actor("user_actor", "user_01INDEX")


def populate(store: MemoryStore, clock: FrozenClock) -> dict[str, dt.datetime]:
    """A history with every kind of change, several actors and times an hour apart."""
    marks = {"start": clock.now}
    notes = {
        p: store.create(p, f"{p} v1", actor=TASK)
        for p in ["/a/x.md", "/a/y.md", "/a/deep/z.md", "/b.md", "/c/one.md", "/c/two.md", "/notes-archive/q"]
    }
    clock.advance(hours=1)
    marks["hour1"] = clock.now
    store.update(notes["/a/x.md"].id, content="x v2", actor=KEY)
    store.update(notes["/b.md"].id, path="/c/three.md", actor=USER)
    store.delete(notes["/c/one.md"].id, actor=KEY)
    store.create("/c/one.md", "a new note where a deleted one was", actor=None)
    clock.advance(hours=1)
    marks["hour2"] = clock.now
    store.update(notes["/a/deep/z.md"].id, path="/a/deep", content="moved up", actor=TASK)
    store.update(notes["/a/y.md"].id, content="y v2", actor=TASK)
    store.update(notes["/a/y.md"].id, content="y v3", actor=USER)
    store.delete(notes["/notes-archive/q"].id)
    for i in range(12):
        store.create(f"/many/{i:02d}", str(i), actor=KEY if i % 2 else TASK)
    marks["end"] = clock.now
    return marks


def paged(call: Any, limit: int, **kwargs: Any) -> list[tuple[list[Any], str | None]]:
    pages, page = [], None
    while True:
        result = call(limit=limit, page=page, **kwargs)
        pages.append((result.items, result.next_page))
        page = result.next_page
        if page is None:
            return pages


def answers(store: MemoryStore, marks: dict[str, dt.datetime]) -> dict[str, Any]:
    """What the engine answers about a store, every page and token included."""
    listed = [note for items, _ in paged(store.list, 1000) for note in items]
    notes = [store.get(note.id) for note in listed]
    out: dict[str, Any] = {"notes": notes, "by_path": [store.get_by_path(n.path) for n in notes]}
    for prefix in ["/", "/a/", "/c/", "/many/", "/missing/"]:
        for depth in (0, 1):
            for limit in (1, 3, 1000):
                out[f"list {prefix} {depth} {limit}"] = paged(store.list, limit, path_prefix=prefix, depth=depth)
    out["list full"] = paged(store.list, 5, with_content=True)
    versions = [version for items, _ in paged(store.versions, 100) for version in items]
    out["version"] = [store.version(v.id) for v in versions]
    memory_ids = {v.memory_id for v in versions}
    filters: list[dict[str, Any]] = [
        {},
        {"operation": "created"},
        {"operation": "modified"},
        {"operation": "deleted"},
        {"task_id": TASK.id},
        {"api_key_id": KEY.id},
        {"user_id": USER.id},
        {"created_gte": marks["hour1"]},
        {"created_lte": marks["hour2"]},
        {"created_gte": marks["hour1"], "created_lte": marks["hour2"]},
    ]
    filters += [{"memory_id": m} for m in sorted(memory_ids)]
    for i, kwargs in enumerate(filters):
        for limit in (1, 4, 100):
            out[f"versions {i} {limit}"] = paged(store.versions, limit, **kwargs)
    out["versions full"] = paged(store.versions, 7, with_content=True)
    return out


def plumbing_commit(
    store: MemoryStore,
    changes: dict[str, str | None],
    message: str,
    actor: Actor | None = None,
    when: dt.datetime | None = None,
) -> str:
    """Move main with the Git layer alone: the index is not told (as after a crash, or a push)."""
    repo = store.repo
    tip = repository.read_tip(repo)
    tree = repository.tree_with(
        repo,
        repo[tip].tree if tip else None,
        {p: (repo.create_blob(c.encode()) if c is not None else None) for p, c in changes.items()},
    )
    commit = repository.commit(
        repo,
        tree=tree,
        parent=tip,
        message=message,
        author=author_for(actor, when or dt.datetime(2026, 2, 1, tzinfo=dt.UTC)),
    )
    assert repository.compare_and_swap(repo, tip, commit)
    return str(commit)


def test_a_rebuild_answers_exactly_as_the_incremental_index(
    store: MemoryStore, clock: FrozenClock, tmp_path: Path
) -> None:
    marks = populate(store, clock)
    # A commit made with plain Git (no trailers) becomes versions with ids derived from the commit.
    plumbing_commit(store, {"hand/edited.md": "by hand", "many/00": "changed by hand"}, "edited in an editor\n")
    incremental = answers(store, marks)
    before = index_snapshot(store)
    assert len(before[1]) == 29

    store.index.rebuild()
    assert index_snapshot(store) == before
    assert answers(store, marks) == incremental

    elsewhere = StoreIndex(store.repo, tmp_path / "fresh.sqlite3")  # built from nothing but the history
    elsewhere.catch_up()
    assert (tuple(elsewhere.all_notes()), tuple(elsewhere.all_versions()), elsewhere.indexed_tip()) == before
    elsewhere.close()
    assert_fsck_clean(store.path)


def test_pushed_changes_get_stable_derived_ids(store: MemoryStore) -> None:
    note = store.create("/a.md", "api")
    commit = plumbing_commit(store, {"a.md": "edited by hand", "b.md": "new by hand"}, "hand edit\n")
    edited = store.get(note.id)
    assert edited.content == "edited by hand"  # the same note, modified
    added = store.get_by_path("/b.md")
    assert added.id == ids.derived_id(ids.MEMORY, commit, "/b.md")
    assert added.version_id == ids.derived_id(ids.VERSION, commit, "/b.md")
    assert [v.operation for v in store.versions(memory_id=note.id).items] == ["modified", "created"]
    store.index.rebuild()
    assert store.get_by_path("/b.md") == added and store.get(note.id) == edited


def test_an_index_deleted_from_disk_is_rebuilt_on_open(
    gm: Gitmem, workspace: Workspace, store: MemoryStore, clock: FrozenClock
) -> None:
    marks = populate(store, clock)
    expected = answers(store, marks)
    snapshot = index_snapshot(store)
    gm._forget(store.id)  # closes this process's handle, as a restart would
    for file in (store.path / "gitmem").glob("index.sqlite3*"):
        file.unlink()
    reopened = Gitmem.open(gm.home, clock=clock).store(workspace.id, store.id)
    assert reopened is not store
    assert answers(reopened, marks) == expected
    assert index_snapshot(reopened) == snapshot


def test_an_index_behind_main_catches_up(
    gm: Gitmem, workspace: Workspace, store: MemoryStore, clock: FrozenClock, tmp_path: Path
) -> None:
    """A crash between the ref update and the index update: the index is one or more commits behind."""
    first = store.create("/first.md", "one")
    store.index.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    saved = tmp_path / "index-before.sqlite3"
    shutil.copy(store.path / "gitmem" / "index.sqlite3", saved)
    old_tip = store.index.indexed_tip()

    second = store.create("/second.md", "two", actor=TASK)
    store.update(first.id, content="one, changed", actor=USER)
    store.delete(second.id)
    marks = {"start": clock.now, "hour1": clock.now, "hour2": clock.now}
    expected = answers(store, marks)
    snapshot = index_snapshot(store)

    gm._forget(store.id)
    for file in (store.path / "gitmem").glob("index.sqlite3*"):
        file.unlink()
    shutil.copy(saved, store.path / "gitmem" / "index.sqlite3")
    reopened = Gitmem.open(gm.home, clock=clock).store(workspace.id, store.id)
    assert reopened.index.indexed_tip() == old_tip != str(repository.read_tip(reopened.repo))
    assert answers(reopened, marks) == expected
    assert index_snapshot(reopened) == snapshot


def test_a_version_commit_the_index_never_saw_is_found(store: MemoryStore) -> None:
    """An engine-shaped commit whose index update was skipped (the ref moved with plumbing)."""
    store.create("/seen.md", "seen")
    when = dt.datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
    record = VersionRecord(
        ids.new_id(ids.MEMORY), ids.new_id(ids.VERSION), "created", "/unseen.md", "e" * 64, 6, TASK, when, when
    )
    tip_before = store.index.indexed_tip()
    plumbing_commit(store, {"unseen.md": "unseen"}, format_message([record]), actor=TASK, when=when)
    assert store.index.indexed_tip() == tip_before  # nothing told the index
    note = store.get(record.memory_id)
    assert (note.path, note.version_id, note.created_at) == ("/unseen.md", record.version_id, when)
    assert store.get(record.memory_id).content == "unseen"
    assert [v.id for v in store.versions(task_id=TASK.id).items] == [record.version_id]
    # ...and the next write through the engine builds on it.
    store.update(record.memory_id, content="seen now")
    assert [v.operation for v in store.versions(memory_id=record.memory_id).items] == ["modified", "created"]


def test_a_rewritten_main_rebuilds_the_index(store: MemoryStore) -> None:
    """If main no longer contains the indexed tip (a history rewrite), the index starts over."""
    kept = store.create("/kept.md", "kept")
    dropped = store.create("/dropped.md", "dropped")
    repo = store.repo
    # Replay only the first commit onto a new root, as retention would.
    tip = repository.read_tip(repo)
    assert tip is not None
    first = commit(repo[tip]).parents[0]
    root = repository.commit(repo, tree=first.tree.id, parent=None, author=first.author, message=first.message)
    assert repository.compare_and_swap(repo, repository.read_tip(repo), root)
    assert store.get(kept.id).content == "kept"
    with pytest.raises(Exception, match="not found"):
        store.get(dropped.id)
    assert len(store.versions().items) == 1
    assert store.index.indexed_tip() == str(root)


def test_an_empty_store_indexes_to_nothing(store: MemoryStore) -> None:
    assert store.list().items == [] and store.versions().items == []
    store.index.rebuild()
    assert store.index.indexed_tip() is None and store.list().items == []
