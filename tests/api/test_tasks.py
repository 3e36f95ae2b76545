"""``/v1/workers`` and ``/v1/tasks`` over the real app (served in this process), with real SQLite and Git;
and a task's token against the memory-store routes (its writes are ``task_actor`` versions, read-only
stores refuse them with 403, stores outside its list are 404).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from gitmem.agents.tasks.tasks import tasks_for
from gitmem.api.app import Settings, create_app
from gitmem.engine.gitmem import Gitmem
from tests.apps import InProcess, Response, TestHome, in_process
from tests.checks import commit

# -- fixtures --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    server: InProcess
    home: Path
    workspace_id: str
    admin: str
    reader: str
    other: str

    def client(self, secret: str | None = None) -> httpx.Client:
        return self.server.http(secret or self.admin)


@pytest.fixture(scope="module")
def live(test_home: Callable[..., TestHome]) -> Iterator[Live]:
    home = test_home("tasks-home")
    with in_process(home.path) as server:
        yield Live(server, home.path, home.workspace_id, home.admin, home.reader, home.other)


@pytest.fixture
def api(live: Live) -> Iterator[httpx.Client]:
    with live.client() as client:
        yield client


def ok(response: Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def refused(response: Response, status: int, error_type: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == error_type, body
    assert body["request_id"].startswith("req_")
    message: str = body["error"]["message"]
    return message


def new_store(api: httpx.Client, name: str, description: str = "") -> str:
    store: str = ok(api.post("/v1/memory_stores", json={"name": name, "description": description}))["id"]
    return store


def resource(store_id: str, **extra: object) -> dict[str, object]:
    return {"type": "memory_store", "memory_store_id": store_id, **extra}


# -- workers ---------------------------------------------------------------------------------------


def test_create_and_retrieve_a_worker(api: httpx.Client) -> None:
    attached = new_store(api, "Team")
    worker = ok(api.post("/v1/workers", json={"name": "researcher", "memory_store_ids": [attached]}))
    assert worker["id"].startswith("worker_") and worker["type"] == "worker"
    assert worker["name"] == "researcher"
    assert worker["memory_store_ids"] == [attached]
    own = worker["own_memory_store_id"]
    assert own.startswith("memstore_")
    assert ok(api.get(f"/v1/workers/{worker['id']}")) == worker

    # The worker's own store is a memory store like any other, except that it cannot be deleted.
    assert ok(api.get(f"/v1/memory_stores/{own}"))["name"] == "researcher"
    refused(api.delete(f"/v1/memory_stores/{own}"), 409, "conflict_error")
    assert ok(api.get(f"/v1/memory_stores/{own}"))["archived_at"] is None

    updated = ok(api.post(f"/v1/workers/{worker['id']}", json={"memory_store_ids": []}))
    assert updated["memory_store_ids"] == []
    listed = ok(api.get("/v1/workers", params={"limit": 100}))
    assert worker["id"] in [w["id"] for w in listed["data"]]


def test_worker_refusals(live: Live, api: httpx.Client) -> None:
    refused(api.post("/v1/workers", json={}), 400, "invalid_request_error")  # never FastAPI's 422
    refused(api.post("/v1/workers", json={"name": "w", "colour": "red"}), 400, "invalid_request_error")
    refused(
        api.post("/v1/workers", json={"name": "w", "memory_store_ids": ["memstore_01NOSUCH0000000000000000"]}),
        404,
        "not_found_error",
    )
    refused(api.get("/v1/workers/worker_01NOSUCHWORKER000000000000"), 404, "not_found_error")
    with live.client(live.reader) as reader:
        refused(reader.post("/v1/workers", json={"name": "w"}), 403, "permission_error")
    worker = ok(api.post("/v1/workers", json={"name": "w"}))
    with live.client(live.other) as other:
        refused(other.get(f"/v1/workers/{worker['id']}"), 404, "not_found_error")
        refused(other.post(f"/v1/workers/{worker['id']}", json={"memory_store_ids": []}), 404, "not_found_error")
    with live.server.http() as anonymous:
        refused(anonymous.post("/v1/workers", json={"name": "w"}), 401, "authentication_error")


# -- tasks -----------------------------------------------------------------------------------------


def test_task_with_read_only_and_read_write_stores(live: Live, api: httpx.Client) -> None:
    ro = new_store(api, "Team Handbook", "how we work")
    rw = new_store(api, "Scratch")
    unrelated = new_store(api, "Unrelated")
    ok(api.post(f"/v1/memory_stores/{ro}/memories", json={"path": "/rules.md", "content": "be kind"}))
    worker = ok(api.post("/v1/workers", json={"name": "researcher"}))
    own = worker["own_memory_store_id"]

    task = ok(
        api.post(
            "/v1/tasks",
            json={
                "worker_id": worker["id"],
                "resources": [resource(ro, access="read_only", instructions="Follow these rules."), resource(rw)],
            },
        )
    )
    token = task["token"]
    assert token.startswith("gm_tsk_")
    assert task["id"].startswith("task_") and task["type"] == "task" and task["worker_id"] == worker["id"]
    root = f"/.little-worker/tasks/{task['id']}/memory/"
    assert [
        (r["memory_store_id"], r["name"], r["access"], r["instructions"], r["mount_path"], r["own"])
        for r in task["resources"]
    ] == [
        (own, "researcher", "read_write", None, root + "researcher/", True),
        (ro, "Team Handbook", "read_only", "Follow these rules.", root + "team-handbook/", False),
        (rw, "Scratch", "read_write", None, root + "scratch/", False),
    ]
    assert task["resources"][1]["description"] == "how we work"
    assert task["created_by"]["type"] == "api_actor"

    # The token is shown once.
    again = ok(api.get(f"/v1/tasks/{task['id']}"))
    assert again["token"] is None
    assert {k: v for k, v in again.items() if k != "token"} == {k: v for k, v in task.items() if k != "token"}

    with live.client(token) as as_task:
        # Writes land as task_actor versions (the SDK's session_actor) in read-write stores.
        for store_id in (rw, own):
            memory = ok(
                as_task.post(
                    f"/v1/memory_stores/{store_id}/memories",
                    json={"path": "/learned.md", "content": "the build needs make"},
                )
            )
            versions = ok(api.get(f"/v1/memory_stores/{store_id}/memory_versions", params={"session_id": task["id"]}))[
                "data"
            ]
            assert [(v["memory_id"], v["operation"], v["created_by"]) for v in versions] == [
                (memory["id"], "created", {"type": "session_actor", "session_id": task["id"]})
            ]
            ok(
                as_task.post(
                    f"/v1/memory_stores/{store_id}/memories/{memory['id']}",
                    json={"content": "the build needs make and git"},
                )
            )
        log = commit(Gitmem.open(live.home).store(live.workspace_id, rw).repo.revparse_single("main"))
        assert log.author.name == task["id"] and f"task_actor task_id={task['id']}" in log.message

        # A read-only store can be read but not written: 403.
        notes = ok(as_task.get(f"/v1/memory_stores/{ro}/memories"))["data"]
        assert [n["path"] for n in notes] == ["/rules.md"]
        message = refused(
            as_task.post(f"/v1/memory_stores/{ro}/memories", json={"path": "/x.md", "content": "x"}),
            403,
            "permission_error",
        )
        assert "read-only" in message
        refused(
            as_task.post(f"/v1/memory_stores/{ro}/memories/{notes[0]['id']}", json={"content": "be rude"}),
            403,
            "permission_error",
        )
        refused(as_task.delete(f"/v1/memory_stores/{ro}/memories/{notes[0]['id']}"), 403, "permission_error")
        assert ok(api.get(f"/v1/memory_stores/{ro}/memories/{notes[0]['id']}"))["content"] == "be kind"

        # A store outside its list does not exist for it.
        refused(as_task.get(f"/v1/memory_stores/{unrelated}/memories"), 404, "not_found_error")
        refused(
            as_task.post(f"/v1/memory_stores/{unrelated}/memories", json={"path": "/x.md", "content": "x"}),
            404,
            "not_found_error",
        )

        # It reads its own task, and nothing else on these routes.
        assert ok(as_task.get(f"/v1/tasks/{task['id']}"))["id"] == task["id"]
        assert ok(as_task.get(f"/v1/workers/{worker['id']}"))["id"] == worker["id"]
        sibling = ok(api.post("/v1/tasks", json={"worker_id": worker["id"]}))
        refused(as_task.get(f"/v1/tasks/{sibling['id']}"), 404, "not_found_error")
        refused(as_task.get(f"/v1/tasks/{sibling['id']}/events"), 404, "not_found_error")
        refused(as_task.post("/v1/tasks", json={"worker_id": worker["id"]}), 403, "permission_error")
        refused(as_task.post("/v1/workers", json={"name": "mine"}), 403, "permission_error")
        refused(as_task.get("/v1/tasks"), 403, "permission_error")


def test_a_frozen_list_survives_a_rename(api: httpx.Client) -> None:
    store = new_store(api, "People", "who is who")
    worker = ok(api.post("/v1/workers", json={"name": "w", "memory_store_ids": [store]}))
    task = ok(api.post("/v1/tasks", json={"worker_id": worker["id"]}))
    ok(api.post(f"/v1/memory_stores/{store}", json={"name": "Humans", "description": "changed"}))
    ok(api.post(f"/v1/workers/{worker['id']}", json={"memory_store_ids": []}))

    after = ok(api.get(f"/v1/tasks/{task['id']}"))
    assert after["resources"] == task["resources"]
    assert (after["resources"][1]["name"], after["resources"][1]["description"]) == ("People", "who is who")
    assert after["resources"][1]["mount_path"].endswith("/memory/people/")
    memory = ok(api.get(f"/v1/tasks/{task['id']}/memory"))
    assert "### People" in memory["context"] and "Humans" not in memory["context"]


def test_more_than_eight_resources_is_400(api: httpx.Client) -> None:
    stores = [new_store(api, f"many {i}") for i in range(9)]
    worker = ok(api.post("/v1/workers", json={"name": "w"}))
    message = refused(
        api.post("/v1/tasks", json={"worker_id": worker["id"], "resources": [resource(s) for s in stores]}),
        400,
        "invalid_request_error",
    )
    assert "at most 8" in message
    task = ok(api.post("/v1/tasks", json={"worker_id": worker["id"], "resources": [resource(s) for s in stores[:8]]}))
    assert len(task["resources"]) == 9


def test_task_refusals(live: Live, api: httpx.Client) -> None:
    store = new_store(api, "s")
    archived = new_store(api, "archived")
    ok(api.post(f"/v1/memory_stores/{archived}/archive"))
    worker = ok(api.post("/v1/workers", json={"name": "w"}))

    def create(*resources: dict[str, Any], client: httpx.Client = api) -> httpx.Response:
        return client.post("/v1/tasks", json={"worker_id": worker["id"], "resources": list(resources)})

    refused(create(resource(store, access="write")), 400, "invalid_request_error")
    refused(create(resource(store, instructions="x" * 4097)), 400, "invalid_request_error")
    refused(create({"type": "file", "memory_store_id": store}), 400, "invalid_request_error")
    refused(create(resource(store), resource(store)), 400, "invalid_request_error")
    refused(create(resource(archived)), 400, "invalid_request_error")
    refused(create(resource(worker["own_memory_store_id"])), 400, "invalid_request_error")
    refused(create(resource("memstore_01NOSUCHSTORE0000000000000")), 404, "not_found_error")
    refused(api.post("/v1/tasks", json={"worker_id": "worker_01NOSUCHWORKER000000000000"}), 404, "not_found_error")
    with live.client(live.reader) as reader:
        refused(create(resource(store), client=reader), 403, "permission_error")
    with live.client(live.other) as other:
        # Another workspace's worker and stores are 404 to it; so is this workspace's task.
        refused(create(resource(store), client=other), 404, "not_found_error")
        theirs = ok(other.post("/v1/workers", json={"name": "theirs"}))
        refused(
            other.post("/v1/tasks", json={"worker_id": theirs["id"], "resources": [resource(store)]}),
            404,
            "not_found_error",
        )
        task = ok(create(resource(store)))
        for path in ("", "/memory", "/events"):
            refused(other.get(f"/v1/tasks/{task['id']}{path}"), 404, "not_found_error")
        refused(other.post(f"/v1/tasks/{task['id']}/events", json={"type": "x"}), 404, "not_found_error")


def test_none_named_reads_the_workers_attached_stores(api: httpx.Client) -> None:
    a, b = new_store(api, "Alpha"), new_store(api, "Beta")
    worker = ok(api.post("/v1/workers", json={"name": "w", "memory_store_ids": [a, b]}))
    for body in ({"worker_id": worker["id"]}, {"worker_id": worker["id"], "resources": []}):
        task = ok(api.post("/v1/tasks", json=body))
        assert [(r["memory_store_id"], r["access"], r["instructions"]) for r in task["resources"]] == [
            (worker["own_memory_store_id"], "read_write", None),
            (a, "read_write", None),
            (b, "read_write", None),
        ]
    listed = ok(api.get("/v1/tasks", params={"worker_id": worker["id"], "limit": 1}))
    assert len(listed["data"]) == 1 and listed["next_page"]
    rest = ok(api.get("/v1/tasks", params={"worker_id": worker["id"], "page": listed["next_page"]}))
    assert len(rest["data"]) == 1 and rest["next_page"] is None


def test_memory_view_for_empty_and_non_empty_stores(live: Live, api: httpx.Client) -> None:
    full = new_store(api, "Handbook", "How the team works")
    for name in ("alpha", "beta", "gamma"):
        ok(api.post(f"/v1/memory_stores/{full}/memories", json={"path": f"/topics/{name}.md", "content": name}))
    worker = ok(api.post("/v1/workers", json={"name": "Researcher"}))
    task = ok(
        api.post(
            "/v1/tasks",
            json={
                "worker_id": worker["id"],
                "resources": [resource(full, access="read_only", instructions="Follow it.")],
            },
        )
    )

    with live.client(task["token"]) as as_task:
        memory = ok(as_task.get(f"/v1/tasks/{task['id']}/memory", params={"max_paths": 2}))
    root = f"/.little-worker/tasks/{task['id']}/memory/"
    assert memory["type"] == "task_memory" and memory["root"] == root
    assert [(s["mount_path"], s["access"], s["memory_count"], s["paths"]) for s in memory["stores"]] == [
        (root + "researcher/", "read_write", 0, []),
        (root + "handbook/", "read_only", 3, ["/topics/alpha.md", "/topics/beta.md"]),
    ]
    context = memory["context"]
    own_part, handbook_part = context.split("### ")[1:]
    assert context.startswith("## Memory")
    assert "This store is empty. Create its first note" in own_part
    assert "Notes (3):\n- `topics/alpha.md`\n- `topics/beta.md`\n- ... and 1 more" in handbook_part
    assert "Description: How the team works" in handbook_part and "Instructions: Follow it." in handbook_part

    # The section follows the stores' notes as they change.
    ok(
        api.post(
            f"/v1/memory_stores/{worker['own_memory_store_id']}/memories", json={"path": "/first.md", "content": "x"}
        )
    )
    context = ok(api.get(f"/v1/tasks/{task['id']}/memory"))["context"]
    assert "- `first.md`" in context and "This store is empty" not in context


def test_events_are_append_only_and_paged(live: Live, api: httpx.Client) -> None:
    worker = ok(api.post("/v1/workers", json={"name": "w"}))
    task = ok(api.post("/v1/tasks", json={"worker_id": worker["id"]}))
    events_url = f"/v1/tasks/{task['id']}/events"
    made = []
    with live.client(task["token"]) as as_task:
        for i in range(5):
            made.append(ok(as_task.post(events_url, json={"type": "agent.message", "payload": {"n": i}})))
    made.append(ok(api.post(events_url, json={"type": "user.message"})))
    assert [e["seq"] for e in made] == [1, 2, 3, 4, 5, 6]
    assert made[0]["created_by"] == {"type": "session_actor", "session_id": task["id"]}
    assert made[5]["created_by"]["type"] == "api_actor" and made[5]["payload"] == {}

    seen, page = [], None
    while True:
        params: dict[str, str | int] = {"limit": 4}
        if page:
            params["page"] = page
        body = ok(api.get(events_url, params=params))
        seen += body["data"]
        if not (page := body["next_page"]):
            break
    assert seen == made
    assert [e["seq"] for e in ok(api.get(events_url, params={"after_seq": 4}))["data"]] == [5, 6]
    assert [e["seq"] for e in ok(api.get(events_url, params={"types": "user.message"}))["data"]] == [6]
    with live.client(live.reader) as reader:
        assert len(ok(reader.get(events_url))["data"]) == 6
        refused(reader.post(events_url, json={"type": "x"}), 403, "permission_error")

    # No way to change or remove an event.
    for method in ("PUT", "PATCH", "DELETE"):
        assert api.request(method, events_url).status_code == 405
        assert api.request(method, f"{events_url}/1").status_code in (404, 405)
    refused(api.post(events_url, json={"type": "has space"}), 400, "invalid_request_error")
    refused(api.post(events_url, json={"payload": {}}), 400, "invalid_request_error")
    refused(api.get(events_url, params={"limit": 0}), 400, "invalid_request_error")
    assert ok(api.get(events_url, params={"limit": 100}))["data"] == made


def test_engine_and_http_share_one_catalog(live: Live, api: httpx.Client) -> None:
    # A worker made through the engine (as the CLI does) is served at once.
    worker = tasks_for(Gitmem.open(live.home)).create_worker(live.workspace_id, "from the CLI")
    assert ok(api.get(f"/v1/workers/{worker.id}"))["own_memory_store_id"] == worker.own_store_id


# -- ending and deleting a task --------------------------------------------------------------------


def second_server(home: Path, secret: str) -> TestClient:
    """A second server's view of the same data home: another app on another ``Gitmem`` (its own
    connections and caches), as another process would have."""
    return TestClient(
        create_app(Gitmem.open(home), Settings.defaults(dream_runner=False)), headers={"x-api-key": secret}
    )


def test_end_task_kills_its_token_in_every_process(live: Live, api: httpx.Client) -> None:
    store_id = new_store(api, "kept after the end")
    worker = ok(api.post("/v1/workers", json={"name": "ender"}))
    task = ok(api.post("/v1/tasks", json={"worker_id": worker["id"], "resources": [resource(store_id)]}))
    own_store = worker["own_memory_store_id"]
    with live.client(task["token"]) as as_task, second_server(live.home, task["token"]) as elsewhere:
        ok(as_task.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/a.md", "content": "a\n"}))
        ok(elsewhere.post(f"/v1/tasks/{task['id']}/events", json={"type": "agent.message"}))
        assert task["ended_at"] is None

        ended = ok(api.post(f"/v1/tasks/{task['id']}/end"))  # on the first server
        assert ended["ended_at"] is not None and ended["id"] == task["id"] and ended["token"] is None
        # Refused at once by both servers: the revocation is in the shared catalog.
        refused(as_task.get(f"/v1/tasks/{task['id']}"), 401, "authentication_error")
        refused(elsewhere.get(f"/v1/memory_stores/{store_id}/memories"), 401, "authentication_error")
        refused(elsewhere.post(f"/v1/tasks/{task['id']}/events", json={"type": "x"}), 401, "authentication_error")

    # Its writes and events stay; the stores are untouched.
    assert ok(api.get(f"/v1/tasks/{task['id']}"))["ended_at"] == ended["ended_at"]
    assert [e["type"] for e in ok(api.get(f"/v1/tasks/{task['id']}/events"))["data"]] == ["agent.message"]
    versions = ok(api.get(f"/v1/memory_stores/{store_id}/memory_versions"))["data"]
    assert [v["created_by"] for v in versions] == [{"type": "session_actor", "session_id": task["id"]}]
    assert ok(api.get(f"/v1/memory_stores/{own_store}"))["archived_at"] is None
    assert ok(api.post(f"/v1/tasks/{task['id']}/end"))["ended_at"] == ended["ended_at"]  # again: no change


def test_a_task_may_end_itself_but_not_delete(live: Live, api: httpx.Client) -> None:
    worker = ok(api.post("/v1/workers", json={"name": "self-ender"}))
    task = ok(api.post("/v1/tasks", json={"worker_id": worker["id"]}))
    other = ok(api.post("/v1/tasks", json={"worker_id": worker["id"]}))
    with live.client(task["token"]) as as_task:
        refused(as_task.post(f"/v1/tasks/{other['id']}/end"), 404, "not_found_error")
        refused(as_task.delete(f"/v1/tasks/{task['id']}"), 403, "permission_error")
        assert ok(as_task.post(f"/v1/tasks/{task['id']}/end"))["ended_at"] is not None
        refused(as_task.get(f"/v1/tasks/{task['id']}"), 401, "authentication_error")
    with live.client(live.reader) as reader:
        refused(reader.post(f"/v1/tasks/{other['id']}/end"), 403, "permission_error")
        refused(reader.delete(f"/v1/tasks/{other['id']}"), 403, "permission_error")
    with live.client(live.other) as stranger:
        refused(stranger.post(f"/v1/tasks/{other['id']}/end"), 404, "not_found_error")
        refused(stranger.delete(f"/v1/tasks/{other['id']}"), 404, "not_found_error")
    assert ok(api.get(f"/v1/tasks/{other['id']}"))["ended_at"] is None


def test_delete_task_removes_it_and_its_events_not_its_versions(live: Live, api: httpx.Client) -> None:
    store_id = new_store(api, "outlives its task")
    worker = ok(api.post("/v1/workers", json={"name": "deleter"}))
    task = ok(api.post("/v1/tasks", json={"worker_id": worker["id"], "resources": [resource(store_id)]}))
    with live.client(task["token"]) as as_task:
        ok(as_task.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/kept.md", "content": "k\n"}))
        ok(
            as_task.post(
                f"/v1/memory_stores/{worker['own_memory_store_id']}/memories",
                json={"path": "/own.md", "content": "o\n"},
            )
        )
        ok(as_task.post(f"/v1/tasks/{task['id']}/events", json={"type": "agent.message"}))
        assert ok(api.delete(f"/v1/tasks/{task['id']}")) == {"id": task["id"], "type": "task_deleted"}
        refused(as_task.get(f"/v1/memory_stores/{store_id}/memories"), 401, "authentication_error")
    refused(api.get(f"/v1/tasks/{task['id']}"), 404, "not_found_error")
    refused(api.get(f"/v1/tasks/{task['id']}/events"), 404, "not_found_error")
    refused(api.delete(f"/v1/tasks/{task['id']}"), 404, "not_found_error")
    assert task["id"] not in [t["id"] for t in ok(api.get("/v1/tasks", params={"limit": 100}))["data"]]
    gm = Gitmem.open(live.home)
    assert tasks_for(gm).list_events(task["id"]).items == []
    # The versions keep the task's id; the worker and its own store are untouched.
    for sid in (store_id, worker["own_memory_store_id"]):
        versions = ok(api.get(f"/v1/memory_stores/{sid}/memory_versions"))["data"]
        assert [v["created_by"]["session_id"] for v in versions] == [task["id"]]
    assert ok(api.get(f"/v1/workers/{worker['id']}"))["own_memory_store_id"] == worker["own_memory_store_id"]
