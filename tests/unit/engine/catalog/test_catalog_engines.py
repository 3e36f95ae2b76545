"""The catalog-side tables (tasks, webhooks, dreams, profiles, web sessions, review) behave the same on
SQLite and on PostgreSQL: their guards, triggers and upserts, each written for both engines."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitmem.agents.dreams.dreams import Dreams
from gitmem.agents.review.review import Reviews
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.banks.profiles import profiles_for
from gitmem.clock import FrozenClock
from gitmem.db import integrity_errors
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.web_sessions import WebSessions
from gitmem.errors import NotFound
from gitmem.model import Actor
from gitmem.webhooks.outbox import webhooks_for
from tests.checks import with_outbox
from tests.system.test_webhooks import LOOPBACK, Receiver, one_round


@pytest.fixture
def home(tmp_path: Path, database_url: str | None) -> Iterator[Gitmem]:
    gm = with_outbox(Gitmem.open(tmp_path / "home", clock=FrozenClock(), fsync="never", database=database_url or ""))
    yield gm
    gm.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.down()


def test_a_tasks_list_is_frozen_and_its_events_append_only(home: Gitmem) -> None:
    ws = home.catalog.create_workspace("w")
    tasks = tasks_for(home)
    worker = tasks.create_worker(ws.id, "agent")
    task, _token = tasks.create_task(ws.id, worker.id)
    tasks.append_event(task.id, "agent.message", {"text": "hi"})
    for statement in (
        "UPDATE task_stores SET name='x' WHERE task_id=?",
        "DELETE FROM task_stores WHERE task_id=?",
        "UPDATE task_events SET payload='{}' WHERE task_id=?",
        "DELETE FROM task_events WHERE task_id=?",
    ):
        with pytest.raises(integrity_errors()), home.catalog.transaction() as db:
            db.execute(statement, (task.id,))
    assert [e.type for e in tasks.list_events(task.id).items] == ["agent.message"]
    tasks.end_task(ws.id, task.id)
    assert home.catalog.principal(task.id) is None
    tasks.delete_task(ws.id, task.id)  # the guards let the task's own rows go with it
    with pytest.raises(NotFound):
        tasks.get_task(ws.id, task.id)
    assert home.catalog.db.execute("SELECT count(*) FROM task_events").fetchone()[0] == 0


def test_catalog_changes_and_notes_reach_a_webhook_in_order(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(
        ws.id,
        receiver.url,
        ["memory_store.created", "memory_store.archived", "memory.created", "dream.completed"],
        allow_networks=LOOPBACK,
    )
    info = home.create_store(ws.id, "notes")
    home.store(ws.id, info.id).create("/a.md", "alpha")
    home.archive_store(ws.id, info.id)
    now = int(time.time() * 1e6)
    with home.catalog.transaction() as db:
        db.execute(
            "INSERT INTO dreams (id, workspace_id, status, input_store_id, task_ids, model_id,"
            " output_behavior, created_at) VALUES (?,?,?,?,?,?,?,?)",
            ("dream_a", ws.id, "pending", info.id, "", "m", "create_new", now),
        )
        db.execute("UPDATE dreams SET status='completed', ended_at=? WHERE id='dream_a'", (now,))
    receiver.up()
    assert one_round(home) == 4
    events = receiver.events(hook.secret)
    assert [e.data.type for e in events] == [
        "memory_store.created",
        "memory.created",
        "memory_store.archived",
        "dream.completed",
    ]
    assert events[0].data.id == info.id and events[3].data.id == "dream_a"
    assert len({e.id for e in events}) == 4 and all(e.id.startswith("evt_") for e in events)
    assert one_round(home) == 0  # each event once


def test_profiles_sessions_reviews_and_dream_workers(home: Gitmem) -> None:
    ws = home.catalog.create_workspace("w")
    user, token = home.catalog.create_user(ws.id, "sam")
    profiles = profiles_for(home)
    profile = profiles.create(ws.id, user.id, "work")
    profiles.bank(profile).put("a.md", "hello", actor=Actor("user_actor", user.id))
    assert [p.id for p in profiles.list(ws.id, user.id)] == [profile.id]

    sessions = WebSessions.of(home)
    session_id = sessions.sign_in(token)
    found = sessions.session(session_id)
    assert found is not None and found.principal.credential_id == user.id
    home.catalog.revoke(user.id)
    assert sessions.session(session_id) is None

    info = home.create_store(ws.id, "reviewed")
    reviews = Reviews.of(home)
    reviews.configure(ws.id, info.id, enabled=True)
    reviews.configure(ws.id, info.id, read_approved_only=True)  # the upsert updates the row
    assert reviews.settings(info.id).read_approved_only

    dreams = Dreams.of(home)
    worker = dreams.dreamer_worker(ws.id)
    assert dreams.dreamer_worker(ws.id) == worker  # made once, then found
    profiles.delete(ws.id, user.id, profile.id)
    assert profiles.list(ws.id, user.id) == []
