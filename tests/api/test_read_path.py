"""The lean request path: a GET of a note is answered on the event loop only when nothing there can
wait, and is still exact; the key is read from the headers while /openapi.json still declares both
ways to send it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gitmem.api.app import create_app
from gitmem.api.settings import Settings
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    gm = Gitmem.open(tmp_path / "home")
    workspace = gm.catalog.create_workspace("w")
    _, secret = gm.catalog.create_api_key(workspace.id, "k")
    with TestClient(create_app(gm, Settings.defaults(prune_interval_seconds=0, dream_runner=False))) as test_client:
        yield test_client, secret


def _one_note(client: tuple[TestClient, str]) -> tuple[TestClient, dict[str, str], str]:
    """A store holding one note "one", written through the API: the client, its headers, the note's URL."""
    test_client, secret = client
    headers = {"x-api-key": secret}
    store = test_client.post("/v1/memory_stores", json={"name": "s"}, headers=headers).json()["id"]
    notes = f"/v1/memory_stores/{store}/memories"
    note = test_client.post(notes, json={"path": "/a.md", "content": "one"}, headers=headers).json()["id"]
    return test_client, headers, f"{notes}/{note}"


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Each MemoryStore.get: the thread it ran on and whether it caught the index up."""
    seen: list[tuple[str, bool]] = []
    original = MemoryStore.get

    def spy(self: MemoryStore, memory_id: str, with_content: bool = True, *, catch_up: bool = True) -> Any:
        seen.append((threading.current_thread().name, catch_up))
        return original(self, memory_id, with_content, catch_up=catch_up)

    monkeypatch.setattr(MemoryStore, "get", spy)
    return seen


def test_a_get_reads_on_the_event_loop_and_sees_every_answered_write(
    client: tuple[TestClient, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    test_client, headers, note_url = _one_note(client)
    seen = _reads(monkeypatch)
    contents = []
    for text in ("two", "three"):
        assert test_client.post(note_url, json={"content": text}, headers=headers).status_code == 200
        contents.append(test_client.get(note_url, headers=headers).json()["content"])
    assert contents == ["two", "three"]
    # Both reads ran on one thread (the loop's), without catching up: the writer had indexed its commit.
    assert len(seen) == 2 and len({name for name, _ in seen}) == 1 and not any(catch_up for _, catch_up in seen)


def test_a_get_reads_in_a_thread_where_the_index_is_behind(
    client: tuple[TestClient, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    test_client, headers, note_url = _one_note(client)
    seen = _reads(monkeypatch)
    monkeypatch.setattr(MemoryStore, "caught_up", lambda self: False)  # as after a push the index has not seen  # noqa: ARG005  stands in for the method
    answer = test_client.get(note_url, headers=headers)
    assert answer.status_code == 200 and answer.json()["content"] == "one"
    assert [catch_up for _, catch_up in seen] == [True]


def test_a_get_of_a_missing_note_on_the_event_loop_is_not_found(client: tuple[TestClient, str]) -> None:
    test_client, secret = client
    headers = {"x-api-key": secret}
    store = test_client.post("/v1/memory_stores", json={"name": "s"}, headers=headers).json()["id"]
    test_client.post(f"/v1/memory_stores/{store}/memories", json={"path": "/a.md", "content": "x"}, headers=headers)
    answer = test_client.get(f"/v1/memory_stores/{store}/memories/mem_01JD000000000000000000000", headers=headers)
    assert answer.status_code == 404 and answer.json()["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(
    ("header", "value", "status"),
    [
        ("authorization", "Bearer {secret}", 200),
        ("authorization", "bearer   {secret}  ", 200),
        ("authorization", "Basic {secret}", 401),
        ("authorization", "Bearer ", 401),
        ("x-api-key", "", 401),
        ("x-api-key", "{secret}x", 401),
    ],
)
def test_the_key_is_read_from_either_header(
    client: tuple[TestClient, str], header: str, value: str, status: int
) -> None:
    test_client, secret = client
    answer = test_client.get("/v1/memory_stores", headers={header: value.format(secret=secret)})
    assert answer.status_code == status


def test_openapi_declares_both_ways_to_authenticate_on_every_operation_but_the_probes(
    client: tuple[TestClient, str],
) -> None:
    schema = client[0].get("/openapi.json").json()
    assert schema["components"]["securitySchemes"] == {
        "ApiKeyAuth": {"type": "apiKey", "in": "header", "name": "x-api-key"},
        "BearerAuth": {"type": "http", "scheme": "bearer"},
    }
    security = {
        (path, method): operation.get("security")
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    }
    assert security.pop(("/healthz", "get")) is None
    assert security.pop(("/readyz", "get")) is None  # probes need no key: a load balancer has none
    assert security.pop(("/v1/signing_key", "get")) is None  # a public key: a plain clone verifies with it
    assert security.pop(("/v1/signing_key/allowed_signers", "get")) is None
    assert len(security) > 40 and all(s == [{"ApiKeyAuth": []}, {"BearerAuth": []}] for s in security.values())
