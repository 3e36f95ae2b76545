"""Hostile input over REST that used to be a 500: forged page tokens, lone surrogates, ids of the
wrong kind. Each must be a 400 (or the 404 of a missing store) in the error envelope, changing nothing."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.settings import Settings
from gitmem.engine.gitmem import Gitmem
from tests.apps import Response


@dataclass
class Api:
    client: TestClient
    gm: Gitmem
    store_id: str
    worker_id: str
    task_id: str
    user_token: str
    other_user_token: str

    def as_user(self, token: str) -> dict[str, str]:
        return {"x-api-key": token}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    home = tmp_path_factory.mktemp("hardening")
    gm = Gitmem.open(home)
    ws = gm.catalog.create_workspace("alpha")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    _, user_token = gm.catalog.create_user(ws.id, "ann")
    _, other_user_token = gm.catalog.create_user(ws.id, "bob")
    settings = Settings.defaults(dream_runner=False, prune_interval_seconds=0)
    with TestClient(create_app(gm, settings), headers={"x-api-key": admin}) as client:
        store_id = client.post("/v1/memory_stores", json={"name": "s"}).json()["id"]
        for i in range(3):
            assert (
                client.post(
                    f"/v1/memory_stores/{store_id}/memories", json={"path": f"/n{i}.md", "content": f"note {i}"}
                ).status_code
                == 200
            )
            client.post("/v1/memory_stores", json={"name": f"more-{i}"})
            client.post("/v1/workers", json={"name": f"w{i}"})
        worker_id = client.post("/v1/workers", json={"name": "planner"}).json()["id"]
        task = client.post("/v1/tasks", json={"worker_id": worker_id})
        assert task.status_code == 200, task.text
        task_id = task.json()["id"]
        for i in range(3):
            client.post(f"/v1/tasks/{task_id}/events", json={"type": "note", "payload": {"i": i}})
            client.post("/v1/tasks", json={"worker_id": worker_id})
        yield Api(client, gm, store_id, worker_id, task_id, user_token, other_user_token)


def _b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


FORGED = [
    _b64(["versions", "abc"]),
    _b64(["notes", 5]),
    base64.urlsafe_b64encode(b'[1e400,"x"]').decode(),
    base64.urlsafe_b64encode(b'["versions",1e400]').decode(),
    _b64(10**30),
    _b64(["versions", 10**30]),
    _b64([0, "memstore_x"]),
    _b64(["versions", 1]),  # well formed, but not one the server handed out
    "a%ED%B3%80",  # a lone surrogate, as UTF-8 would encode one
    "a%80",
    "not base64 at all!",
]


def _listings(api: Api) -> list[str]:
    s = api.store_id
    return [
        f"/v1/memory_stores/{s}/memory_versions",
        f"/v1/memory_stores/{s}/memories",
        "/v1/memory_stores",
        "/v1/tasks",
        "/v1/workers",
        "/v1/dreams",
        f"/v1/tasks/{api.task_id}/events",
    ]


@pytest.mark.parametrize("token", FORGED)
def test_a_forged_page_token_is_400(api: Api, token: str) -> None:
    for url in _listings(api):
        response = api.client.get(f"{url}?limit=1&page={token}")
        assert response.status_code == 400, (url, token, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_tokens_the_server_handed_out_still_page_and_are_bound_to_their_listing(api: Api) -> None:
    tokens = {}
    for url in _listings(api):
        if url.endswith("/dreams"):
            continue  # no dreams in this home
        first = api.client.get(url, params={"limit": 1}).json()
        assert first["next_page"], url
        second = api.client.get(url, params={"limit": 1, "page": first["next_page"]})
        assert second.status_code == 200, (url, second.text)
        assert second.json()["data"] != first["data"]
        tokens[url] = first["next_page"]
    urls = list(tokens)
    for url, other in zip(urls, urls[1:] + urls[:1], strict=True):
        response = api.client.get(url, params={"page": tokens[other], "limit": 1})
        assert response.status_code == 400, (url, other)


SURROGATE = '"a\\udc80"'


def _post_raw(api: Api, url: str, body: str, headers: dict[str, str] | None = None) -> Response:
    return api.client.post(url, content=body.encode(), headers={"content-type": "application/json", **(headers or {})})


def test_lone_surrogates_are_400_everywhere(api: Api) -> None:
    s = api.store_id
    before_stores = len(api.gm.list_stores(api.gm.catalog.list_workspaces()[0].id, limit=100).items)
    cases = [
        ("/v1/memory_stores", f'{{"name": {SURROGATE}}}', None),
        ("/v1/memory_stores", f'{{"name": "ok", "description": {SURROGATE}}}', None),
        ("/v1/memory_stores", f'{{"name": "ok", "metadata": {{"k": {SURROGATE}}}}}', None),
        (f"/v1/memory_stores/{s}", f'{{"name": {SURROGATE}}}', None),
        ("/v1/workers", f'{{"name": {SURROGATE}}}', None),
        (f"/v1/tasks/{api.task_id}/events", f'{{"type": "note", "payload": {{"text": {SURROGATE}}}}}', None),
        (f"/v1/tasks/{api.task_id}/events", f'{{"type": "note", "payload": {{{SURROGATE}: 1}}}}', None),
        (f"/v1/memory_stores/{s}/memories", '{"path": "/a\\udc80.md", "content": "x"}', None),
        (f"/v1/memory_stores/{s}/memory_tool", '{"command": "view", "path": "/memories/a\\udc80"}', None),
        (
            f"/v1/memory_stores/{s}/memory_tool",
            f'{{"command": "str_replace", "path": "/memories/n0.md", "old_str": {SURROGATE}, "new_str": "b"}}',
            None,
        ),
        (
            f"/v1/memory_stores/{s}/memory_tool",
            '{"command": "create", "path": "/memories/x\\udc80.md", "file_text": "b"}',
            None,
        ),
        ("/v1/profiles", f'{{"name": {SURROGATE}}}', api.as_user(api.user_token)),
    ]
    for url, body, headers in cases:
        response = _post_raw(api, url, body, headers)
        if url.endswith("/memory_tool") and response.status_code == 200:
            assert response.json()["is_error"] is True, (url, body, response.text)
            continue
        assert response.status_code == 400, (url, body, response.status_code, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"
    after_stores = len(api.gm.list_stores(api.gm.catalog.list_workspaces()[0].id, limit=100).items)
    assert after_stores == before_stores


def test_another_users_bank_is_a_missing_store_everywhere(api: Api) -> None:
    profile = api.client.post("/v1/profiles", json={"name": "bob's"}, headers=api.as_user(api.other_user_token))
    assert profile.status_code == 200, profile.text
    bank = profile.json()["memory_bank_id"]
    missing = "memstore_01M8KSAKX8VM617XSKBA200EBV"
    attempts = [
        ("/v1/workers", {"name": "spy", "memory_store_ids": [{}]}),
        ("/v1/tasks", {"worker_id": api.worker_id, "resources": [{"type": "memory_store", "memory_store_id": {}}]}),
        ("/v1/dreams", {"inputs": [{"type": "memory_store", "memory_store_id": {}}], "model": "m"}),
    ]
    for url, template in attempts:
        answers = []
        for store_id in (bank, missing):
            body = json.loads(json.dumps(template).replace("{}", json.dumps(store_id)))
            response = api.client.post(url, json=body)
            answers.append((response.status_code, response.json()["error"]["message"].replace(store_id, "ID")))
        assert answers[0] == answers[1], (url, answers)
        assert answers[0][0] == 404, (url, answers)
