"""The steward's review in the engine: the mark, pending versions, approve, revert, the approved view,
and a mark that survives a history rewrite."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from gitmem.agents.review.approved_view import ApprovedView
from gitmem.agents.review.review import REVIEW_REF, Reviews, ReviewSettings, current_mark, review_history
from gitmem.clock import FrozenClock
from gitmem.engine.catalog.catalog import Principal, Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite import redaction
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import InvalidRequest, NotFound, PermissionDenied
from gitmem.model import Actor, Note
from tests.checks import assert_fsck_clean, git

STEWARD = Actor("user_actor", "user_steward")
AGENT = Actor("task_actor", "task_agent")


def _tick(clock: FrozenClock) -> None:
    clock.now += dt.timedelta(seconds=1)


@pytest.fixture
def reviews(gm: Gitmem) -> Reviews:
    return Reviews.of(gm)


def test_enabling_marks_the_current_tip_and_later_writes_are_pending(
    workspace: Workspace, store: MemoryStore, reviews: Reviews, clock: FrozenClock
) -> None:
    before = store.create("/a.md", "approved by default", actor=STEWARD)
    reviews.configure(workspace.id, store.id, enabled=True, actor=STEWARD)
    mark = current_mark(store)
    assert mark is not None and mark.action == "enabled" and mark.version_id == before.version_id
    assert reviews.pending(store).items == []
    _tick(clock)
    wrong = store.create("/b.md", "the moon is cheese", actor=AGENT)
    pending = reviews.pending(store).items
    assert [p.version.id for p in pending] == [wrong.version_id]
    assert pending[0].version.created_by == AGENT
    assert "+the moon is cheese" in pending[0].diff.unified
    # The record is a commit authored by the reviewer, on a ref a clone can fetch.
    assert git(store.path, "log", "--format=%an %s", REVIEW_REF).startswith("user_steward review: enabled")


def test_approve_moves_the_mark_and_is_history(
    workspace: Workspace, store: MemoryStore, reviews: Reviews, clock: FrozenClock
) -> None:
    reviews.configure(workspace.id, store.id, enabled=True)
    first = store.create("/a.md", "one", actor=AGENT)
    second = store.create("/b.md", "two", actor=AGENT)
    assert reviews.pending_count(store) == 2
    _tick(clock)
    mark = reviews.approve(store, first.version_id, STEWARD)
    assert mark.version_id == first.version_id and mark.reviewed_by == STEWARD
    assert [p.version.id for p in reviews.pending(store).items] == [second.version_id]
    assert reviews.approve(store, first.version_id, STEWARD) == mark  # already approved: no new record
    assert [m.action for m in review_history(store)] == ["approved", "enabled"]
    with pytest.raises(NotFound):
        reviews.approve(store, "memver_01NOSUCHVERSION0000000000", STEWARD)
    assert_fsck_clean(store.path)


def test_pending_pages(workspace: Workspace, store: MemoryStore, reviews: Reviews) -> None:
    reviews.configure(workspace.id, store.id, enabled=True)
    written = [store.create(f"/n{i}.md", f"note {i}").version_id for i in range(5)]
    seen, page = [], None
    while True:
        result = reviews.pending(store, limit=2, page=page)
        seen += [p.version.id for p in result.items]
        page = result.next_page
        if page is None:
            break
    assert seen == written
    other_listing = store.versions(limit=1).next_page
    for bad in ("not-a-token", "WyJyZXZpZXciLCJ4Il0", other_listing):  # junk, unsigned ["review","x"], another
        with pytest.raises(InvalidRequest):
            reviews.pending(store, page=bad)


def test_review_must_be_enabled(store: MemoryStore, reviews: Reviews, workspace: Workspace) -> None:
    with pytest.raises(InvalidRequest):
        reviews.pending(store)
    with pytest.raises(InvalidRequest):
        reviews.configure(workspace.id, store.id, read_approved_only=True)


def test_changing_the_settings_takes_the_right_to_review(
    store: MemoryStore, reviews: Reviews, workspace: Workspace
) -> None:
    """The one check every surface reaches: a read-write key or a task may not switch review off (or
    on); a user or an admin key may; the operator (``by=None``) may."""
    reviews.configure(workspace.id, store.id, enabled=True, read_approved_only=True)
    agent_key = Principal(workspace.id, Actor("api_actor", "key_agent"), "read-write", "key_agent")
    task = Principal(workspace.id, AGENT, "read-write", "task_agent", task_id="task_agent")
    for caller in (agent_key, task):
        changes: tuple[dict[str, Any], ...] = ({"enabled": False}, {"read_approved_only": False})
        for change in changes:
            with pytest.raises(PermissionDenied):
                reviews.configure(workspace.id, store.id, by=caller, **change)
    assert reviews.settings(store.id) == ReviewSettings(store.id, True, True)
    reviews.configure(workspace.id, store.id, enabled=True, by=agent_key)  # nothing changes: allowed
    person = Principal(workspace.id, STEWARD, "read-write", "user_steward")
    assert not reviews.configure(workspace.id, store.id, read_approved_only=False, by=person).read_approved_only
    admin = Principal(workspace.id, Actor("api_actor", "key_admin"), "admin", "key_admin")
    assert not reviews.configure(workspace.id, store.id, enabled=False, by=admin).enabled


def test_revert_puts_back_what_was_there_before(store: MemoryStore, reviews: Reviews) -> None:
    note = store.create("/fact.md", "true fact", actor=STEWARD)
    wrong = store.update(note.id, "wrong fact", actor=AGENT)
    reverted = reviews.revert(store, wrong.version_id, STEWARD)
    assert reverted.operation == "modified" and reverted.created_by == STEWARD
    assert store.get(note.id).content == "true fact"
    created = store.create("/new.md", "invented", actor=AGENT)
    assert reviews.revert(store, created.version_id, STEWARD).operation == "deleted"
    with pytest.raises(NotFound):
        store.get(created.id)
    with pytest.raises(InvalidRequest):  # nothing left to revert
        reviews.revert(store, created.version_id, STEWARD)
    # The reverted changes stay in history.
    ops = [v.operation for v in store.versions(memory_id=note.id).items]
    assert ops == ["modified", "modified", "created"]


def test_the_approved_view_shows_the_store_at_the_mark(
    workspace: Workspace, store: MemoryStore, reviews: Reviews
) -> None:
    kept = store.create("/people/sam.md", "Sam likes staging", actor=STEWARD)
    store.create("/gone.md", "will be deleted", actor=STEWARD)
    reviews.configure(workspace.id, store.id, enabled=True, read_approved_only=True)
    store.update(kept.id, "Sam likes prod on Fridays", actor=AGENT)
    store.create("/people/new.md", "unreviewed", actor=AGENT)
    store.delete(store.get_by_path("/gone.md").id, actor=AGENT)
    view = ApprovedView.of(store, current_mark(store))
    assert view.get(kept.id).content == "Sam likes staging"
    assert view.get_by_path("/gone.md").content == "will be deleted"
    with pytest.raises(NotFound):
        view.get_by_path("/people/new.md")
    listing = view.list(depth=0)
    assert [n.path for n in listing.items if isinstance(n, Note)] == ["/gone.md", "/people/sam.md"]
    assert [n.path for n in view.list(depth=1).items] == ["/gone.md", "/people/"]
    assert view.totals()[0] == 2
    assert [h.note.path for h in view.search("staging").items] == []  # the matched text is unapproved
    assert [h.note.path for h in view.search("deleted").items] == []  # no longer current in the store
    # Versions after the mark are not there for the view: neither listed, read nor diffed.
    pending = store.versions(limit=1).items[0]
    assert pending.id not in [v.id for v in view.versions(limit=100).items]
    assert kept.version_id in [v.id for v in view.versions(limit=100).items]
    with pytest.raises(NotFound):
        view.version(pending.id)
    with pytest.raises(NotFound):
        view.diff(pending.id)
    assert view.version(kept.version_id).content == "Sam likes staging"


def test_a_person_reads_everything_and_a_task_reads_the_approved_state(
    workspace: Workspace, store: MemoryStore, reviews: Reviews
) -> None:
    from gitmem.engine.catalog.catalog import Principal

    reviews.configure(workspace.id, store.id, enabled=True, read_approved_only=True)
    store.create("/x.md", "pending", actor=AGENT)
    person = Principal(workspace.id, STEWARD, "read-write", "user_steward")
    task = Principal(workspace.id, AGENT, "read-write", "task_agent", task_id="task_agent")
    assert reviews.reader(store, person) is store
    assert isinstance(reviews.reader(store, task), ApprovedView)
    with pytest.raises(NotFound):
        reviews.reader(store, task).get_by_path("/x.md")


def test_the_mark_survives_a_rewrite(
    workspace: Workspace, store: MemoryStore, reviews: Reviews, clock: FrozenClock
) -> None:
    note = store.create("/a.md", "secret-ish first draft", actor=AGENT)
    reviews.configure(workspace.id, store.id, enabled=True)
    _tick(clock)
    second = store.update(note.id, "second", actor=AGENT)
    _tick(clock)
    third = store.update(note.id, "third", actor=AGENT)
    reviews.approve(store, second.version_id, STEWARD)
    old_commit = store.version(second.version_id).commit_id
    redaction.redact(store, note.version_id, None)  # the first version: every later commit id changes
    assert store.version(second.version_id).commit_id != old_commit
    assert [p.version.id for p in reviews.pending(store).items] == [third.version_id]
    view = ApprovedView.of(store, current_mark(store))
    assert view.get(note.id).content == "second"
    # The review line keeps no commit of the old history alive: the redacted content is gone.
    assert "secret-ish" not in git(store.path, "log", "--all", "-p")
