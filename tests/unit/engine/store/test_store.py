"""Notes and versions over one bare repository, and the store CRUD around them (docs/architecture.md).

Every refusal is checked to leave the store exactly as it was: the tip, the index and the objects.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from gitmem.clock import FrozenClock, iso
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import (
    ArchivedStore,
    Conflict,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PathConflict,
    PreconditionFailed,
    SecretRefused,
    TooLarge,
)
from gitmem.git.commits import parse_message
from gitmem.model import Actor, MemoryPrefix, Note
from gitmem.rules import policy as policy_module
from tests.checks import assert_fsck_clean, git, listed_notes, store_state

TASK = Actor("task_actor", "task_01TESTTASK0000000000000000")
KEY = Actor("api_actor", "apikey_01TESTKEY00000000000000000")
USER = Actor("user_actor", "user_01TESTUSER0000000000000000")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def paths_of(items: Iterable[Note | MemoryPrefix]) -> list[str]:
    return [item.path for item in items]


def all_listed(store: MemoryStore, **kwargs: object) -> list[Note | MemoryPrefix]:
    items: list[Note | MemoryPrefix] = []
    page = None
    while True:
        result = store.list(page=page, **kwargs)  # type: ignore[arg-type]
        items += result.items
        if result.next_page is None:
            return items
        page = result.next_page


# -- notes --------------------------------------------------------------------------------------------


def test_create_get_and_the_commit_it_makes(store: MemoryStore, clock: FrozenClock) -> None:
    note = store.create("/people/sam.md", "Sam prefers email.", actor=TASK)
    assert note.id.startswith("mem_") and note.version_id.startswith("memver_")
    assert note.path == "/people/sam.md" and note.content is None  # basic view
    assert note.content_sha256 == sha("Sam prefers email.")
    assert note.content_size_bytes == len("Sam prefers email.")
    assert note.created_at == note.updated_at == clock.now
    assert store.get(note.id).content == "Sam prefers email."
    assert store.get_by_path("/people/sam.md") == dataclasses.replace(note, content="Sam prefers email.")

    # The blob at people/sam.md on main is the note, byte for byte; the blob id is Git's own hash.
    assert git(store.path, "show", "main:people/sam.md") == "Sam prefers email."
    assert git(store.path, "rev-parse", "main:people/sam.md").strip() == note.blob_id
    assert git(store.path, "rev-list", "--count", "main").strip() == "1"
    message = git(store.path, "log", "-1", "--format=%B", "main")
    assert message.startswith("created /people/sam.md\n\n")
    for trailer in (
        f"Memory-Id: {note.id}",
        f"Memory-Version: {note.version_id}",
        "Memory-Operation: created",
        f"Content-SHA256: {note.content_sha256}",
        f"Created-By: task_actor task_id={TASK.id}",
        f"Created-At: {iso(note.created_at)}",
        f"Memory-Created-At: {iso(note.created_at)}",
    ):
        assert trailer in message
    (record,) = parse_message(message)
    assert (record.memory_id, record.version_id, record.created_by) == (note.id, note.version_id, TASK)
    assert git(store.path, "log", "-1", "--format=%an <%ae>|%cn <%ce>", "main").strip() == (
        f"{TASK.id} <{TASK.id}@task.gitmem>|gitmem <gitmem@localhost>"
    )
    assert_fsck_clean(store.path)


def test_every_change_is_one_commit(store: MemoryStore) -> None:
    note = store.create("/a.md", "one")
    store.update(note.id, content="two")
    store.update(note.id, path="/b.md")
    store.delete(note.id)
    assert git(store.path, "log", "--format=%s", "main").splitlines() == [
        "deleted /b.md",
        "modified /b.md",
        "modified /a.md",
        "created /a.md",
    ]
    assert git(store.path, "ls-tree", "-r", "main") == ""


def test_empty_content_makes_an_empty_note(store: MemoryStore) -> None:
    note = store.create("/empty.md", "")
    assert note.content_size_bytes == 0 and note.content_sha256 == sha("")
    assert store.get(note.id).content == ""


def test_unknown_ids_are_not_found(store: MemoryStore) -> None:
    for call in (
        lambda: store.get("mem_nope"),
        lambda: store.get_by_path("/nope"),
        lambda: store.update("mem_nope", content="x"),
        lambda: store.delete("mem_nope"),
        lambda: store.version("memver_nope"),
    ):
        with pytest.raises(NotFound) as missing:
            call()
        assert missing.value.status == 404


# -- content rules ------------------------------------------------------------------------------------


def test_content_up_to_102400_bytes(store: MemoryStore) -> None:
    note = store.create("/big.md", "x" * 102_400)
    assert note.content_size_bytes == 102_400
    before = store_state(store)
    with pytest.raises(TooLarge) as too_large:
        store.create("/bigger.md", "x" * 102_401)
    assert too_large.value.status == 413 and too_large.value.api_type == "request_too_large"
    with pytest.raises(TooLarge):
        store.update(note.id, content="x" * 102_401)
    with pytest.raises(TooLarge):  # bytes, not characters: 34,134 three-byte characters are 102,402 bytes
        store.create("/wide.md", "\u20ac" * 34_134)
    assert store_state(store) == before
    store.create("/wide.md", "\u20ac" * 34_133 + "x")  # 102,400 bytes exactly


@pytest.mark.parametrize("content", ["lone \ud800 surrogate", "\udfff", b"bytes", None, 42])
def test_content_must_be_utf8_text(store: MemoryStore, content: object) -> None:
    note = store.create("/x.md", "ok")
    before = store_state(store)
    with pytest.raises(InvalidRequest):
        store.create("/y.md", content)  # type: ignore[arg-type]
    if content is not None:  # content=None on update means "keep the content"
        with pytest.raises(InvalidRequest):
            store.update(note.id, content=content)  # type: ignore[arg-type]
    assert store_state(store) == before


@pytest.mark.parametrize(
    "path",
    [
        "relative.md",
        "/a//b",
        "/a/../b",
        "/.git/config",
        "/.GIT",
        "/.git.",
        "/git~1",
        "/a/.git:x",
        "/.gitattributes",
        "/.gitmodules",
        "/a\u2028b",
        "/cafe\u0301",
        "/" + "x" * 1024,
        "/" + "/".join("s" * 21),
    ],
)
def test_bad_paths_are_refused_on_create_and_rename_and_change_nothing(store: MemoryStore, path: str) -> None:
    note = store.create("/ok.md", "ok")
    before = store_state(store)
    with pytest.raises(InvalidRequest) as refused:
        store.create(path, "x")
    assert refused.value.status == 400
    with pytest.raises(InvalidRequest):
        store.update(note.id, path=path)
    assert store_state(store) == before


def test_paths_keep_their_case(store: MemoryStore) -> None:
    upper = store.create("/Notes/ToDo.md", "upper")
    assert store.get_by_path("/Notes/ToDo.md").id == upper.id
    with pytest.raises(NotFound):
        store.get_by_path("/notes/todo.md")
    assert git(store.path, "ls-tree", "-r", "--name-only", "main").split() == ["Notes/ToDo.md"]


@pytest.mark.parametrize(
    ("existing", "new"),
    [
        ("/Readme.md", "/README.md"),
        ("/Dir/a.md", "/dir/b.md"),
        ("/dir/a.md", "/Dir/a.md"),
        ("/a/Sub/x.md", "/a/sub/y/z.md"),
        ("/a", "/A/b"),
        ("/A/b", "/a"),
        ("/caf\u00e9.md", "/CAF\u00c9.md"),
        ("/\u00c9t\u00e9/x.md", "/\u00e9t\u00e9/y.md"),
    ],
)
def test_case_only_twins_are_refused(store: MemoryStore, existing: str, new: str) -> None:
    other = store.create(existing, "one")
    before = store_state(store)
    with pytest.raises(PathConflict) as conflict:
        store.create(new, "two")
    assert conflict.value.details == {"conflicting_memory_id": other.id, "conflicting_path": existing}
    assert "only in case" in conflict.value.message
    assert store_state(store) == before
    moved = store.create("/elsewhere.md", "three")
    with pytest.raises(PathConflict):
        store.update(moved.id, path=new)
    assert {n.path for n in all_listed(store)} == {existing, "/elsewhere.md"}


def test_a_note_may_change_only_the_case_of_its_own_path(store: MemoryStore) -> None:
    note = store.create("/Dir/readme.md", "one")
    assert store.update(note.id, path="/dir/README.md").path == "/dir/README.md"
    store.create("/dir/b.md", "two")  # the folder's old spelling is gone with its last note


# -- collisions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "new"),
    [
        ("/notes/todo.md", "/notes/todo.md"),  # at
        ("/notes/todo.md", "/notes"),  # above: a note where a folder is
        ("/a/b/c/d.md", "/a/b"),  # above, further up
        ("/notes", "/notes/todo.md"),  # below: a folder where a note is
        ("/a", "/a/b/c/d.md"),  # below, deeper
    ],
)
def test_a_note_at_above_or_below_another_is_a_path_conflict(store: MemoryStore, existing: str, new: str) -> None:
    other = store.create(existing, "there first")
    mover = store.create("/elsewhere.md", "to be moved")
    before = store_state(store)
    attempts: tuple[Callable[[], object], ...] = (
        lambda: store.create(new, "x"),
        lambda: store.update(mover.id, path=new),
    )
    for attempt in attempts:
        with pytest.raises(PathConflict) as conflict:
            attempt()
        error = conflict.value
        assert (error.status, error.api_type) == (409, "memory_path_conflict_error")
        assert error.details == {"conflicting_memory_id": other.id, "conflicting_path": existing}
        assert existing in error.message
    assert store_state(store) == before


@pytest.mark.parametrize(
    ("existing", "new"),
    [
        ("/a/b", "/ab"),
        ("/a/b", "/a-b/c"),
        ("/notes/x", "/notes-archive/x"),
        ("/notes", "/notes0"),
        ("/a/b", "/a/c"),
        ("/a/b/c", "/a/b2/c"),
        ("/a", "/Ab/c"),
    ],
)
def test_neighbours_that_do_not_collide(store: MemoryStore, existing: str, new: str) -> None:
    store.create(existing, "one")
    store.create(new, "two")
    assert {n.path for n in all_listed(store)} == {existing, new}


def test_a_deleted_or_moved_note_frees_its_path(store: MemoryStore) -> None:
    note = store.create("/a/b", "x")
    store.update(note.id, path="/c")
    assert store.create("/a", "folder /a is gone, so /a may be a note").path == "/a"
    store.delete(note.id)
    assert store.create("/c/d", "and /c may be a folder").path == "/c/d"


def test_a_note_moving_up_to_its_folder_collides_with_its_neighbours(store: MemoryStore) -> None:
    """Regression: /a/b -> /a used to pass because the first note below /a was the mover itself, and
    the blob /a then replaced the folder holding /a/c (lost from the tree, kept in the index)."""
    neighbour = store.create("/a/c", "neighbour")
    mover = store.create("/a/b", "mover")
    before = store_state(store)
    with pytest.raises(PathConflict) as conflict:
        store.update(mover.id, path="/a")
    assert conflict.value.details == {"conflicting_memory_id": neighbour.id, "conflicting_path": "/a/c"}
    assert store_state(store) == before
    store.delete(neighbour.id)
    assert store.update(mover.id, path="/a").path == "/a"


def test_a_note_may_move_into_its_own_folder_and_back(store: MemoryStore) -> None:
    note = store.create("/a/b", "content")
    assert store.update(note.id, path="/a").path == "/a"
    assert git(store.path, "ls-tree", "-r", "--name-only", "main").split() == ["a"]
    assert store.update(note.id, path="/a/b/c").path == "/a/b/c"
    assert git(store.path, "ls-tree", "-r", "--name-only", "main").split() == ["a/b/c"]
    assert store.get(note.id).content == "content"
    assert_fsck_clean(store.path)


# -- updates, renames, preconditions ------------------------------------------------------------------


def test_update_content_keeps_id_and_created_at(store: MemoryStore) -> None:
    note = store.create("/a.md", "one")
    changed = store.update(note.id, content="two", actor=KEY)
    assert (changed.id, changed.path, changed.created_at) == (note.id, "/a.md", note.created_at)
    assert changed.updated_at > note.updated_at and changed.version_id != note.version_id
    assert changed.content_sha256 == sha("two")
    assert store.get(note.id).content == "two"


def test_rename_keeps_the_id_and_makes_one_modified_version(store: MemoryStore) -> None:
    note = store.create("/old/name.md", "body")
    moved = store.update(note.id, path="/new/name.md")
    assert (moved.id, moved.path, moved.content_sha256, moved.blob_id) == (
        note.id,
        "/new/name.md",
        note.content_sha256,
        note.blob_id,
    )
    versions = store.versions(memory_id=note.id).items
    assert [v.operation for v in versions] == ["modified", "created"]
    assert versions[0].path == "/new/name.md" and versions[1].path == "/old/name.md"
    with pytest.raises(NotFound):
        store.get_by_path("/old/name.md")
    assert git(store.path, "ls-tree", "-r", "--name-only", "main").split() == ["new/name.md"]
    both = store.update(note.id, path="/final.md", content="new body")  # rename and edit: still one version
    assert both.path == "/final.md" and store.get(note.id).content == "new body"
    assert len(store.versions(memory_id=note.id).items) == 3


def test_preconditions_on_update(store: MemoryStore) -> None:
    """A stale precondition changes nothing on main; the refused write is kept as a conflict."""
    note = store.create("/a.md", "one")
    before = store_state(store)
    for kwargs in (
        {"expected_sha256": sha("other")},
        {"expected_blob_id": "0" * 40},
        {"expected_sha256": note.content_sha256, "expected_blob_id": "0" * 40},
    ):
        for change in ({"content": "two"}, {"path": "/b.md"}):
            with pytest.raises(PreconditionFailed) as failed:
                store.update(note.id, **change, **kwargs)  # type: ignore[arg-type]
            assert (failed.value.status, failed.value.api_type) == (409, "memory_precondition_failed_error")
            assert isinstance(failed.value, Conflict)
            assert failed.value.details["conflict_id"].startswith("cnf_")
    assert store_state(store).without_conflicts() == before
    # Kept once each: the third precondition fails on its blob alone, as the second does (an identical retry).
    assert len(store.conflicts.of_note(note.id)) == 4
    two = store.update(note.id, content="two", expected_sha256=sha("one"))
    three = store.update(note.id, content="three", expected_blob_id=two.blob_id)
    assert store.get(three.id).content == "three"


def test_preconditions_on_delete(store: MemoryStore) -> None:
    note = store.create("/a.md", "one")
    before = store_state(store)
    with pytest.raises(PreconditionFailed):
        store.delete(note.id, expected_sha256=sha("two"))
    with pytest.raises(PreconditionFailed):
        store.delete(note.id, expected_blob_id="0" * 40)
    assert store_state(store).without_conflicts() == before
    assert [c.operation for c in store.conflicts.of_note(note.id)] == ["deleted", "deleted"]
    deleted = store.delete(note.id, expected_sha256=sha("one"), expected_blob_id=note.blob_id, actor=USER)
    assert deleted.operation == "deleted" and deleted.memory_id == note.id and deleted.created_by == USER
    with pytest.raises(NotFound):
        store.get(note.id)
    with pytest.raises(NotFound):  # a second delete finds nothing
        store.delete(note.id)


def test_a_retried_update_that_already_landed_answers_the_same_note(store: MemoryStore) -> None:
    note = store.create("/a.md", "one")
    first = store.update(note.id, content="two", expected_sha256=sha("one"))
    before = store_state(store)
    retry = store.update(note.id, content="two", expected_sha256=sha("one"))  # the hash is stale now
    assert retry == first
    moved = store.update(note.id, path="/b.md", content="three", expected_sha256=sha("two"))
    assert store.update(note.id, path="/b.md", content="three", expected_sha256=sha("two")) == moved
    assert store.update(note.id) == moved  # nothing asked: nothing to do
    assert len(store.versions(memory_id=note.id).items) == 3
    assert store_state(store).tip == git(store.path, "rev-parse", "main").strip()
    assert store_state(store).versions[:2] == before.versions


# -- the note cap -------------------------------------------------------------------------------------


def test_the_real_cap_is_10000_notes_a_store() -> None:
    assert policy_module.MEMORY_STORE.max_notes == 10_000
    assert policy_module.policy_for("shared").max_notes == 10_000
    assert policy_module.policy_for("worker").max_notes == 10_000


def test_a_store_holds_at_most_max_notes(gm: Gitmem, workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_module, "MEMORY_STORE", dataclasses.replace(policy_module.MEMORY_STORE, max_notes=5))
    store = gm.store(workspace.id, gm.create_store(workspace.id, "capped").id)
    notes = [store.create(f"/n{i}", str(i)) for i in range(5)]
    before = store_state(store)
    with pytest.raises(LimitExceeded) as limit:
        store.create("/n5", "one too many")
    assert limit.value.status == 400 and "5 notes" in limit.value.message
    assert store_state(store) == before
    store.update(notes[0].id, content="updates at the cap are fine", path="/renamed")
    store.delete(notes[1].id)
    store.create("/n5", "room again")


# -- listing ------------------------------------------------------------------------------------------


def test_list_paging_is_stable_while_the_store_changes(fast_store: MemoryStore) -> None:
    store = fast_store
    initial = [store.create(f"/n/{i:03d}", str(i)) for i in range(250)]
    seen: list[str] = []
    first = store.list(path_prefix="/n/", limit=100)
    seen += paths_of(first.items)
    assert seen == [f"/n/{i:03d}" for i in range(100)]

    # Between pages: notes appear before the cursor (never shown, nothing shifts), after it (shown),
    # one after it is deleted (not shown), one before it is deleted (nothing shifts).
    store.create("/n/000a", "before the cursor")
    store.create("/n/050a", "before the cursor")
    store.create("/n/150a", "after the cursor")
    store.delete(initial[120].id)
    store.delete(initial[10].id)
    second = store.list(path_prefix="/n/", limit=100, page=first.next_page)
    seen += paths_of(second.items)
    store.create("/n/150b", "before the new cursor")
    store.create("/n/300", "after everything")
    store.update(initial[230].id, path="/n/001b")  # moves from after the cursor to before it
    third = store.list(path_prefix="/n/", limit=100, page=second.next_page)
    seen += paths_of(third.items)
    assert third.next_page is None

    expected = [f"/n/{i:03d}" for i in range(250) if i not in (120, 230)] + ["/n/150a", "/n/300"]
    assert len(seen) == len(set(seen)), "a note was listed twice"
    assert sorted(seen) == sorted(expected)
    assert seen == sorted(seen)


def test_list_views_limits_and_tokens(store: MemoryStore) -> None:
    for i in range(25):
        store.create(f"/n{i:02d}", f"content {i}")
    basic = store.list(limit=1000)
    assert (
        len(basic.items) == 25 and basic.next_page is None and all(n.content is None for n in listed_notes(basic.items))
    )
    full = store.list(limit=20, with_content=True)
    assert [n.content for n in listed_notes(full.items)] == [f"content {i}" for i in range(20)] and full.next_page
    rest = store.list(limit=20, with_content=True, page=full.next_page)
    assert [n.content for n in listed_notes(rest.items)] == [f"content {i}" for i in range(20, 25)]
    assert len(store.list().items) == 20  # default page size
    for bad in (
        {"limit": 0},
        {"limit": 1001},
        {"limit": 21, "with_content": True},
        {"depth": 2},
        {"page": "not-a-token"},
        {"path_prefix": "/n"},
        {"path_prefix": "n/"},
        {"page": store.versions(limit=1).next_page},
    ):
        with pytest.raises(InvalidRequest):
            store.list(**bad)


def test_depth_one_folds_folders_into_prefixes(store: MemoryStore) -> None:
    for path in ["/a/x", "/a/y/z", "/a-b", "/b", "/c/d/e", "/c/f"]:
        store.create(path, path)
    top = store.list(depth=1, limit=100).items
    assert top == [
        store.get_by_path("/a-b", with_content=False),
        MemoryPrefix("/a/"),
        store.get_by_path("/b", with_content=False),
        MemoryPrefix("/c/"),
    ]
    assert [getattr(i, "path", None) for i in store.list(path_prefix="/a/", depth=1).items] == ["/a/x", "/a/y/"]
    assert isinstance(store.list(path_prefix="/a/", depth=1).items[1], MemoryPrefix)
    assert paths_of(store.list(path_prefix="/c/", depth=1).items) == ["/c/d/", "/c/f"]
    assert paths_of(store.list(path_prefix="/c/", depth=0).items) == ["/c/d/e", "/c/f"]
    # Paging one item at a time goes through prefixes without repeating or skipping.
    assert paths_of(all_listed(store, depth=1, limit=1)) == ["/a-b", "/a/", "/b", "/c/"]
    assert paths_of(all_listed(store, depth=0, limit=2)) == ["/a-b", "/a/x", "/a/y/z", "/b", "/c/d/e", "/c/f"]


def test_path_prefix_matches_whole_segments(store: MemoryStore) -> None:
    for path in ["/notes/a", "/notes/sub/b", "/notes-archive/x", "/notes0", "/notesX/y", "/note/z"]:
        store.create(path, path)
    assert paths_of(all_listed(store, path_prefix="/notes/")) == ["/notes/a", "/notes/sub/b"]
    assert paths_of(all_listed(store, path_prefix="/notes-archive/")) == ["/notes-archive/x"]
    assert paths_of(all_listed(store, path_prefix="/missing/")) == []
    assert len(all_listed(store, path_prefix="/")) == 6


# -- versions -----------------------------------------------------------------------------------------


def test_version_filters_and_paging(store: MemoryStore, clock: FrozenClock) -> None:
    t0 = clock.now
    a = store.create("/a", "a1", actor=TASK)
    clock.advance(hours=1)
    t1 = clock.now
    b = store.create("/b", "b1", actor=KEY)
    store.update(a.id, content="a2", actor=USER)
    clock.advance(hours=1)
    t2 = clock.now
    store.update(b.id, content="b2", actor=TASK)
    store.delete(a.id, actor=None)
    store.create("/c", "c1")

    def ops(**kwargs: object) -> list[tuple[str, str]]:
        return [(v.path or "", v.operation) for v in store.versions(limit=100, **kwargs).items]  # type: ignore[arg-type]

    assert ops() == [
        ("/c", "created"),
        ("/a", "deleted"),
        ("/b", "modified"),
        ("/a", "modified"),
        ("/b", "created"),
        ("/a", "created"),
    ]  # newest first
    assert ops(memory_id=a.id) == [("/a", "deleted"), ("/a", "modified"), ("/a", "created")]
    assert ops(operation="created") == [("/c", "created"), ("/b", "created"), ("/a", "created")]
    assert ops(operation="deleted") == [("/a", "deleted")]
    assert ops(memory_id=b.id, operation="modified") == [("/b", "modified")]
    assert ops(task_id=TASK.id) == [("/b", "modified"), ("/a", "created")]
    assert ops(api_key_id=KEY.id) == [("/b", "created")]
    assert ops(user_id=USER.id) == [("/a", "modified")]
    assert ops(task_id="task_someone_else") == []
    assert ops(created_gte=t1) == ops()[:5]
    assert ops(created_gte=t2) == ops()[:3]
    assert ops(created_lte=t1) == [("/a", "created")]
    assert ops(created_gte=t1, created_lte=t2) == [("/a", "modified"), ("/b", "created")]
    assert ops(created_lte=t0) == []
    assert ops(memory_id="mem_unknown") == []

    everything = store.versions(limit=100).items
    paged, page = [], None
    while True:
        result = store.versions(limit=4, page=page)
        paged += result.items
        page = result.next_page
        if page is None:
            break
    assert paged == everything
    assert len(store.versions().items) == 6  # default 20
    filtered = store.versions(memory_id=a.id, limit=2)
    assert len(filtered.items) == 2 and filtered.next_page
    assert store.versions(memory_id=a.id, limit=2, page=filtered.next_page).items == [everything[-1]]

    for bad in (
        {"limit": 0},
        {"limit": 101},
        {"limit": 21, "with_content": True},
        {"operation": "renamed"},
        {"task_id": TASK.id, "user_id": USER.id},
        {"page": "garbage"},
        {"page": store.list(limit=1).next_page},
    ):
        with pytest.raises(InvalidRequest):
            store.versions(**bad)


def test_a_version_holds_the_content_as_of_that_version(store: MemoryStore) -> None:
    note = store.create("/a", "one")
    store.update(note.id, content="two")
    store.update(note.id, path="/b")
    deleted = store.delete(note.id)
    versions = store.versions(memory_id=note.id, with_content=True).items
    assert [(v.operation, v.path, v.content) for v in versions] == [
        ("deleted", "/b", None),
        ("modified", "/b", "two"),
        ("modified", "/a", "two"),
        ("created", "/a", "one"),
    ]
    assert [v.content_sha256 for v in versions] == [None, sha("two"), sha("two"), sha("one")]
    assert [v.content_size_bytes for v in versions] == [None, 3, 3, 3]
    first = store.version(versions[-1].id)
    assert first.content == "one" and first.memory_id == note.id
    assert store.version(versions[-1].id, with_content=False).content is None
    assert store.version(deleted.id).content is None
    assert store.versions(memory_id=note.id).items[1].content is None  # basic view by default
    for version in versions:  # each version is a commit whose tree holds that content
        assert git(store.path, "log", "-1", "--format=%H", version.commit_id).strip() == version.commit_id


def test_created_by_for_each_kind_of_actor(store: MemoryStore) -> None:
    for i, actor in enumerate([TASK, KEY, USER, None]):
        store.create(f"/n{i}", "x", actor=actor)
    assert [v.created_by for v in reversed(store.versions().items)] == [TASK, KEY, USER, None]
    assert TASK.as_dict() == {"type": "task_actor", "task_id": TASK.id}
    assert KEY.as_dict() == {"type": "api_actor", "api_key_id": KEY.id}
    assert USER.as_dict() == {"type": "user_actor", "user_id": USER.id}


def test_git_log_reads_as_an_audit(store: MemoryStore, clock: FrozenClock) -> None:
    note = store.create("/people/sam.md", "hello", actor=TASK)
    clock.advance(minutes=5)
    store.update(note.id, content="hello again", actor=KEY)
    clock.advance(minutes=5)
    store.update(note.id, path="/people/samantha.md", actor=USER)
    clock.advance(minutes=5)
    store.delete(note.id)
    audit = git(store.path, "log", "--date=iso-strict", "--format=%ad %an %s", "main").splitlines()
    assert audit == [
        "2026-01-01T00:15:00+00:00 gitmem deleted /people/samantha.md",
        f"2026-01-01T00:10:00+00:00 {USER.id} modified /people/samantha.md",
        f"2026-01-01T00:05:00+00:00 {KEY.id} modified /people/sam.md",
        f"2026-01-01T00:00:00+00:00 {TASK.id} created /people/sam.md",
    ]
    # Git's own times have whole seconds; the version's created_at keeps microseconds.
    newest = store.versions(limit=1).items[0]
    assert newest.created_at.replace(microsecond=0) == dt.datetime(2026, 1, 1, 0, 15, tzinfo=dt.UTC)
    assert newest.created_at.microsecond > 0 and newest.created_at == clock.now


# -- archived stores ----------------------------------------------------------------------------------


def test_an_archived_store_reads_and_deletes_but_never_writes(
    gm: Gitmem, workspace: Workspace, store: MemoryStore
) -> None:
    keep = store.create("/keep.md", "kept")
    drop = store.create("/drop.md", "dropped")
    archived = gm.archive_store(workspace.id, store.id)
    assert archived.archived_at is not None
    assert gm.archive_store(workspace.id, store.id).archived_at == archived.archived_at  # one way, once
    before = store_state(store)
    writes: tuple[Callable[[], object], ...] = (
        lambda: store.create("/new.md", "x"),
        lambda: store.update(keep.id, content="changed"),
        lambda: store.update(keep.id, path="/moved.md"),
    )
    for write in writes:
        with pytest.raises(ArchivedStore) as refused:
            write()
        assert refused.value.status == 400
    with pytest.raises(ArchivedStore):
        gm.update_store(workspace.id, store.id, name="renamed")
    assert store_state(store) == before
    assert store.get(keep.id).content == "kept"
    assert len(store.list().items) == 2 and len(store.versions().items) == 2
    assert store.delete(drop.id).operation == "deleted"
    assert paths_of(store.list().items) == ["/keep.md"]
    assert gm.get_store(workspace.id, store.id).archived_at == archived.archived_at


# -- store CRUD ---------------------------------------------------------------------------------------


def test_store_create_get_update_list(gm: Gitmem, workspace: Workspace) -> None:
    info = gm.create_store(workspace.id, "Team notes", description="what we learned", metadata={"team": "core"})
    assert info.id.startswith("memstore_") and info.archived_at is None and info.kind == "shared"
    assert gm.get_store(workspace.id, info.id) == info
    assert gm.repo_path(info.id) == gm.home / "stores" / f"{info.id}.git"
    assert git(gm.repo_path(info.id), "rev-parse", "--is-bare-repository").strip() == "true"
    assert git(gm.repo_path(info.id), "config", "receive.denyNonFastForwards").strip() == "true"
    assert git(gm.repo_path(info.id), "config", "http.getanyfile").strip() == "false"

    renamed = gm.update_store(workspace.id, info.id, name="Renamed", description="")
    assert (renamed.name, renamed.description, renamed.metadata) == ("Renamed", "", {"team": "core"})
    assert renamed.updated_at > info.updated_at
    patched = gm.update_store(workspace.id, info.id, metadata_patch={"team": None, "env": "prod", "x": "1"})
    assert patched.metadata == {"env": "prod", "x": "1"}
    assert gm.update_store(workspace.id, info.id, metadata_patch={"absent": None}).metadata == patched.metadata
    assert gm.update_store(workspace.id, info.id) == gm.get_store(workspace.id, info.id)

    others = [gm.create_store(workspace.id, f"s{i}") for i in range(4)]
    listed = [s.id for s in gm.list_stores(workspace.id, limit=100).items]
    assert listed == [s.id for s in reversed([info, *others])]  # newest first
    page = gm.list_stores(workspace.id, limit=2)
    rest = gm.list_stores(workspace.id, limit=100, page=page.next_page)
    assert [s.id for s in page.items + rest.items] == listed
    gm.archive_store(workspace.id, others[0].id)
    assert others[0].id not in [s.id for s in gm.list_stores(workspace.id, limit=100).items]
    assert others[0].id in [s.id for s in gm.list_stores(workspace.id, limit=100, include_archived=True).items]
    with pytest.raises(InvalidRequest):
        gm.list_stores(workspace.id, limit=101)
    with pytest.raises(InvalidRequest):
        gm.list_stores(workspace.id, page="???")


@pytest.mark.parametrize(
    ("fields", "ok"),
    [
        ({"name": "x" * 255}, True),
        ({"name": "x" * 256}, False),
        ({"name": ""}, False),
        ({"name": "tab\there"}, False),
        ({"name": "nl\n"}, False),
        ({"name": "del\x7f"}, False),
        ({"name": "名前 with spaces"}, True),
        ({"description": "d" * 1024}, True),
        ({"description": "d" * 1025}, False),
        ({"metadata": {f"k{i}": "v" for i in range(16)}}, True),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, False),
        ({"metadata": {"k" * 64: "v" * 512}}, True),
        ({"metadata": {"k" * 65: "v"}}, False),
        ({"metadata": {"": "v"}}, False),
        ({"metadata": {"k": "v" * 513}}, False),
        ({"metadata": {"k": 5}}, False),
        ({"metadata": {"k": ""}}, True),
    ],
)
def test_store_field_limits(gm: Gitmem, workspace: Workspace, fields: dict[str, Any], ok: bool) -> None:
    kwargs = {"name": "s", **fields}
    stores_before = sorted(p.name for p in (gm.home / "stores").iterdir())
    if ok:
        info = gm.create_store(workspace.id, **kwargs)
        assert (info.name, info.description, info.metadata) == (
            kwargs["name"],
            kwargs.get("description", ""),
            kwargs.get("metadata", {}),
        )
        return
    with pytest.raises(InvalidRequest):
        gm.create_store(workspace.id, **kwargs)
    assert sorted(p.name for p in (gm.home / "stores").iterdir()) == stores_before  # no repository left behind
    info = gm.create_store(
        workspace.id,
        "valid",
        metadata={f"k{i}": "v" for i in range(16)} if "metadata" in fields and len(fields["metadata"]) > 16 else None,
    )
    patch = {"metadata_patch": fields["metadata"]} if "metadata" in fields else fields
    with pytest.raises(InvalidRequest):
        gm.update_store(workspace.id, info.id, **patch)
    assert gm.get_store(workspace.id, info.id) == info


def test_metadata_patch_may_stay_at_16_by_replacing(gm: Gitmem, workspace: Workspace) -> None:
    info = gm.create_store(workspace.id, "s", metadata={f"k{i}": "v" for i in range(16)})
    swapped = gm.update_store(workspace.id, info.id, metadata_patch={"k0": None, "new": "v"})
    assert len(swapped.metadata) == 16 and "new" in swapped.metadata and "k0" not in swapped.metadata
    with pytest.raises(InvalidRequest):
        gm.update_store(workspace.id, info.id, metadata_patch={"seventeenth": "v"})


def test_delete_store_removes_the_repository_and_its_index(
    gm: Gitmem, workspace: Workspace, store: MemoryStore
) -> None:
    store.create("/a", "x")
    repo = gm.repo_path(store.id)
    assert (repo / "gitmem" / "index.sqlite3").exists()
    gm.delete_store(workspace.id, store.id)
    assert not repo.exists()
    for call in (
        lambda: gm.get_store(workspace.id, store.id),
        lambda: gm.store(workspace.id, store.id),
        lambda: gm.delete_store(workspace.id, store.id),
    ):
        with pytest.raises(NotFound):
            call()
    assert store.id not in [s.id for s in gm.list_stores(workspace.id, include_archived=True).items]


def test_an_archived_store_can_be_deleted(gm: Gitmem, workspace: Workspace, store: MemoryStore) -> None:
    gm.archive_store(workspace.id, store.id)
    gm.delete_store(workspace.id, store.id)
    assert not gm.repo_path(store.id).exists()


def test_a_worker_store_cannot_be_deleted_or_archived(gm: Gitmem, workspace: Workspace) -> None:
    info = gm.create_store(workspace.id, "worker's own", kind="worker")
    with pytest.raises(Conflict) as refused:
        gm.delete_store(workspace.id, info.id)
    assert refused.value.status == 409
    with pytest.raises(Conflict):
        gm.archive_store(workspace.id, info.id)
    assert gm.repo_path(info.id).exists()


def test_store_ids_that_are_not_ids_are_not_found(gm: Gitmem, workspace: Workspace) -> None:
    for bad in ("nope", "memstore_../../etc", "memstore_", "mem_01ABC", "memstore_x/y"):
        with pytest.raises(NotFound):
            gm.get_store(workspace.id, bad)
        with pytest.raises(NotFound):
            gm.store(workspace.id, bad)


def test_a_store_removed_behind_the_cache_is_not_served(gm: Gitmem, workspace: Workspace, store: MemoryStore) -> None:
    store.create("/a", "x")
    gm.delete_store(workspace.id, store.id)
    again = gm.create_store(workspace.id, "again")
    assert gm.store(workspace.id, again.id).list().items == []


# -- profile banks ------------------------------------------------------------------------------------


def test_a_bank_has_the_stricter_policy(fast_gm: Gitmem) -> None:
    ws = fast_gm.catalog.create_workspace("banks")
    bank = fast_gm.store(ws.id, fast_gm.create_store(ws.id, "bank", kind="bank").id)
    bank.create("/projects/acme.md", "x" * 65_536)
    before = store_state(bank)
    for path in ("/.env", "/a b.md", "/a/b/c/d/e/f", "/caf\u00e9.md"):
        with pytest.raises(InvalidRequest):
            bank.create(path, "x")
    with pytest.raises(TooLarge):
        bank.create("/big.md", "x" * 65_537)
    with pytest.raises(SecretRefused):
        bank.create("/secret.md", "password: hunter22")
    assert store_state(bank) == before
    # 5 MiB together: 79 more notes of 64 KiB fit (80 x 64 KiB = 5 MiB), the 81st does not.
    for i in range(79):
        bank.create(f"/n{i}", "y" * 65_536)
    with pytest.raises(LimitExceeded, match="bytes"):
        bank.create("/n79", "z")
    small = fast_gm.store(ws.id, fast_gm.create_store(ws.id, "small bank", kind="bank").id)
    for i in range(100):
        small.create(f"/s{i}", "")
    with pytest.raises(LimitExceeded, match="100 notes"):
        small.create("/s100", "")


def test_a_store_survives_its_process_cache(
    gm: Gitmem, workspace: Workspace, store: MemoryStore, tmp_path: Path
) -> None:
    note = store.create("/a", "x")
    copy = tmp_path / "copy.git"
    shutil.copytree(store.path, copy)
    assert git(copy, "show", "main:a") == "x"
    other = Gitmem.open(gm.home)  # a second process's view of the same home
    assert other.store(workspace.id, store.id).get(note.id).content == "x"
