"""The MCP server at /mcp, driven by the ``mcp`` package's own client over real HTTP (a live uvicorn),
and the ``gitmem mcp`` stdio bridge driven by ``mcp.client.stdio``.

One real server per test process (conftest.py's ``real_server``: starting uvicorn is the slow part); each test
uses its own stores.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from gitmem.agents.tasks.tasks import tasks_for
from gitmem.api.app import create_app
from gitmem.engine.gitmem import Gitmem
from tests import REPO_ROOT
from tests.apps import make_test_home
from tests.server import RealServer

# MCP over real HTTP (a live uvicorn) and the stdio bridge in a subprocess.
pytestmark = pytest.mark.slow

TOOLS = {
    "conflicts",
    "resolve_conflict",
    "view",
    "create",
    "str_replace",
    "insert",
    "delete",
    "rename",
    "search",
    "history",
    "diff",
    "restore",
    "list_stores",
}

# A GitHub token's shape with seeded random letters: generated, never a real one.
FAKE_TOKEN = "ghp_" + "".join(random.Random(28).choices(string.ascii_letters + string.digits, k=36))


@dataclass(frozen=True)
class Home:
    url: str
    home: Path
    workspace_id: str
    admin: str
    admin_id: str
    reader: str
    user: str
    user_id: str
    store_id: str
    other_store_id: str  # another workspace's
    task_token: str
    task_id: str
    task_own_store_id: str
    task_attached_store_id: str


@pytest.fixture(scope="module")
def live(real_server: RealServer) -> Home:
    made = make_test_home(real_server.home, workspace="mcp", other_workspace="elsewhere", fsync="never")
    home, ws_id = made.path, made.workspace_id
    gm = Gitmem.open(home, fsync="never")
    store = gm.create_store(ws_id, "notes")
    other = gm.create_store(made.other_workspace_id, "theirs")
    attached = gm.create_store(ws_id, "team")
    worker = tasks_for(gm).create_worker(ws_id, "helper", attached_store_ids=[attached.id])
    task, task_token = tasks_for(gm).create_task(ws_id, worker.id)
    return Home(
        real_server.base_url,
        home,
        ws_id,
        made.admin,
        made.admin_key_id,
        made.reader,
        made.user,
        made.user_id,
        store.id,
        other.id,
        task_token,
        task.id,
        worker.own_store_id,
        attached.id,
    )


@asynccontextmanager
async def session(url: str, token: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


async def call(client: ClientSession, tool: str, **arguments: Any) -> tuple[str, bool]:
    result = await client.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return text, bool(result.is_error)


def rest_memory_tool(live: Home, token: str, store_id: str, command: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        f"{live.url}/v1/memory_stores/{store_id}/memory_tool",
        json=command,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_lists_the_tools(live: Home) -> None:
    async def run() -> set[str]:
        async with session(live.url, live.admin) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert anyio.run(run) == TOOLS


def test_memory_commands_answer_as_the_rest_route(live: Home) -> None:
    """The same sequence through MCP and through POST /memory_tool, on two stores: the same strings."""
    with httpx.Client() as http:
        rest_store = http.post(
            f"{live.url}/v1/memory_stores",
            json={"name": "rest twin"},
            headers={"Authorization": f"Bearer {live.admin}"},
        ).json()["id"]
    steps: list[dict[str, Any]] = [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"},
        {"command": "create", "path": "/memories/a.md", "file_text": "again\n"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "three"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "missing", "new_str": "x"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "four\n"},
        {"command": "view", "path": "/memories/a.md"},
        {"command": "view", "path": "/memories/a.md", "view_range": [1, 1]},
        {"command": "view", "path": "/memories/../etc/passwd"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": f"/memories/{FAKE_TOKEN}.md"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/d/b.md"},
        {"command": "view", "path": "/memories"},
        {"command": "delete", "path": "/memories/d"},
        {"command": "delete", "path": "/memories/d"},
    ]

    async def run() -> list[tuple[str, bool]]:
        answers = []
        async with session(live.url, live.admin) as client:
            for step in steps:
                args = {k: v for k, v in step.items() if k != "command"}
                answers.append(await call(client, step["command"], memory_store_id=live.store_id, **args))
        return answers

    mcp_answers = anyio.run(run)
    rest_answers = [rest_memory_tool(live, live.admin, rest_store, step) for step in steps]
    for step, (text, is_error), rest in zip(steps, mcp_answers, rest_answers, strict=True):
        assert (text, is_error) == (rest["content"], rest["is_error"]), step
    assert any(is_error for _, is_error in mcp_answers)  # the refusals were compared too
    assert "three" in mcp_answers[6][0]
    # A path is a caller's text like a body: a token in it is refused, and not repeated (issue 28, item 6).
    assert mcp_answers[9][1] is True and "a note's path appears to hold" in mcp_answers[9][0]
    assert FAKE_TOKEN not in mcp_answers[9][0]


def test_history_shows_versions_attributed_to_the_caller(live: Home) -> None:
    async def run() -> tuple[str, str, str, bool]:
        async with session(live.url, live.user) as client:
            await call(client, "create", memory_store_id=live.store_id, path="/memories/h.md", file_text="v1\n")
            await call(
                client, "str_replace", memory_store_id=live.store_id, path="/memories/h.md", old_str="v1", new_str="v2"
            )
            by_path, _ = await call(client, "history", memory_store_id=live.store_id, path="/memories/h.md")
            memory_id = json.loads(by_path)["data"][0]["memory_id"]
            by_id, _ = await call(client, "history", memory_store_id=live.store_id, memory_id=memory_id)
            missing = await call(client, "history", memory_store_id=live.store_id, path="/memories/nope.md")
            return by_path, by_id, *missing

    by_path, by_id, missing, missing_error = anyio.run(run)
    versions = json.loads(by_path)["data"]
    assert [v["operation"] for v in versions] == ["modified", "created"]
    assert all(v["created_by"] == {"type": "user_actor", "user_id": live.user_id} for v in versions)
    assert json.loads(by_id) == json.loads(by_path)
    assert missing_error and "not_found_error" in missing
    # The REST API sees the same versions (they are ordinary versions).
    rest = httpx.get(
        f"{live.url}/v1/memory_stores/{live.store_id}/memory_versions",
        params={"memory_id": versions[0]["memory_id"]},
        headers={"Authorization": f"Bearer {live.admin}"},
    ).json()["data"]
    assert [v["id"] for v in rest] == [v["id"] for v in versions]


def test_another_workspaces_store_is_not_found(live: Home) -> None:
    async def run() -> list[tuple[str, bool]]:
        async with session(live.url, live.admin) as client:
            return [
                await call(client, "view", memory_store_id=live.other_store_id, path="/memories"),
                await call(client, "history", memory_store_id=live.other_store_id, memory_id="mem_x"),
                await call(client, "create", memory_store_id=live.other_store_id, path="/memories/x", file_text="x"),
            ]

    for text, is_error in anyio.run(run):
        assert is_error and text == f"not_found_error: memory store {live.other_store_id} not found"


def test_read_only_key_cannot_write(live: Home) -> None:
    async def run() -> tuple[tuple[str, bool], tuple[str, bool]]:
        async with session(live.url, live.reader) as client:
            return (
                await call(client, "create", memory_store_id=live.store_id, path="/memories/ro.md", file_text="no"),
                await call(client, "view", memory_store_id=live.store_id, path="/memories"),
            )

    (denied, denied_error), (_, view_error) = anyio.run(run)
    assert denied_error and "read-only" in denied
    assert not view_error
    rest = rest_memory_tool(live, live.admin, live.store_id, {"command": "view", "path": "/memories/ro.md"})
    assert rest["is_error"]  # nothing was written


def test_a_task_sees_only_its_own_stores(live: Home) -> None:
    async def run() -> dict[str, Any]:
        async with session(live.url, live.task_token) as client:
            created = await call(client, "create", path="/memories/t.md", file_text="from the task\n")
            listed, _ = await call(client, "list_stores")
            outside = await call(client, "view", memory_store_id=live.store_id, path="/memories")
            attached = await call(client, "view", memory_store_id=live.task_attached_store_id, path="/memories")
            history, _ = await call(client, "history", path="/memories/t.md")
            return {"created": created, "listed": listed, "outside": outside, "attached": attached, "history": history}

    got = anyio.run(run)
    assert not got["created"][1]
    assert {s["id"] for s in json.loads(got["listed"])["data"]} == {live.task_own_store_id, live.task_attached_store_id}
    assert got["outside"][1] and "not_found_error" in got["outside"][0]
    assert not got["attached"][1]
    [version] = json.loads(got["history"])["data"]
    assert version["created_by"] == {"type": "session_actor", "session_id": live.task_id}  # the SDK's name
    assert version["memory_store_id"] == live.task_own_store_id  # the default store is the worker's own


def test_admin_lists_its_workspace_only(live: Home) -> None:
    async def run() -> str:
        async with session(live.url, live.admin) as client:
            return (await call(client, "list_stores", limit=100))[0]

    ids = {s["id"] for s in json.loads(anyio.run(run))["data"]}
    assert live.store_id in ids and live.other_store_id not in ids


def test_a_store_must_be_named_by_a_key(live: Home) -> None:
    async def run() -> tuple[str, bool]:
        async with session(live.url, live.admin) as client:
            return await call(client, "view", path="/memories")

    text, is_error = anyio.run(run)
    assert is_error and "memory_store_id is required" in text


def test_search_diff_and_restore_answer_as_rest_does(live: Home) -> None:
    """search, diff and restore through MCP give the REST routes' JSON, and restore is the caller's version."""
    auth = {"Authorization": f"Bearer {live.admin}"}
    base = f"{live.url}/v1/memory_stores/{live.store_id}"
    with httpx.Client(headers=auth, timeout=30) as http:
        note = http.post(f"{base}/memories", json={"path": "/mcp/kiwi.md", "content": "kiwi one\n"}).json()
        http.post(f"{base}/memories/{note['id']}", json={"content": "kiwi two\n"})
        versions = http.get(f"{base}/memory_versions", params={"memory_id": note["id"]}).json()["data"]
        newest, oldest = versions[0]["id"], versions[-1]["id"]
        rest_search = http.get(f"{base}/search", params={"q": "kiwi"}).json()
        rest_refusal = http.get(f"{base}/search", params={"q": "kiwi OR k*"})
        rest_diff = http.get(f"{base}/memory_versions/{newest}/diff").json()

    async def run() -> tuple[tuple[str, bool], ...]:
        async with session(live.url, live.admin) as client:
            return (
                await call(client, "search", memory_store_id=live.store_id, query="kiwi"),
                await call(client, "search", memory_store_id=live.store_id, query="kiwi OR k*"),
                await call(client, "diff", memory_store_id=live.store_id, version_id=newest),
                await call(client, "restore", memory_store_id=live.store_id, memory_id=note["id"], version_id=oldest),
            )

    (search_text, search_error), refusal, (diff_text, diff_error), (_restore_text, restore_error) = anyio.run(run)
    assert not search_error and json.loads(search_text) == rest_search
    # A search past the bounds of one query: the tool's error, in the REST 400's words (one rule).
    assert rest_refusal.status_code == 400 and rest_refusal.json()["error"]["type"] == "invalid_request_error"
    assert refusal == (f"invalid_request_error: {rest_refusal.json()['error']['message']}", True)
    assert rest_refusal.json()["error"]["message"].startswith("the prefix k* is too short")
    assert not diff_error and json.loads(diff_text) == rest_diff
    assert not restore_error
    with httpx.Client(headers=auth, timeout=30) as http:
        restored = http.get(f"{base}/memories/{note['id']}").json()
        latest = http.get(f"{base}/memory_versions", params={"memory_id": note["id"]}).json()["data"][0]
    assert restored["content"] == "kiwi one\n"
    assert latest["created_by"] == {"type": "api_actor", "api_key_id": live.admin_id}


def test_conflicts_are_seen_and_resolved_over_mcp_as_over_rest(live: Home) -> None:
    """The conflicts tool shows a kept conflict as REST does (a note's list, one against its winner),
    resolve_conflict takes the merge; another workspace's store has none to show."""
    auth = {"Authorization": f"Bearer {live.admin}"}
    base = f"{live.url}/v1/memory_stores/{live.store_id}"
    with httpx.Client(headers=auth, timeout=30) as http:
        note = http.post(f"{base}/memories", json={"path": "/mcp/race.md", "content": "a\nb\nc\nd\n"}).json()
        http.post(f"{base}/memories/{note['id']}", json={"content": "A\nb\nc\nd\n"})  # the winner
        stale = {"type": "content_sha256", "content_sha256": note["content_sha256"]}
        lost = http.post(f"{base}/memories/{note['id']}", json={"content": "a\nb\nc\nD\n", "precondition": stale})
        assert lost.status_code == 409
        cid = lost.json()["error"]["conflict_id"]
        rest_list = http.get(f"{base}/conflicts", params={"memory_id": note["id"]}).json()
        rest_compare = http.get(f"{base}/conflicts/{cid}/compare").json()

    async def run() -> tuple[tuple[str, bool], ...]:
        async with session(live.url, live.admin) as client:
            return (
                await call(client, "conflicts", memory_store_id=live.store_id, memory_id=note["id"]),
                await call(client, "conflicts", memory_store_id=live.store_id, conflict_id=cid),
                await call(client, "conflicts", memory_store_id=live.other_store_id),
                await call(client, "resolve_conflict", memory_store_id=live.store_id, conflict_id=cid, take="merged"),
            )

    (listed, e1), (compared, e2), (theirs, e3), (resolved, e4) = anyio.run(run)
    assert not (e1 or e2 or e4) and json.loads(listed) == rest_list and json.loads(compared) == rest_compare
    assert e3 and "not_found_error" in theirs
    assert json.loads(resolved)["conflict"]["resolution"] == "merged"
    with httpx.Client(headers=auth, timeout=30) as http:
        assert http.get(f"{base}/memories/{note['id']}").json()["content"] == "A\nb\nc\nD\n"


@pytest.mark.parametrize("token", [None, "gm_key_wrong"])
def test_a_request_without_a_valid_credential_is_401(live: Home, token: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    response = httpx.post(f"{live.url}/mcp", json=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_the_app_serves_mcp_in_process(tmp_path: Path) -> None:
    """The lifespan starts the session manager each time the app starts (twice here)."""
    gm = Gitmem.open(tmp_path / "home", fsync="never")
    ws = gm.catalog.create_workspace("w")
    _, key = gm.catalog.create_api_key(ws.id, "k")
    app = create_app(gm)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    for _ in range(2):
        with TestClient(app) as client:
            response = client.post("/mcp", json=body, headers=headers)
            assert response.status_code == 200, response.text
            assert response.json()["result"]["serverInfo"]["name"] == "gitmem"


def test_stdio_bridge_proxies_to_the_server(live: Home) -> None:
    """``gitmem mcp`` speaks stdio to the client and streamable HTTP to the server; it opens no store."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gitmem", "mcp", "--url", live.url, "--key", live.user],
        env={"PYTHONPATH": str(REPO_ROOT), "GITMEM_HOME": "/nonexistent/never-opened"},
        cwd=str(REPO_ROOT),
    )

    async def run() -> tuple[set[str], tuple[str, bool], str]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            names = {t.name for t in (await client.list_tools()).tools}
            created = await call(
                client, "create", memory_store_id=live.store_id, path="/memories/bridge.md", file_text="via stdio\n"
            )
            history, _ = await call(client, "history", memory_store_id=live.store_id, path="/memories/bridge.md")
            return names, created, history

    names, created, history = anyio.run(run)
    assert names == TOOLS
    assert created == ("File created successfully at: /memories/bridge.md", False)
    assert json.loads(history)["data"][0]["created_by"] == {"type": "user_actor", "user_id": live.user_id}
    assert not Path("/nonexistent/never-opened").exists()


def test_stdio_bridge_refuses_a_bad_key_at_start(live: Home) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gitmem", "mcp", "--url", live.url, "--key", "gm_key_wrong"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 1
    assert "refused the key (HTTP 401)" in proc.stderr and proc.stdout == ""


def test_the_app_imports_the_mcp_package_only_when_mcp_is_first_asked_for() -> None:
    """Importing it cost every server process 0.8 s of CPU, at start, for a protocol most never serve."""
    probe = (
        "import sys\n"
        "import gitmem.api.app\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "[]"
