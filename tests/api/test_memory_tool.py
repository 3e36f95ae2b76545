"""``POST /v1/memory_stores/{id}/memory_tool`` against the app (served in this process): one tool call
in, one result out, with the caller's access and attribution."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gitmem.engine.gitmem import Gitmem
from tests.apps import InProcess, in_process


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, str, str, str]]:
    home = tmp_path_factory.mktemp("home")
    gm = Gitmem.open(home)
    ws = gm.catalog.create_workspace("w")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    _, reader = gm.catalog.create_api_key(ws.id, "reader", role="read-only")
    store_id = gm.create_store(ws.id, "notes").id
    with in_process(home) as server:
        yield server, admin, reader, store_id


def call(live: tuple[InProcess, str, str, str], command: dict[str, Any], secret: str | None = None) -> httpx.Response:
    server, admin, _reader, store_id = live
    with server.http(secret or admin) as http:
        return http.post(f"/v1/memory_stores/{store_id}/memory_tool", json=command)


def test_commands_run_against_the_store_and_are_attributed(live: tuple[InProcess, str, str, str]) -> None:
    created = call(live, {"command": "create", "path": "/memories/todo.md", "file_text": "- ship\n"})
    assert created.status_code == 200
    assert created.json() == {"content": "File created successfully at: /memories/todo.md", "is_error": False}
    viewed = call(live, {"command": "view", "path": "/memories/todo.md"}).json()
    assert viewed["is_error"] is False and "- ship" in viewed["content"]
    server, admin, _, store_id = live
    with server.http(admin) as http:
        versions = http.get(f"/v1/memory_stores/{store_id}/memory_versions").json()["data"]
    assert versions[0]["path"] == "/todo.md" and versions[0]["created_by"]["type"] == "api_actor"


def test_refusals_are_tool_errors_not_http_errors(live: tuple[InProcess, str, str, str]) -> None:
    escaped = call(live, {"command": "view", "path": "/memories/../../etc/passwd"})
    assert escaped.status_code == 200 and escaped.json()["is_error"] is True
    _, _, reader, _ = live
    assert call(live, {"command": "view", "path": "/memories"}, secret=reader).json()["is_error"] is False
    write = call(live, {"command": "create", "path": "/memories/x.md", "file_text": "x"}, secret=reader).json()
    assert write["is_error"] is True
    assert call(live, {"command": "view", "path": "/memories/x.md"}).json()["is_error"] is True  # not written


def test_no_key_is_401_in_the_envelope(live: tuple[InProcess, str, str, str]) -> None:
    server, _, _, store_id = live
    with server.http() as anonymous:
        answer = anonymous.post(f"/v1/memory_stores/{store_id}/memory_tool", json={"command": "view"})
    assert answer.status_code == 401 and answer.json()["error"]["type"] == "authentication_error"
