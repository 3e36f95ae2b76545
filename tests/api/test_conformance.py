"""The official SDK against gitmem: every method of client.beta.memory_stores, .memories and
.memory_versions, over the real app (served in this process), SQLite and Git."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import pytest
from anthropic.types.beta import BetaManagedAgentsMemoryStore
from anthropic.types.beta.memory_stores import (
    BetaManagedAgentsAPIActor,
    BetaManagedAgentsMemory,
    BetaManagedAgentsMemoryPrefix,
    BetaManagedAgentsPreconditionParam,
    BetaManagedAgentsSessionActor,
    BetaManagedAgentsUserActor,
)

from gitmem.agents.tasks.tasks import tasks_for
from gitmem.engine.gitmem import Gitmem
from tests.apps import InProcess, TestHome, in_process
from tests.checks import json_object, memory


@dataclass(frozen=True)
class Live:
    server: InProcess
    test_home: TestHome

    def __getattr__(self, name: str) -> str:  # the home's keys and ids: live.admin, live.reader, ...
        found: str = getattr(self.test_home, name)
        return found

    @property
    def home(self) -> Path:
        return self.test_home.path

    @property
    def other_workspace(self) -> str:
        return self.test_home.other

    def client(self, secret: str | None = None, **kwargs: object) -> anthropic.Anthropic:
        return self.server.sdk(secret or self.test_home.admin, **kwargs)


@pytest.fixture(scope="module")
def live(test_home: Callable[..., TestHome]) -> Iterator[Live]:
    home = test_home("gitmem-home")
    with in_process(home.path) as server:
        yield Live(server, home)


@pytest.fixture
def client(live: Live) -> anthropic.Anthropic:
    return live.client()


@pytest.fixture
def store_id(client: anthropic.Anthropic, request: pytest.FixtureRequest) -> str:
    return client.beta.memory_stores.create(name=f"store for {request.node.name}"[:255]).id


def _task_reading(live: Live, store_id: str) -> tuple[str, str]:
    """A real task (through the engine) whose frozen list names the store; its id and token."""
    gm = Gitmem.open(live.home)
    workspace_id = gm.catalog.authenticate(live.admin).workspace_id
    tasks = tasks_for(gm)
    worker = tasks.create_worker(workspace_id, "conformance")
    task, token = tasks.create_task(workspace_id, worker.id, [{"type": "memory_store", "memory_store_id": store_id}])
    return task.id, token


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def error_type(exc: anthropic.APIStatusError) -> str:
    assert isinstance(exc.body, dict), exc.body
    found: str = exc.body["error"]["type"]
    return found


# -- memory stores ---------------------------------------------------------------------------------


def test_store_create_retrieve_update(client: anthropic.Anthropic) -> None:
    stores = client.beta.memory_stores
    created = stores.create(name="people", description="who is who", metadata={"team": "core", "tier": "1"})
    assert created.id.startswith("memstore_")
    assert created.type == "memory_store"
    assert (created.name, created.description) == ("people", "who is who")
    assert created.metadata == {"team": "core", "tier": "1"}
    assert created.archived_at is None
    assert created.created_at.tzinfo is not None
    assert (created._request_id or "").startswith("req_")

    got = stores.retrieve(created.id)
    assert got == created

    updated = stores.update(created.id, name="people v2", metadata={"tier": None, "owner": "sam"})
    assert updated.name == "people v2"
    assert updated.description == "who is who"
    assert updated.metadata == {"team": "core", "owner": "sam"}
    assert updated.updated_at >= created.updated_at

    cleared = stores.update(created.id, description="")
    assert cleared.description == ""


def test_a_store_object_has_the_sdks_fields_and_gitmems_only_under_one_key(client: anthropic.Anthropic) -> None:
    """Every answer that is a store object (create, retrieve, update, list, archive) has exactly the
    fields of the SDK's BetaManagedAgentsMemoryStore; gitmem's own (review) are under ``gitmem`` and only
    when they apply, so no null field of ours sits where the hosted API may put one of its own."""
    sdk_fields = set(BetaManagedAgentsMemoryStore.model_fields)
    plain = json_object(client.post("/v1/memory_stores", body={"name": "exact"}, cast_to=object))
    route = f"/v1/memory_stores/{plain['id']}"
    answers = [
        plain,
        json_object(client.get(route, cast_to=object)),
        json_object(client.post(route, body={"description": "d"}, cast_to=object)),
        *map(json_object, json_object(client.get("/v1/memory_stores", cast_to=object))["data"]),
    ]
    reviewed = json_object(client.post(route, body={"review": True}, cast_to=object))
    archived = json_object(client.post(f"{route}/archive", cast_to=object))
    for answer in answers:
        assert set(answer) == sdk_fields, sorted(set(answer) ^ sdk_fields)
    for answer in (reviewed, archived):
        assert set(answer) == sdk_fields | {"gitmem"}
        assert answer["gitmem"] == {"review": {"enabled": True, "read_approved_only": False}}


def test_store_description_defaults_to_empty_string(client: anthropic.Anthropic) -> None:
    created = client.beta.memory_stores.create(name="bare")
    assert created.description == ""
    assert created.metadata == {}


def test_store_list_pages_and_filters(client: anthropic.Anthropic) -> None:
    stores = client.beta.memory_stores
    made_stores = [stores.create(name=f"listed {i}") for i in range(5)]
    made = [s.id for s in made_stores]
    since = made_stores[0].created_at
    archived = stores.archive(made[0])
    assert archived.archived_at is not None

    page = stores.list(limit=2, created_at_gte=since)
    assert len(page.data) == 2
    assert page.next_page
    seen = [s.id for s in stores.list(limit=2, created_at_gte=since)]  # auto-pagination
    assert set(seen) == set(made[1:])
    assert len(seen) == len(set(seen))

    with_archived = {s.id for s in stores.list(include_archived=True, created_at_gte=since)}
    assert with_archived == set(made)

    far_future = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    assert list(stores.list(created_at_gte=far_future)) == []
    until = made_stores[2].created_at
    assert {s.id for s in stores.list(created_at_gte=since, created_at_lte=until, include_archived=True)} == set(
        made[:3]
    )


def test_store_archive_then_writes_are_refused(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    note = memories.create(store_id, path="/kept.md", content="kept")
    client.beta.memory_stores.archive(store_id)

    with pytest.raises(anthropic.BadRequestError) as created:
        memories.create(store_id, path="/new.md", content="x")
    assert error_type(created.value) == "invalid_request_error"
    with pytest.raises(anthropic.BadRequestError):
        memories.update(note.id, memory_store_id=store_id, content="changed")
    with pytest.raises(anthropic.BadRequestError):
        client.beta.memory_stores.update(store_id, name="renamed")

    # Reads still work, and a note can still be deleted.
    assert memories.retrieve(note.id, memory_store_id=store_id).content == "kept"
    assert memories.delete(note.id, memory_store_id=store_id).type == "memory_deleted"


def test_store_delete(client: anthropic.Anthropic, store_id: str) -> None:
    client.beta.memory_stores.memories.create(store_id, path="/a.md", content="a")
    deleted = client.beta.memory_stores.delete(store_id)
    assert (deleted.id, deleted.type) == (store_id, "memory_store_deleted")
    with pytest.raises(anthropic.NotFoundError) as missing:
        client.beta.memory_stores.retrieve(store_id)
    assert error_type(missing.value) == "not_found_error"
    assert (missing.value.request_id or "").startswith("req_")


# -- memories --------------------------------------------------------------------------------------


def test_memory_create_retrieve_views(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    created = memories.create(store_id, path="/people/sam.md", content="Sam likes tea.")
    assert isinstance(created, BetaManagedAgentsMemory)
    assert created.id.startswith("mem_")
    assert created.memory_store_id == store_id
    assert created.content is None  # create answers the basic view by default
    assert created.content_sha256 == sha("Sam likes tea.")
    assert created.content_size_bytes == len(b"Sam likes tea.")
    assert created.memory_version_id.startswith("memver_")

    full = memories.retrieve(created.id, memory_store_id=store_id)
    assert full.content == "Sam likes tea."  # retrieve answers the full view by default
    basic = memories.retrieve(created.id, memory_store_id=store_id, view="basic")
    assert basic.content is None
    assert basic.content_sha256 == full.content_sha256

    with_content = memories.create(store_id, path="/people/ana.md", content="Ana.", view="full")
    assert with_content.content == "Ana."
    empty = memories.create(store_id, path="/empty.md", content="")
    assert empty.content_size_bytes == 0
    assert memories.retrieve(empty.id, memory_store_id=store_id).content == ""


def test_memory_update_content_with_precondition(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    note = memories.create(store_id, path="/todo.md", content="one")
    updated = memories.update(
        note.id,
        memory_store_id=store_id,
        content="two",
        precondition={"type": "content_sha256", "content_sha256": sha("one")},
        view="full",
    )
    assert updated.content == "two"
    assert updated.memory_version_id != note.memory_version_id

    with pytest.raises(anthropic.ConflictError) as stale:
        memories.update(
            note.id,
            memory_store_id=store_id,
            content="three",
            precondition={"type": "content_sha256", "content_sha256": sha("one")},
        )
    assert stale.value.status_code == 409
    assert error_type(stale.value) == "memory_precondition_failed_error"
    assert stale.value.response.headers["x-should-retry"] == "false"
    assert memories.retrieve(note.id, memory_store_id=store_id).content == "two"


def test_retry_of_landed_update_is_200_without_new_version(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    note = memories.create(store_id, path="/retry.md", content="v1")
    condition: BetaManagedAgentsPreconditionParam = {"type": "content_sha256", "content_sha256": sha("v1")}
    first = memories.update(note.id, memory_store_id=store_id, content="v2", precondition=condition)
    again = memories.update(note.id, memory_store_id=store_id, content="v2", precondition=condition)
    assert again.memory_version_id == first.memory_version_id
    versions = list(client.beta.memory_stores.memory_versions.list(store_id, memory_id=note.id))
    assert [v.operation for v in versions] == ["modified", "created"]


def test_rename_with_precondition_keeps_id(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    note = memories.create(store_id, path="/drafts/plan.md", content="the plan")
    moved = memories.update(
        note.id,
        memory_store_id=store_id,
        path="/plans/plan.md",
        precondition={"type": "content_sha256", "content_sha256": sha("the plan")},
    )
    assert moved.id == note.id
    assert moved.path == "/plans/plan.md"
    assert moved.content_sha256 == note.content_sha256
    assert memories.retrieve(note.id, memory_store_id=store_id).content == "the plan"

    versions = list(client.beta.memory_stores.memory_versions.list(store_id, memory_id=note.id))
    assert [(v.operation, v.path) for v in versions] == [
        ("modified", "/plans/plan.md"),
        ("created", "/drafts/plan.md"),
    ]


def test_path_conflict(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    existing = memories.create(store_id, path="/notes/todo.md", content="x")
    for clash in ("/notes", "/notes/todo.md", "/notes/todo.md/deeper.md"):
        with pytest.raises(anthropic.ConflictError) as conflict:
            memories.create(store_id, path=clash, content="y")
        error = conflict.value.body["error"]  # type: ignore[index]
        assert error["type"] == "memory_path_conflict_error"
        assert error["conflicting_memory_id"] == existing.id
        assert error["conflicting_path"] == "/notes/todo.md"
        assert conflict.value.response.headers["x-should-retry"] == "false"

    other = memories.create(store_id, path="/other.md", content="z")
    with pytest.raises(anthropic.ConflictError) as rename_clash:
        memories.update(other.id, memory_store_id=store_id, path="/notes")
    assert error_type(rename_clash.value) == "memory_path_conflict_error"


def test_delete_memory_with_expected_sha(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    note = memories.create(store_id, path="/gone.md", content="bye")
    with pytest.raises(anthropic.ConflictError) as stale:
        memories.delete(note.id, memory_store_id=store_id, expected_content_sha256=sha("other"))
    assert error_type(stale.value) == "memory_precondition_failed_error"

    deleted = memories.delete(note.id, memory_store_id=store_id, expected_content_sha256=sha("bye"))
    assert (deleted.id, deleted.type) == (note.id, "memory_deleted")
    with pytest.raises(anthropic.NotFoundError):
        memories.retrieve(note.id, memory_store_id=store_id)
    versions = list(client.beta.memory_stores.memory_versions.list(store_id, memory_id=note.id))
    assert versions[0].operation == "deleted"
    assert versions[0].content is None


def test_list_depth_and_prefix(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    for path in ("/a.md", "/people/sam.md", "/people/ana.md", "/people/teams/core.md", "/projects/x/y.md"):
        memories.create(store_id, path=path, content=path)

    top = list(memories.list(store_id, depth=1))
    shape = sorted((item.type, item.path) for item in top)
    assert shape == [("memory", "/a.md"), ("memory_prefix", "/people/"), ("memory_prefix", "/projects/")]
    assert all(isinstance(i, BetaManagedAgentsMemory | BetaManagedAgentsMemoryPrefix) for i in top)

    people = list(memories.list(store_id, path_prefix="/people/", depth=1))
    assert sorted((i.type, i.path) for i in people) == [
        ("memory", "/people/ana.md"),
        ("memory", "/people/sam.md"),
        ("memory_prefix", "/people/teams/"),
    ]
    everything_below = {i.path for i in memories.list(store_id, path_prefix="/people/")}
    assert everything_below == {"/people/sam.md", "/people/ana.md", "/people/teams/core.md"}

    full = list(memories.list(store_id, path_prefix="/people/", view="full"))
    assert {i.path: i.content for i in full if i.type == "memory"}["/people/sam.md"] == "/people/sam.md"
    basic = list(memories.list(store_id, path_prefix="/people/"))
    assert all(i.content is None for i in basic if i.type == "memory")


def test_paging_through_130_notes(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    paths = {f"/bulk/{i:03d}.md" for i in range(130)}  # two pages of 100, seven of 20 with view=full
    for path in sorted(paths):
        memories.create(store_id, path=path, content=path)

    first = memories.list(store_id, limit=100)
    assert len(first.data) == 100 and first.next_page
    seen = [item.path for item in memories.list(store_id, limit=100)]
    assert len(seen) == 130 and set(seen) == paths

    assert {i.path for i in memories.list(store_id, limit=1000).data} == paths  # one page of up to 1000

    # view=full clamps a page to 20 notes; the pages still add up to the whole store.
    full_page = memories.list(store_id, limit=100, view="full")
    assert len(full_page.data) == 20 and full_page.next_page
    full = [(i.path, memory(i).content) for i in memories.list(store_id, limit=100, view="full")]
    assert len(full) == 130 and all(path == content for path, content in full)

    with pytest.raises(anthropic.BadRequestError):
        memories.list(store_id, limit=1001)


# -- memory versions -------------------------------------------------------------------------------


def test_versions_list_retrieve_and_filters(live: Live, client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    versions = client.beta.memory_stores.memory_versions
    note = memories.create(store_id, path="/v.md", content="first")
    memories.update(note.id, memory_store_id=store_id, content="second")
    memories.delete(note.id, memory_store_id=store_id)
    task_id, task_token = _task_reading(live, store_id)
    by_task = live.client(task_token).beta.memory_stores.memories.create(store_id, path="/t.md", content="t")
    by_user = live.client(live.user).beta.memory_stores.memories.create(store_id, path="/u.md", content="u")

    listed = list(versions.list(store_id))
    assert [v.operation for v in listed[:3]] == ["created", "created", "deleted"]  # newest first
    assert [v.created_at for v in listed] == sorted((v.created_at for v in listed), reverse=True)
    assert all(v.type == "memory_version" and v.content is None for v in listed)  # basic by default

    mine = list(versions.list(store_id, memory_id=note.id))
    assert [v.operation for v in mine] == ["deleted", "modified", "created"]
    created = mine[-1]
    assert isinstance(created.created_by, BetaManagedAgentsAPIActor)
    assert created.created_by.api_key_id == live.admin_key_id

    got = versions.retrieve(created.id, memory_store_id=store_id)
    assert (got.content, got.path, got.content_sha256) == ("first", "/v.md", sha("first"))
    assert versions.retrieve(created.id, memory_store_id=store_id, view="basic").content is None
    assert mine[0].content is None and mine[0].content_sha256 is None

    assert [v.id for v in versions.list(store_id, operation="modified")] == [mine[1].id]
    (task_version,) = versions.list(store_id, session_id=task_id)
    assert task_version.memory_id == by_task.id
    assert isinstance(task_version.created_by, BetaManagedAgentsSessionActor)
    assert task_version.created_by.session_id == task_id
    assert [v.id for v in versions.list(store_id, extra_query={"task_id": task_id})] == [task_version.id]
    (user_version,) = versions.list(store_id, extra_query={"user_id": live.user_id})
    assert user_version.memory_id == by_user.id
    assert isinstance(user_version.created_by, BetaManagedAgentsUserActor)
    assert {v.memory_id for v in versions.list(store_id, api_key_id=live.admin_key_id)} == {note.id}
    assert list(versions.list(store_id, service_account_id="svac_none")) == []

    middle = mine[1].created_at
    window = list(versions.list(store_id, created_at_gte=middle, created_at_lte=middle))
    assert [v.id for v in window] == [mine[1].id]

    page = versions.list(store_id, limit=2)
    assert len(page.data) == 2 and page.next_page
    assert len(list(versions.list(store_id, limit=2))) == len(listed)
    with pytest.raises(anthropic.BadRequestError):
        versions.list(store_id, limit=101)


def test_redact(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    versions = client.beta.memory_stores.memory_versions
    note = memories.create(store_id, path="/secret-ish.md", content="old text")
    memories.update(note.id, memory_store_id=store_id, content="new text")
    (old,) = [v for v in versions.list(store_id, memory_id=note.id) if v.operation == "created"]
    redacted = versions.redact(old.id, memory_store_id=store_id)
    assert redacted.id == old.id
    assert redacted.redacted_at is not None
    assert (redacted.path, redacted.content, redacted.content_sha256) == (None, None, None)
    assert redacted.created_by == old.created_by
    assert isinstance(redacted.redacted_by, BetaManagedAgentsAPIActor)

    again = versions.retrieve(old.id, memory_store_id=store_id, view="full")
    assert (again.redacted_at, again.path, again.content, again.content_size_bytes) == (
        redacted.redacted_at,
        None,
        None,
        None,
    )
    current = memories.retrieve(note.id, memory_store_id=store_id)
    assert current.content == "new text"
    with pytest.raises(anthropic.ConflictError):  # the newest version of a live note
        versions.redact(current.memory_version_id, memory_store_id=store_id)


# -- tenancy and roles -----------------------------------------------------------------------------


def test_other_workspace_sees_404(live: Live, client: anthropic.Anthropic, store_id: str) -> None:
    note = client.beta.memory_stores.memories.create(store_id, path="/private.md", content="mine")
    version_id = note.memory_version_id
    outsider = live.client(live.other_workspace).beta.memory_stores
    calls: list[Callable[[], object]] = [
        lambda: outsider.retrieve(store_id),
        lambda: outsider.update(store_id, name="taken"),
        lambda: outsider.archive(store_id),
        lambda: outsider.delete(store_id),
        lambda: outsider.memories.list(store_id),
        lambda: outsider.memories.retrieve(note.id, memory_store_id=store_id),
        lambda: outsider.memories.create(store_id, path="/x.md", content="x"),
        lambda: outsider.memories.update(note.id, memory_store_id=store_id, content="x"),
        lambda: outsider.memories.delete(note.id, memory_store_id=store_id),
        lambda: outsider.memory_versions.list(store_id),
        lambda: outsider.memory_versions.retrieve(version_id, memory_store_id=store_id),
    ]
    for call in calls:
        with pytest.raises(anthropic.NotFoundError):
            call()
    assert store_id not in {s.id for s in outsider.list(include_archived=True)}
    assert client.beta.memory_stores.memories.retrieve(note.id, memory_store_id=store_id).content == "mine"


def test_read_only_key_cannot_write(live: Live, client: anthropic.Anthropic, store_id: str) -> None:
    note = client.beta.memory_stores.memories.create(store_id, path="/ro.md", content="ro")
    reader = live.client(live.reader).beta.memory_stores
    assert reader.retrieve(store_id).id == store_id
    assert reader.memories.retrieve(note.id, memory_store_id=store_id).content == "ro"
    assert [v.memory_id for v in reader.memory_versions.list(store_id)] == [note.id]
    writes: list[Callable[[], object]] = [
        lambda: reader.create(name="nope"),
        lambda: reader.update(store_id, name="nope"),
        lambda: reader.archive(store_id),
        lambda: reader.delete(store_id),
        lambda: reader.memories.create(store_id, path="/nope.md", content="x"),
        lambda: reader.memories.update(note.id, memory_store_id=store_id, content="x"),
        lambda: reader.memories.delete(note.id, memory_store_id=store_id),
        lambda: reader.memory_versions.redact(note.memory_version_id, memory_store_id=store_id),
    ]
    for write in writes:
        with pytest.raises(anthropic.PermissionDeniedError) as denied:
            write()
        assert error_type(denied.value) == "permission_error"
    assert client.beta.memory_stores.memories.retrieve(note.id, memory_store_id=store_id).content == "ro"


def test_unknown_key_is_authentication_error(live: Live) -> None:
    with pytest.raises(anthropic.AuthenticationError) as failed:
        live.client("gm_key_not-a-real-key").beta.memory_stores.list()
    assert error_type(failed.value) == "authentication_error"
