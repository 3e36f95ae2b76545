"""A task's writes under read_approved_only see what its reads see: a note it cannot read does not exist
for them, a note with a pending change is not changed under the review, and no refusal names a pending
note's id, path or content hash."""

from __future__ import annotations

import pytest

from gitmem.agents.review.approved_view import ApprovedView
from gitmem.agents.review.review import Reviews, current_mark
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.restore import restore
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import Conflict, GitmemError, NotFound, PathConflict
from gitmem.model import Actor

STEWARD = Actor("user_actor", "user_steward")
OTHER_TASK = Actor("task_actor", "task_other")
TASK = Actor("task_actor", "task_agent")


def _no_trace(error: GitmemError, *secrets: str) -> None:
    """The refusal names none of what the task may not read."""
    told = error.message + repr(error.details)
    for secret in secrets:
        assert secret not in told, (secret, told)
    assert not isinstance(error, PathConflict)


def test_what_a_task_cannot_read_does_not_exist_for_its_writes(
    gm: Gitmem, workspace: Workspace, store: MemoryStore
) -> None:
    kept = store.create("/kept.md", "approved", actor=STEWARD)
    changed = store.create("/changed.md", "approved text", actor=STEWARD)
    moved = store.create("/moved.md", "approved here", actor=STEWARD)
    gone = store.create("/gone.md", "approved, then deleted", actor=STEWARD)
    Reviews.of(gm).configure(workspace.id, store.id, enabled=True, read_approved_only=True)
    hidden = store.create("/hidden/secret.md", "never reviewed", actor=OTHER_TASK)
    rewritten = store.update(changed.id, "pending text", actor=OTHER_TASK)
    store.update(moved.id, path="/elsewhere.md", actor=OTHER_TASK)
    store.delete(gone.id, actor=OTHER_TASK)
    view = ApprovedView.of(store, current_mark(store))
    before = len(store.versions(limit=100).items)

    for path in ("/hidden/secret.md", "/hidden/secret.md/below.md", "/hidden", "/HIDDEN/other.md", "/elsewhere.md"):
        with pytest.raises(Conflict) as taken:  # the path is taken, by nothing the task may name
            view.create(path, "mine", actor=TASK)
        _no_trace(taken.value, hidden.id, moved.id)
        assert taken.value.message == f"{path} is taken by a change waiting for review"  # names only its own
    with pytest.raises(Conflict) as upserted:
        view.upsert("/hidden/secret.md", "mine", actor=TASK)
    _no_trace(upserted.value, hidden.id)
    with pytest.raises(Conflict):  # a path move onto it, too
        view.update(kept.id, path="/hidden/secret.md", actor=TASK)

    # A note the view does not hold: not found, as for a read.
    for write in (
        lambda: view.update(hidden.id, "overwritten", actor=TASK),
        lambda: view.update(hidden.id, path="/mine.md", actor=TASK),
        lambda: view.delete(hidden.id, actor=TASK),
        lambda: restore(view, hidden.id, hidden.version_id, actor=TASK),  # type: ignore[arg-type]
        lambda: restore(view, changed.id, rewritten.version_id, actor=TASK),  # type: ignore[arg-type]
    ):
        with pytest.raises(NotFound) as absent:
            write()
        _no_trace(absent.value, "/hidden/secret.md", rewritten.content_sha256)

    # A note the view holds with a change pending: not changed under the review, its pending state unnamed.
    for write in (
        lambda: view.update(changed.id, "mine", expected_sha256=changed.content_sha256, actor=TASK),
        lambda: view.update(changed.id, "mine", actor=TASK),
        lambda: view.delete(changed.id, expected_sha256=changed.content_sha256, actor=TASK),
        lambda: view.update(moved.id, path="/third.md", actor=TASK),
        lambda: view.delete(gone.id, actor=TASK),
        lambda: restore(view, changed.id, changed.version_id, actor=TASK),  # type: ignore[arg-type]
    ):
        with pytest.raises(Conflict) as waiting:
            write()
        _no_trace(waiting.value, rewritten.content_sha256, "/elsewhere.md")
        assert "waiting for review" in waiting.value.message
    assert len(store.versions(limit=100).items) == before  # nothing changed

    # What the view holds as the store does is written as ever; the task's own write is then pending.
    updated = view.update(kept.id, "the task's edit", expected_sha256=kept.content_sha256, actor=TASK)
    assert store.get(kept.id).content == "the task's edit" and updated.version_id != kept.version_id
    fresh = view.create("/fresh.md", "new", actor=TASK)
    with pytest.raises(NotFound):
        view.update(fresh.id, "again", actor=TASK)
    restored = restore(store, kept.id, kept.version_id, actor=STEWARD)
    assert restored.version_id != updated.version_id and store.get(kept.id).content == "approved"
