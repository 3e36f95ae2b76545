"""Webhooks: the admin API, the outbox, and delivery to a real receiver on loopback that is down, slow
and failing; every delivered body is verified with the official SDK's ``client.beta.webhooks.unwrap``.

Delivery runs with the home's clock (a FrozenClock moved by the test) and short timeouts, never by
sleeping out a real backoff.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import pytest
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.settings import Settings
from gitmem.banks.profiles import profiles_for
from gitmem.clock import FrozenClock
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.rewrite.redaction import redact
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import PreconditionFailed
from gitmem.model import Actor
from gitmem.webhooks.delivery import DeliveryPolicy, Dispatcher
from gitmem.webhooks.outbox import EVENT_TYPES, webhooks_for
from gitmem.webhooks.tables import wants_note_events
from gitmem.webhooks.targets import parse_networks
from tests.checks import with_outbox
from tests.server import free_port
from tests.unit.engine.push.test_receive import Pusher

SDK = anthropic.Anthropic(api_key="unused")
LOOPBACK = parse_networks("127.0.0.0/8")  # the receivers here listen on loopback: a deployment's allow-list
POLICY = DeliveryPolicy(
    first_retry_seconds=10,
    max_retry_seconds=600,
    give_up_after_seconds=86400 * 1.5,
    timeout_seconds=2.0,  # a whole attempt's deadline: room for a loaded machine
    catch_up_seconds=0,
    allow_networks=LOOPBACK,
)


class Receiver:
    """A tiny HTTP server on 127.0.0.1 that answers as told: ``ok``, ``fail`` (500) or ``slow``."""

    def __init__(self, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.host = host
        self.port = port or free_port()
        self.mode = "ok"
        self.received: list[tuple[str, dict[str, str]]] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hook"

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the http.server API
                mode = receiver.mode  # as it was when the request came in
                body = self.rfile.read(int(self.headers["content-length"])).decode()
                if mode == "slow":
                    time.sleep(3.0)  # past the sender's deadline: it counts as a failure
                if mode == "ok":
                    receiver.received.append((body, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(200 if mode == "ok" else 500)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def events(self, secret: str | None) -> list[Any]:
        """Every body received, verified and parsed by the SDK (raises if a signature is wrong)."""
        assert secret is not None, "a webhook's secret is on the value its create returned"
        return [SDK.beta.webhooks.unwrap(body, headers=headers, key=secret) for body, headers in self.received]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.down()


@pytest.fixture
def home(tmp_path: Path) -> Gitmem:
    return with_outbox(Gitmem.open(tmp_path / "home", clock=FrozenClock(), fsync="never"))


def one_round(home: Gitmem) -> int:
    """One delivery round by a fresh dispatcher; the number of events delivered."""
    dispatcher = Dispatcher(home, POLICY)
    try:
        return dispatcher.run_once()
    finally:
        dispatcher.stop()


def _types(events: list[Any]) -> list[str]:
    return [e.data.type for e in events]


def test_events_are_signed_for_the_sdk_and_come_in_order(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(ws.id, receiver.url, list(EVENT_TYPES), allow_networks=LOOPBACK)
    assert hook.secret and hook.secret.startswith("whsec_")
    receiver.up()
    info = home.create_store(ws.id, "notes")
    store = home.store(ws.id, info.id)
    note = store.create("/a.md", "one")
    store.update(note.id, "two")
    store.delete(note.id)
    home.archive_store(ws.id, info.id)

    assert one_round(home) == 5
    events = receiver.events(hook.secret)
    assert _types(events) == [
        "memory_store.created",
        "memory.created",
        "memory.modified",
        "memory.deleted",
        "memory_store.archived",
    ]
    assert all(e.type == "event" for e in events)
    assert events[0].data.id == info.id and events[0].data.workspace_id == ws.id
    created = json.loads(receiver.received[1][0])["data"]
    assert created["id"] == note.id and created["memory_store_id"] == info.id and created["path"] == "/a.md"
    assert len({e.id for e in events}) == 5

    body, headers = receiver.received[0]
    with pytest.raises(Exception, match=r"(?i)signature"):
        SDK.beta.webhooks.unwrap(body.replace(info.id, "memstore_forged"), headers=headers, key=hook.secret)


def test_a_receiver_down_for_an_hour_then_failing_then_slow_loses_nothing(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(
        ws.id, receiver.url, ["memory.created", "memory.modified"], allow_networks=LOOPBACK
    )
    info = home.create_store(ws.id, "notes")
    store = home.store(ws.id, info.id)
    note = store.create("/a.md", "1")
    dispatcher = Dispatcher(home, POLICY)
    try:
        # Down (nothing listens on the port) for an hour, with writes going on.
        for minute in range(0, 60, 5):
            assert dispatcher.run_once() == 0
            store.update(note.id, f"edit at minute {minute}")
            home.clock.advance(minutes=5)  # type: ignore[attr-defined]
        # Up but failing, then slow (past the timeout): still nothing delivered, nothing dropped.
        receiver.up()
        for mode in ("fail", "slow"):
            receiver.mode = mode
            home.clock.advance(minutes=11)  # type: ignore[attr-defined]
            assert dispatcher.run_once() == 0
        receiver.mode = "ok"
        home.clock.advance(minutes=11)  # type: ignore[attr-defined]
        assert dispatcher.run_once() == 13
    finally:
        dispatcher.stop()
    events = receiver.events(hook.secret)
    assert _types(events) == ["memory.created"] + ["memory.modified"] * 12
    versions = [json.loads(body)["data"]["memory_version_id"] for body, _ in receiver.received]
    assert versions == [v.id for v in reversed(store.versions(memory_id=note.id, limit=100).items)]


def test_retries_back_off_and_give_up_after_the_window(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(ws.id, receiver.url, ["memory.created"], allow_networks=LOOPBACK)
    store = home.store(ws.id, home.create_store(ws.id, "notes").id)
    store.create("/lost.md", "x")
    dispatcher = Dispatcher(home, POLICY)
    db = home.catalog.db
    try:
        dispatcher.run_once()
        home.clock.advance(seconds=9)  # type: ignore[attr-defined]
        dispatcher.run_once()  # not due yet: the first retry waits 10 s
        assert db.execute("SELECT attempts FROM webhook_deliveries").fetchone()[0] == 1
        waits = []
        for _ in range(8):
            before = db.execute("SELECT next_attempt_at FROM webhook_deliveries").fetchone()[0]
            home.clock.advance(seconds=601)  # type: ignore[attr-defined]
            dispatcher.run_once()
            waits.append(db.execute("SELECT next_attempt_at FROM webhook_deliveries").fetchone()[0] - before)
        assert db.execute("SELECT given_up_at FROM webhook_deliveries").fetchone()[0] is None
        home.clock.advance(days=2)  # type: ignore[attr-defined]
        dispatcher.run_once()
        assert db.execute("SELECT given_up_at FROM webhook_deliveries").fetchone()[0] is not None
        # A given-up event no longer holds the store's later events back.
        receiver.up()
        store.create("/later.md", "y")
        assert dispatcher.run_once() == 1
    finally:
        dispatcher.stop()
    assert [json.loads(b)["data"]["path"] for b, _ in receiver.received] == ["/later.md"]
    assert receiver.events(hook.secret)
    assert max(waits) <= 601 * 1e6 + 600 * 1e6  # capped at max_retry_seconds


def test_pending_events_survive_a_restart_and_one_process_delivers(tmp_path: Path, receiver: Receiver) -> None:
    clock = FrozenClock()
    first_home = with_outbox(Gitmem.open(tmp_path / "home", clock=clock, fsync="never"))
    ws = first_home.catalog.create_workspace("w")
    hook = webhooks_for(first_home).create(
        ws.id, receiver.url, ["memory_store.created", "memory.created"], allow_networks=LOOPBACK
    )
    store = first_home.store(ws.id, first_home.create_store(ws.id, "notes").id)
    store.create("/a.md", "x")
    first = Dispatcher(first_home, POLICY)
    assert first.run_once() == 0  # the receiver is down
    # Another process while the first holds the lease: it delivers nothing.
    second_home = with_outbox(Gitmem.open(tmp_path / "home", clock=clock, fsync="never"))
    second = Dispatcher(second_home, POLICY)
    receiver.up()
    assert not second.claim()
    assert second.run_once() == 0
    # The first "dies" (its lease lapses, no release); after a restart the pending events go out.
    later = Dispatcher(second_home, POLICY, wall_clock=lambda: time.time() + POLICY.lease_seconds + 1)
    clock.advance(minutes=1)
    try:
        assert later.run_once() == 2
    finally:
        later.stop()
        second._sender.close()
        first._sender.close()
    assert _types(receiver.events(hook.secret)) == ["memory_store.created", "memory.created"]


def test_a_crash_between_commit_and_outbox_is_caught_up(home: Gitmem, receiver: Receiver) -> None:
    """A version committed with no outbox row (the writer died in between; here: a store object
    without the listener) is found by the catch-up scan."""
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(ws.id, receiver.url, ["memory.created"], allow_networks=LOOPBACK)
    info = home.create_store(ws.id, "notes")
    home.store(ws.id, info.id).create("/seen.md", "x")
    unheard = MemoryStore(home.repo_path(info.id), info.id, clock=home.clock)
    unheard.create("/crashed.md", "y")
    unheard.close()
    assert home.catalog.db.execute("SELECT count(*) FROM webhook_outbox WHERE type='memory.created'").fetchone()[0] == 1
    receiver.up()
    dispatcher = Dispatcher(home, POLICY)
    try:
        assert dispatcher.run_once() == 2
        assert dispatcher.run_once() == 0  # reported once
    finally:
        dispatcher.stop()
    assert [json.loads(b)["data"]["path"] for b, _ in receiver.received] == ["/seen.md", "/crashed.md"]
    assert receiver.events(hook.secret)


def test_dream_and_store_deletion_events_come_from_the_catalog(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(
        ws.id, receiver.url, ["dream.completed", "dream.failed", "memory_store.deleted"], allow_networks=LOOPBACK
    )
    info = home.create_store(ws.id, "notes")
    now = int(time.time() * 1e6)
    with home.catalog.transaction() as db:
        for dream_id in ("dream_a", "dream_b"):
            db.execute(
                "INSERT INTO dreams (id, workspace_id, status, input_store_id, task_ids, model_id,"
                " output_behavior, created_at) VALUES (?,?,?,?,?,?,?,?)",
                (dream_id, ws.id, "pending", info.id, "[]", "m", "new", now),
            )
        db.execute("UPDATE dreams SET status='running' WHERE id='dream_a'")
        db.execute("UPDATE dreams SET status='completed', ended_at=? WHERE id='dream_a'", (now,))
        db.execute("UPDATE dreams SET status='failed', error_type='timeout', ended_at=? WHERE id='dream_b'", (now,))
    home.delete_store(ws.id, info.id)
    receiver.up()
    assert one_round(home) == 3
    events = receiver.events(hook.secret)
    assert [(e.data.type, e.data.id) for e in events] == [
        ("dream.completed", "dream_a"),
        ("dream.failed", "dream_b"),
        ("memory_store.deleted", info.id),
    ]


def test_nothing_is_recorded_for_a_workspace_without_webhooks(home: Gitmem) -> None:
    ws = home.catalog.create_workspace("quiet")
    store = home.store(ws.id, home.create_store(ws.id, "notes").id)
    store.create("/a.md", "x")
    webhooks_for(home).create(home.catalog.create_workspace("other").id, "https://example.com/h", ["memory.created"])
    store.create("/b.md", "y")
    assert home.catalog.db.execute("SELECT count(*) FROM webhook_outbox").fetchone()[0] == 0


# -- the HTTP API ---------------------------------------------------------------------------------------


Api = tuple[
    TestClient, dict[str, str], dict[str, str], str
]  # the client, an admin's headers, a writer's, the workspace


@pytest.fixture
def api(home: Gitmem) -> Iterator[Api]:
    ws = home.catalog.create_workspace("w")
    _, admin = home.catalog.create_api_key(ws.id, "admin")
    _, writer = home.catalog.create_api_key(ws.id, "writer", role="read-write")
    app = create_app(home, Settings.defaults(webhook_delivery=False, dream_runner=False, prune_interval_seconds=0))
    with TestClient(app) as client:
        yield client, {"x-api-key": admin}, {"x-api-key": writer}, ws.id


def test_the_api_shows_the_secret_once_and_is_for_admins(api: Api) -> None:
    client, admin, writer, _ = api
    body = {"url": "https://example.com/hook", "event_types": ["memory.created", "memory_store.created"]}
    created = client.post("/v1/webhooks", json=body, headers=admin)
    assert created.status_code == 200, created.text
    hook = created.json()
    assert hook["secret"].startswith("whsec_") and hook["event_types"] == ["memory_store.created", "memory.created"]
    listed = client.get("/v1/webhooks", headers=admin).json()["data"]
    assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]
    assert "secret" not in client.get(f"/v1/webhooks/{hook['id']}", headers=admin).json()
    for method, path in (("post", "/v1/webhooks"), ("get", "/v1/webhooks"), ("delete", f"/v1/webhooks/{hook['id']}")):
        response = client.request(method.upper(), path, json=body if method == "post" else None, headers=writer)
        assert response.status_code == 403 and response.json()["error"]["type"] == "permission_error"
    assert client.delete(f"/v1/webhooks/{hook['id']}", headers=admin).json() == {
        "id": hook["id"],
        "type": "webhook_deleted",
    }
    assert client.get(f"/v1/webhooks/{hook['id']}", headers=admin).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://example.com", "event_types": ["memory.created"]},
        {"url": "https://example.com", "event_types": []},
        {"url": "https://example.com", "event_types": ["memory.exploded"]},
        {"url": "https://example.com", "event_types": ["memory.created"], "extra": 1},
    ],
)
def test_bad_subscriptions_are_400_and_change_nothing(api: Api, body: dict[str, Any]) -> None:
    client, admin, _, _ = api
    response = client.post("/v1/webhooks", json=body, headers=admin)
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    assert client.get("/v1/webhooks", headers=admin).json()["data"] == []


def test_another_workspaces_webhook_is_not_found(api: Api, home: Gitmem) -> None:
    client, admin, _, _ = api
    other = webhooks_for(home).create(
        home.catalog.create_workspace("x").id, "https://example.com/h", ["memory.created"]
    )
    assert client.get(f"/v1/webhooks/{other.id}", headers=admin).status_code == 404
    assert client.delete(f"/v1/webhooks/{other.id}", headers=admin).status_code == 404


def test_the_server_delivers_in_the_background(tmp_path: Path, receiver: Receiver) -> None:
    home = with_outbox(Gitmem.open(tmp_path / "home", fsync="never"))
    ws = home.catalog.create_workspace("w")
    _, admin = home.catalog.create_api_key(ws.id, "admin")
    receiver.up()
    settings = Settings.defaults(
        dream_runner=False, prune_interval_seconds=0, webhook_poll_seconds=0.05, webhook_policy=POLICY
    )
    with TestClient(create_app(home, settings)) as client:
        secret = client.post(
            "/v1/webhooks",
            json={"url": receiver.url, "event_types": ["memory_store.created"]},
            headers={"x-api-key": admin},
        ).json()["secret"]
        store_id = client.post("/v1/memory_stores", json={"name": "n"}, headers={"x-api-key": admin}).json()["id"]
        deadline = time.monotonic() + 20
        while not receiver.received and time.monotonic() < deadline:
            time.sleep(0.05)
    [event] = receiver.events(secret)
    assert event.data.id == store_id
    assert dt.datetime.now(dt.UTC) - event.created_at < dt.timedelta(minutes=5)


def test_a_redaction_is_an_event(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(ws.id, receiver.url, ["memory_version.redacted"], allow_networks=LOOPBACK)
    store = home.store(ws.id, home.create_store(ws.id, "notes").id)
    note = store.create("/a.md", "a secret")
    store.update(note.id, "nothing to see")
    redact(store, note.version_id)
    receiver.up()
    assert one_round(home) == 1
    [event] = receiver.events(hook.secret)
    assert (event.data.type, event.data.id) == ("memory_version.redacted", note.version_id)
    assert "secret" not in receiver.received[0][0]


def test_a_kept_conflict_is_an_event_without_its_text(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(ws.id, receiver.url, ["memory.conflict"], allow_networks=LOOPBACK)
    store = home.store(ws.id, home.create_store(ws.id, "notes").id)
    note = store.create("/a.md", "one")
    won = store.update(note.id, "two")
    with pytest.raises(PreconditionFailed) as lost:
        store.update(note.id, "the losing text", expected_sha256=note.content_sha256, actor=Actor("task_actor", "t1"))
    receiver.up()
    assert one_round(home) == 1
    [event] = receiver.events(hook.secret)
    assert (event.data.type, event.data.id) == ("memory.conflict", lost.value.details["conflict_id"])
    body = json.loads(receiver.received[0][0])["data"]
    assert (body["memory_id"], body["winner_version_id"], body["path"]) == (note.id, won.version_id, "/a.md")
    assert body["created_by"] == {"type": "task_actor", "task_id": "t1"} and "losing" not in receiver.received[0][0]


def test_an_encrypted_stores_events_carry_no_path(home: Gitmem, receiver: Receiver) -> None:
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(ws.id, receiver.url, ["memory.created"], allow_networks=LOOPBACK)
    info = home.create_store(ws.id, "vault", encrypted=True)
    note = home.store(ws.id, info.id).create("/diagnosis.md", "private")
    receiver.up()
    assert one_round(home) == 1
    [event] = receiver.events(hook.secret)
    assert event.data.id == note.id
    assert "diagnosis" not in receiver.received[0][0]


def test_a_push_is_reported_when_it_lands(tmp_path: Path, receiver: Receiver) -> None:
    """post-receive writes the outbox rows (the server's own delivery and catch-up are off here). The
    push runs the store's hooks as the server's git http-backend would (tests/unit/engine/push/test_receive.py)."""
    home = with_outbox(Gitmem.open(tmp_path / "home", fsync="never"))
    ws = home.catalog.create_workspace("w")
    user, _token = home.catalog.create_user(ws.id, "ana")
    info = home.create_store(ws.id, "team")
    home.store(ws.id, info.id).create("/before.md", "made before anyone listened")
    hook = webhooks_for(home).create(ws.id, receiver.url, ["memory.created"], allow_networks=LOOPBACK)
    pusher = Pusher(home, ws.id, info.id, user.id, tmp_path)
    pusher.write("pushed.md", "from my editor")
    pusher.commit("add a note")
    assert pusher.push().returncode == 0
    rows = home.catalog.db.execute("SELECT data FROM webhook_outbox WHERE type='memory.created'").fetchall()
    assert [json.loads(r[0])["path"] for r in rows] == ["/pushed.md"]
    receiver.up()
    assert one_round(home) == 1
    [event] = receiver.events(hook.secret)
    assert event.data.type == "memory.created"


def test_a_push_hook_asks_the_catalog_alone_whether_anyone_listens(tmp_path: Path) -> None:
    """What post-receive asks before it opens the home to tell the outbox of a push: the outbox's own
    first question (a subscription to note events in the store's workspace), on the catalog alone."""
    home = Gitmem.open(tmp_path / "home", fsync="never")
    ws, other = home.catalog.create_workspace("w"), home.catalog.create_workspace("other")
    db = home.catalog.db
    assert not wants_note_events(db, ws.id)  # the webhooks' tables are not made yet: nobody listens
    hooks = webhooks_for(home)
    hooks.create(ws.id, "http://127.0.0.1:9/", ["memory_store.created"], allow_networks=LOOPBACK)
    assert not wants_note_events(db, ws.id)  # store events only: a push writes no event
    note_hook = hooks.create(ws.id, "http://127.0.0.1:9/", ["memory.deleted"], allow_networks=LOOPBACK)
    assert wants_note_events(db, ws.id)
    assert not wants_note_events(db, other.id)
    hooks.delete(ws.id, note_hook.id)
    assert not wants_note_events(db, ws.id)


def test_a_profile_bank_emits_no_workspace_events(home: Gitmem, receiver: Receiver) -> None:
    """A user's bank is hidden from the workspace's admin on every surface: its webhooks hear nothing of
    it (made, written, edited, redacted, deleted), while a shared store beside it is reported."""
    ws = home.catalog.create_workspace("w")
    hook = webhooks_for(home).create(ws.id, receiver.url, list(EVENT_TYPES), allow_networks=LOOPBACK)
    user, _token = home.catalog.create_user(ws.id, "sam")
    profiles = profiles_for(home)
    profile = profiles.create(ws.id, user.id, "private")
    bank = profiles.bank(profile)
    sam = Actor("user_actor", user.id)
    bank.put("diary.md", "one", actor=sam)
    bank.put("diary.md", "two", actor=sam)
    bank_store = home.store(ws.id, profile.bank_store_id)
    redact(bank_store, bank_store.versions(limit=10).items[-1].id)
    bank.delete("diary.md", actor=sam)
    shared = home.create_store(ws.id, "team")
    home.store(ws.id, shared.id).create("/a.md", "x")
    profiles.delete(ws.id, user.id, profile.id)
    receiver.up()
    assert one_round(home) == 2
    assert next((e.data.type, e.data.id) for e in receiver.events(hook.secret)) == ("memory_store.created", shared.id)
    assert profile.bank_store_id not in "".join(body for body, _ in receiver.received)
    assert (
        home.catalog.db.execute(
            "SELECT count(*) FROM webhook_outbox WHERE store_id=?", (profile.bank_store_id,)
        ).fetchone()[0]
        == 0
    )
