"""The secret filter reads every text a caller can store (issue 28, item 6), not only note bodies: a
token refused as a note's content is refused, with the same 400 envelope and nothing changed, as a
note's path (create, move, the memory tool's create and rename, MCP's rename, a bank entry), a store's
name, description and metadata, a worker's or profile's name, a task's and a dream's instructions, a
task event's payload and a webhook's description. Pushes (file names, commit messages) are in
tests/unit/engine/push/test_receive.py, MCP's rename in tests/system/test_mcp.py (MCP's import is
paid there once)."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.settings import Settings
from gitmem.engine.gitmem import Gitmem
from gitmem.rules.filters import FilterChain
from tests.checks import listed_notes

# A GitHub token's shape with random letters: generated, never a real one.
TOKEN = "ghp_" + "".join(random.Random(28).choices(string.ascii_letters + string.digits, k=36))
ENVELOPE_TYPE = "invalid_request_error"


@dataclass
class Api:
    client: TestClient
    gm: Gitmem
    workspace_id: str
    store_id: str
    memory_id: str
    worker_id: str
    task_id: str
    user: dict[str, str]
    profile_id: str

    def state(self) -> tuple[object, ...]:
        """What a refused request must leave as it was."""
        ws = self.workspace_id
        store = self.gm.store(ws, self.store_id)
        tasks = self.client.get("/v1/tasks", params={"limit": 100}).json()
        return (
            [(s.id, s.name, s.description, s.metadata) for s in self.gm.list_stores(ws, limit=100).items],
            sorted((n.path, n.content_sha256) for n in listed_notes(store.list(limit=100).items)),
            self.client.get("/v1/workers", params={"limit": 100}).json(),
            tasks,
            self.client.get(f"/v1/tasks/{self.task_id}/events").json(),
            self.client.get("/v1/profiles", headers=self.user).json(),
            self.client.get("/v1/webhooks").json(),
            self.client.get("/v1/dreams").json(),
        )


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    gm = Gitmem.open(tmp_path_factory.mktemp("caller-text"), fsync="never")
    ws = gm.catalog.create_workspace("alpha")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    _, user_token = gm.catalog.create_user(ws.id, "ann")
    settings = Settings.defaults(
        dream_runner=False, prune_interval_seconds=0, rate_limit_per_second=0, webhook_delivery=False
    )
    with TestClient(create_app(gm, settings), headers={"x-api-key": admin}) as client:
        store_id = client.post("/v1/memory_stores", json={"name": "notes"}).json()["id"]
        memory = client.post(f"/v1/memory_stores/{store_id}/memories", json={"path": "/a.md", "content": "a"})
        tool = client.post(
            f"/v1/memory_stores/{store_id}/memory_tool",
            json={"command": "create", "path": "/memories/b.md", "file_text": "b"},
        )
        assert not tool.json()["is_error"], tool.text
        worker_id = client.post("/v1/workers", json={"name": "planner"}).json()["id"]
        task_id = client.post("/v1/tasks", json={"worker_id": worker_id}).json()["id"]
        user = {"x-api-key": user_token}
        profile = client.post("/v1/profiles", json={"name": "home"}, headers=user)
        assert profile.status_code == 200, profile.text
        yield Api(client, gm, ws.id, store_id, memory.json()["id"], worker_id, task_id, user, profile.json()["id"])


def _store_resource(api: Api, **extra: str) -> dict[str, Any]:
    return {
        "worker_id": api.worker_id,
        "resources": [{"type": "memory_store", "memory_store_id": api.store_id, **extra}],
    }


# (surface, method, url, body, as the user?) with {s} the store, {m} a note, {t} the task, {p} the profile.
SURFACES: list[tuple[str, str, str, Any, bool]] = [
    (
        "note content (the reference)",
        "POST",
        "/v1/memory_stores/{s}/memories",
        {"path": "/c.md", "content": TOKEN},
        False,
    ),
    (
        "note path on create",
        "POST",
        "/v1/memory_stores/{s}/memories",
        {"path": f"/keys/{TOKEN}.md", "content": "x"},
        False,
    ),
    ("note path on update", "POST", "/v1/memory_stores/{s}/memories/{m}", {"path": f"/{TOKEN}.md"}, False),
    ("store name", "POST", "/v1/memory_stores", {"name": f"deploy {TOKEN}"}, False),
    ("store description", "POST", "/v1/memory_stores", {"name": "ok", "description": f"token {TOKEN}"}, False),
    ("store metadata value", "POST", "/v1/memory_stores", {"name": "ok", "metadata": {"k": TOKEN}}, False),
    ("store metadata key", "POST", "/v1/memory_stores", {"name": "ok", "metadata": {TOKEN: "v"}}, False),
    (
        "store metadata, key naming value",
        "POST",
        "/v1/memory_stores",
        {"name": "ok", "metadata": {"password": "Tr0ub4dor&3x!"}},
        False,
    ),
    ("store name on update", "POST", "/v1/memory_stores/{s}", {"name": TOKEN}, False),
    ("store description on update", "POST", "/v1/memory_stores/{s}", {"description": TOKEN}, False),
    ("store metadata on update", "POST", "/v1/memory_stores/{s}", {"metadata": {"gh": TOKEN}}, False),
    ("worker name", "POST", "/v1/workers", {"name": TOKEN}, False),
    ("task instructions", "POST", "/v1/tasks", "instructions", False),
    (
        "task event payload",
        "POST",
        "/v1/tasks/{t}/events",
        {"type": "note", "payload": {"text": f"use {TOKEN}"}},
        False,
    ),
    (
        "task event payload, nested",
        "POST",
        "/v1/tasks/{t}/events",
        {"type": "note", "payload": {"a": [{"b": TOKEN}]}},
        False,
    ),
    ("task event payload key", "POST", "/v1/tasks/{t}/events", {"type": "note", "payload": {TOKEN: 1}}, False),
    ("dream instructions", "POST", "/v1/dreams", "dream", False),
    ("profile name", "POST", "/v1/profiles", {"name": TOKEN}, True),
    ("profile name on rename", "POST", "/v1/profiles/{p}", {"name": TOKEN}, True),
    ("bank entry path", "PUT", "/v1/profiles/{p}/memories/content", "bank", True),
    ("webhook description", "POST", "/v1/webhooks", "webhook", False),
]


def _body(api: Api, body: Any) -> Any:
    if body == "instructions":
        return _store_resource(api, instructions=f"deploy with {TOKEN}")
    if body == "dream":
        inputs = [{"type": "memory_store", "memory_store_id": api.store_id}]
        return {"inputs": inputs, "model": "claude-sonnet-4-5", "instructions": f"the key is {TOKEN}"}
    if body == "webhook":
        return {"url": "https://hooks.example.com/in", "event_types": ["memory.created"], "description": TOKEN}
    return body


@pytest.mark.parametrize(("surface", "method", "url", "body", "as_user"), SURFACES, ids=[s[0] for s in SURFACES])
def test_a_secret_is_refused_on_every_text_a_caller_stores(
    api: Api, surface: str, method: str, url: str, body: Any, as_user: bool
) -> None:
    before = api.state()
    target = url.format(s=api.store_id, m=api.memory_id, t=api.task_id, p=api.profile_id)
    params = {"path": f"notes/{TOKEN}.md"} if body == "bank" else None
    content = {"content": "x"} if body == "bank" else _body(api, body)
    response = api.client.request(method, target, json=content, params=params, headers=api.user if as_user else None)
    assert response.status_code == 400, (surface, response.status_code, response.text)
    error = response.json()["error"]
    assert error["type"] == ENVELOPE_TYPE and set(response.json()) == {"type", "error", "request_id"}
    assert "appears to hold" in error["message"] and "it was not saved" in error["message"], error
    assert TOKEN not in response.text and "Tr0ub4dor" not in response.text  # never repeated
    assert api.state() == before


@pytest.mark.parametrize(
    "command",
    [
        {"command": "create", "path": f"/memories/{TOKEN}.md", "file_text": "x"},
        {"command": "rename", "old_path": "/memories/b.md", "new_path": f"/memories/{TOKEN}/b.md"},
    ],
    ids=["create", "rename"],
)
def test_the_memory_tool_refuses_a_secret_in_a_path(api: Api, command: dict[str, str]) -> None:
    before = api.state()
    response = api.client.post(f"/v1/memory_stores/{api.store_id}/memory_tool", json=command)
    assert response.status_code == 200 and response.json()["is_error"] is True, response.text
    assert "a note's path appears to hold" in response.json()["content"] and TOKEN not in response.text
    assert api.state() == before


def test_a_structure_is_read_whole_and_string_by_string() -> None:
    chain = FilterChain()
    chain.check_caller_text("x", {"note": "the password is in the vault"})  # ordinary text passes
    chain.check_caller_text("x", None)
    chain.check_caller_text("x", {"n": 1, "ok": [True, None, 2.5]})
    for value in ({"db": {"password": "Tr0ub4dor&3x!"}}, ["a", {"b": TOKEN}], (TOKEN,), {TOKEN: None}):
        with pytest.raises(Exception, match="x appears to hold"):
            chain.check_caller_text("x", value)
