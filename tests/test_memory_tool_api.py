"""``POST /v1/memory_stores/{id}/memory_tool`` on a live server: one tool call in, one result out,
with the caller's access and attribution."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gitmem.home import Gitmem
from tests.server import serve


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str, str]]:
    home = tmp_path_factory.mktemp("home")
    gm = Gitmem.open(home)
    ws = gm.catalog.create_workspace("w")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    _, reader = gm.catalog.create_api_key(ws.id, "reader", role="read-only")
    store_id = gm.create_store(ws.id, "notes").id
    with serve(home) as base_url:
        yield base_url, admin, reader, store_id


def call(live: tuple[str, str, str, str], command: dict, secret: str | None = None) -> httpx.Response:
    base_url, admin, _reader, store_id = live
    return httpx.post(f"{base_url}/v1/memory_stores/{store_id}/memory_tool", json=command,
                      headers={"x-api-key": secret or admin}, timeout=30)


def test_commands_run_against_the_store_and_are_attributed(live: tuple[str, str, str, str]) -> None:
    created = call(live, {"command": "create", "path": "/memories/todo.md", "file_text": "- ship\n"})
    assert created.status_code == 200
    assert created.json() == {"content": "File created successfully at: /memories/todo.md", "is_error": False}
    viewed = call(live, {"command": "view", "path": "/memories/todo.md"}).json()
    assert viewed["is_error"] is False and "- ship" in viewed["content"]
    base_url, admin, _, store_id = live
    versions = httpx.get(f"{base_url}/v1/memory_stores/{store_id}/memory_versions",
                         headers={"x-api-key": admin}).json()["data"]
    assert versions[0]["path"] == "/todo.md" and versions[0]["created_by"]["type"] == "api_actor"


def test_refusals_are_tool_errors_not_http_errors(live: tuple[str, str, str, str]) -> None:
    escaped = call(live, {"command": "view", "path": "/memories/../../etc/passwd"})
    assert escaped.status_code == 200 and escaped.json()["is_error"] is True
    _, _, reader, _ = live
    assert call(live, {"command": "view", "path": "/memories"}, secret=reader).json()["is_error"] is False
    write = call(live, {"command": "create", "path": "/memories/x.md", "file_text": "x"}, secret=reader).json()
    assert write["is_error"] is True
    assert call(live, {"command": "view", "path": "/memories/x.md"}).json()["is_error"] is True  # not written


def test_no_key_is_401_in_the_envelope(live: tuple[str, str, str, str]) -> None:
    base_url, _, _, store_id = live
    answer = httpx.post(f"{base_url}/v1/memory_stores/{store_id}/memory_tool", json={"command": "view"})
    assert answer.status_code == 401 and answer.json()["error"]["type"] == "authentication_error"
