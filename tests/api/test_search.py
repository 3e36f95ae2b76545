"""Search, diffs and restore over HTTP, in process, through the official SDK's generic methods (the SDK
has no method for them): the wire shapes and the access rules of every other store route."""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest
from fastapi.testclient import TestClient

from gitmem.agents.tasks.tasks import tasks_for
from gitmem.api.app import create_app
from gitmem.config.home import open_home
from gitmem.config.settings import load_settings
from gitmem.config.values import from_settings
from gitmem.engine.gitmem import Gitmem
from tests.apps import ui_sign_in
from tests.unit.engine.index.test_search import EXPENSIVE, budget_notes


@dataclass(frozen=True)
class World:
    gm: Gitmem
    app_client: TestClient
    workspace_id: str
    admin: str
    reader: str
    other: str

    def sdk(self, secret: str | None = None) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            api_key=secret or self.admin, base_url="http://testserver", max_retries=0, http_client=self.app_client
        )


@pytest.fixture
def world(fast_gm: Gitmem) -> Iterator[World]:
    gm = fast_gm
    ws = gm.catalog.create_workspace("alpha")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    _, reader = gm.catalog.create_api_key(ws.id, "reader", role="read-only")
    other = gm.catalog.create_workspace("beta")
    _, other_secret = gm.catalog.create_api_key(other.id, "admin")
    with TestClient(create_app(gm)) as app_client:
        yield World(gm, app_client, ws.id, admin, reader, other_secret)


def get(client: anthropic.Anthropic, path: str, **params: Any) -> Any:
    return client.get(path, cast_to=object, options={"params": params})


def post(client: anthropic.Anthropic, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, cast_to=object, body=body)


@pytest.fixture
def client(world: World) -> anthropic.Anthropic:
    return world.sdk()


@pytest.fixture
def store_id(client: anthropic.Anthropic) -> str:
    return client.beta.memory_stores.create(name="team").id


def test_search_answers_basic_memories_best_first_with_marked_snippets(
    client: anthropic.Anthropic, store_id: str
) -> None:
    memories = client.beta.memory_stores.memories
    sam = memories.create(store_id, path="/people/sam.md", content="Sam prefers terraform plans on staging.")
    memories.create(store_id, path="/projects/acme.md", content="Acme: single tenant. Sam owns it.")
    memories.create(store_id, path="/misc/lunch.md", content="Tacos on Tuesday.")
    for i in range(5):
        memories.create(store_id, path=f"/filler/{i}.md", content=f"filler note number {i}")

    found = get(client, f"/v1/memory_stores/{store_id}/search", q="sam")
    paths = [hit["memory"]["path"] for hit in found["data"]]
    assert paths == ["/people/sam.md", "/projects/acme.md"]  # the path counts above the body
    first = found["data"][0]
    assert first["memory"] == get(client, f"/v1/memory_stores/{store_id}/memories/{sam.id}", view="basic")
    assert first["memory"]["content"] is None
    assert first["score"] > found["data"][1]["score"]
    assert first["snippets"] == ["**Sam** prefers terraform plans on staging."]
    assert found["next_page"] is None

    assert get(client, f"/v1/memory_stores/{store_id}/search", q="terraform sam")["data"][0]["memory"]["id"] == sam.id
    assert get(client, f"/v1/memory_stores/{store_id}/search", q="terraform tacos")["data"] == []
    either = get(client, f"/v1/memory_stores/{store_id}/search", q="terraform OR tacos")
    assert {h["memory"]["path"] for h in either["data"]} == {"/people/sam.md", "/misc/lunch.md"}
    assert [h["memory"]["path"] for h in get(client, f"/v1/memory_stores/{store_id}/search", q="terra*")["data"]] == [
        "/people/sam.md"
    ]
    assert get(client, f"/v1/memory_stores/{store_id}/search", q='"plans staging"')["data"] == []
    assert len(get(client, f"/v1/memory_stores/{store_id}/search", q='"terraform plans"')["data"]) == 1
    below = get(client, f"/v1/memory_stores/{store_id}/search", q="sam", path_prefix="/projects/")
    assert [h["memory"]["path"] for h in below["data"]] == ["/projects/acme.md"]


def test_search_pages(client: anthropic.Anthropic, store_id: str) -> None:
    for i in range(5):
        client.beta.memory_stores.memories.create(store_id, path=f"/n/{i}.md", content=f"common word {i}")
    seen, page = [], None
    while True:
        params = {"q": "common", "limit": 2} | ({"page": page} if page else {})
        answer = get(client, f"/v1/memory_stores/{store_id}/search", **params)
        assert len(answer["data"]) <= 2
        seen += [h["memory"]["path"] for h in answer["data"]]
        if not (page := answer["next_page"]):
            break
    assert sorted(seen) == [f"/n/{i}.md" for i in range(5)]
    with pytest.raises(anthropic.BadRequestError):  # a page token of another query
        get(
            client,
            f"/v1/memory_stores/{store_id}/search",
            q="word",
            limit=2,
            page=get(client, f"/v1/memory_stores/{store_id}/search", q="common", limit=2)["next_page"],
        )
    for bad in ({"limit": 0}, {"limit": 101}, {"path_prefix": "no-slash"}):
        with pytest.raises(anthropic.BadRequestError):
            get(client, f"/v1/memory_stores/{store_id}/search", q="common", **bad)


@pytest.mark.parametrize(
    ("query", "finds"),
    [
        ("-", False),
        (":", False),
        ("/", False),
        ('"', False),
        ("NEAR(a b)", False),  # FTS5's NEAR is a word here, and no note holds it
        ("*", False),
        ('"unbalanced', False),
        ("a" * 10_000, False),
        ("🎉 emoji", False),
        ("nul\x00byte", True),  # words either side of any punctuation are words of the note
        ("AND OR NOT", False),  # operators are words, not operators
        ("(", False),
        ("col:value", True),  # not FTS5's column filter
        ("^start", True),  # not FTS5's initial-token anchor
        ("x" * 3 + "-*", False),
    ],
)
def test_any_punctuation_is_text(client: anthropic.Anthropic, store_id: str, query: str, finds: bool) -> None:
    """FTS5's syntax is never live: every query answers 200 and finds exactly the notes holding its words."""
    note = client.beta.memory_stores.memories.create(store_id, path="/a.md", content="a nul byte col value start")
    answer = get(client, f"/v1/memory_stores/{store_id}/search", q=query)
    assert [hit["memory"]["id"] for hit in answer["data"]] == ([note.id] if finds else [])
    assert answer["next_page"] is None


def test_access_rules(world: World, client: anthropic.Anthropic, store_id: str) -> None:
    note = client.beta.memory_stores.memories.create(store_id, path="/a.md", content="alpha")
    version = note.memory_version_id
    routes = [f"/v1/memory_stores/{store_id}/search", f"/v1/memory_stores/{store_id}/memory_versions/{version}/diff"]

    stranger = world.sdk(world.other)  # another workspace: not found
    for route in routes:
        with pytest.raises(anthropic.NotFoundError):
            get(stranger, route, q="alpha")
    with pytest.raises(anthropic.NotFoundError):
        post(stranger, f"/v1/memory_stores/{store_id}/memories/{note.id}/restore", {"version_id": version})

    reader = world.sdk(world.reader)  # a read-only key reads, searches and diffs, but does not restore
    assert get(reader, routes[0], q="alpha")["data"][0]["memory"]["id"] == note.id
    assert get(reader, routes[1])["version"]["id"] == version
    with pytest.raises(anthropic.PermissionDeniedError):
        post(reader, f"/v1/memory_stores/{store_id}/memories/{note.id}/restore", {"version_id": version})

    # A task searches its own stores only; a read-only store of its list can be searched, not restored.
    other_store = client.beta.memory_stores.create(name="elsewhere").id
    client.beta.memory_stores.memories.create(other_store, path="/a.md", content="alpha")
    tasks = tasks_for(world.gm)
    worker = tasks.create_worker(world.workspace_id, "planner")
    _, token = tasks.create_task(
        world.workspace_id, worker.id, [{"type": "memory_store", "memory_store_id": store_id, "access": "read_only"}]
    )
    as_task = world.sdk(token)
    assert get(as_task, routes[0], q="alpha")["data"][0]["memory"]["id"] == note.id
    with pytest.raises(anthropic.NotFoundError):
        get(as_task, f"/v1/memory_stores/{other_store}/search", q="alpha")
    with pytest.raises(anthropic.PermissionDeniedError):
        post(as_task, f"/v1/memory_stores/{store_id}/memories/{note.id}/restore", {"version_id": version})


def test_diff_over_http(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    note = memories.create(store_id, path="/a.md", content="one\ntwo\n")
    first = note.memory_version_id
    note = memories.update(note.id, memory_store_id=store_id, content="one\n2\n", path="/b.md")
    diff = get(client, f"/v1/memory_stores/{store_id}/memory_versions/{note.memory_version_id}/diff")
    assert diff["type"] == "memory_version_diff"
    assert diff["version"]["id"] == note.memory_version_id and diff["against"]["id"] == first
    assert diff["version"]["created_by"]["type"] == "api_actor" and diff["against"]["created_at"]
    assert (diff["old_path"], diff["new_path"], diff["renamed"], diff["redacted"]) == ("/a.md", "/b.md", True, False)
    assert diff["diff"] == (
        "diff --git a/a.md b/b.md\nrename from /a.md\nrename to /b.md\n--- a/a.md\n+++ b/b.md\n"
        "@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
    )
    assert diff["hunks"] == [
        {
            "old_start": 1,
            "old_lines": 2,
            "new_start": 1,
            "new_lines": 2,
            "header": "@@ -1,2 +1,2 @@",
            "lines": [
                {"type": "context", "text": "one", "newline": True},
                {"type": "removed", "text": "two", "newline": True},
                {"type": "added", "text": "2", "newline": True},
            ],
        }
    ]
    backwards = get(
        client, f"/v1/memory_stores/{store_id}/memory_versions/{first}/diff", against=note.memory_version_id
    )
    assert "-2\n+two\n" in backwards["diff"]
    new_file = get(client, f"/v1/memory_stores/{store_id}/memory_versions/{first}/diff")
    assert new_file["against"] is None and "new file\n--- /dev/null\n+++ b/a.md\n@@ -0,0 +1,2 @@" in new_file["diff"]
    with pytest.raises(anthropic.NotFoundError):
        get(client, f"/v1/memory_stores/{store_id}/memory_versions/memver_nope/diff")
    with pytest.raises(anthropic.NotFoundError):
        get(client, f"/v1/memory_stores/{store_id}/memory_versions/{first}/diff", against="memver_nope")


def test_diff_with_a_redacted_version_shows_no_content(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    note = memories.create(store_id, path="/a.md", content="the launch code is swordfish")
    first = note.memory_version_id
    note = memories.update(note.id, memory_store_id=store_id, content="nothing to see")
    client.beta.memory_stores.memory_versions.redact(first, memory_store_id=store_id)
    diff = get(client, f"/v1/memory_stores/{store_id}/memory_versions/{note.memory_version_id}/diff")
    assert diff["redacted"] is True and diff["hunks"] == []
    assert "swordfish" not in str(diff) and "nothing to see" not in diff["diff"]
    assert "redacted" in diff["diff"]


def test_restore_over_http(client: anthropic.Anthropic, store_id: str) -> None:
    memories = client.beta.memory_stores.memories
    note = memories.create(store_id, path="/a.md", content="first")
    first = note.memory_version_id
    note = memories.update(note.id, memory_store_id=store_id, content="second", path="/b.md")
    route = f"/v1/memory_stores/{store_id}/memories/{note.id}/restore"

    with pytest.raises(anthropic.ConflictError) as stale:  # the usual precondition
        post(
            client, route, {"version_id": first, "precondition": {"type": "content_sha256", "content_sha256": "0" * 64}}
        )
    assert stale.value.body["error"]["type"] == "memory_precondition_failed_error"  # type: ignore[index]
    restored = post(
        client,
        route,
        {"version_id": first, "precondition": {"type": "content_sha256", "content_sha256": note.content_sha256}},
    )
    assert (restored["id"], restored["path"], restored["content"]) == (note.id, "/a.md", None)
    assert memories.retrieve(note.id, memory_store_id=store_id).content == "first"
    versions = client.beta.memory_stores.memory_versions.list(store_id, memory_id=note.id).data
    assert [v.operation for v in versions] == ["modified", "modified", "created"]
    assert versions[0].created_by.type == "api_actor"  # type: ignore[union-attr]

    # A deleted note comes back with its id; a path now taken is the usual 409.
    memories.delete(note.id, memory_store_id=store_id)
    squatter = memories.create(store_id, path="/a.md", content="squatter")
    with pytest.raises(anthropic.ConflictError) as taken:
        post(client, route, {"version_id": first})
    assert taken.value.body["error"]["type"] == "memory_path_conflict_error"  # type: ignore[index]
    memories.delete(squatter.id, memory_store_id=store_id)
    back = post(client, route + "?view=full", {"version_id": first})
    assert (back["id"], back["path"], back["content"]) == (note.id, "/a.md", "first")

    # A redacted version, a version of another note or none at all
    memories.update(note.id, memory_store_id=store_id, content="third")
    client.beta.memory_stores.memory_versions.redact(first, memory_store_id=store_id)
    with pytest.raises(anthropic.BadRequestError):
        post(client, route, {"version_id": first})
    with pytest.raises(anthropic.NotFoundError):
        post(client, route, {"version_id": squatter.memory_version_id})
    with pytest.raises(anthropic.BadRequestError):
        post(client, route, {})


def test_a_search_past_its_bounds_or_budget_is_a_400_on_rest_and_in_the_web_view(world: World) -> None:
    """One rule for every surface: a query over the bounds, or over the budget GITMEM_SEARCH_BUDGET
    gives the home, is the API's 400 envelope with the engine's message, and the web view's 400 page
    shows the same message; an allowed query answers (MCP: tests/system/test_mcp.py)."""
    sdk = world.sdk()
    store_id = sdk.beta.memory_stores.create(name="many").id
    expected = budget_notes(world.gm.store(world.workspace_id, store_id))
    route = f"/v1/memory_stores/{store_id}/search"
    short = "the prefix s* is too short: a prefix needs at least 2 letters or digits before the *"
    with pytest.raises(anthropic.BadRequestError) as refused:
        get(sdk, route, q="deploy OR s*")
    assert refused.value.status_code == 400
    envelope = refused.value.body
    assert envelope["type"] == "error"  # type: ignore[index]
    assert envelope["error"] == {"type": "invalid_request_error", "message": short}  # type: ignore[index]
    assert len(get(sdk, route, q=EXPENSIVE, limit=100)["data"]) == len(expected)  # within the budget

    config = from_settings(load_settings({"GITMEM_HOME": str(world.gm.home), "GITMEM_SEARCH_BUDGET": "1e-9"}))
    tiny = open_home(config)
    assert tiny.search_budget == 1e-9
    with TestClient(create_app(tiny)) as app_client:
        client = anthropic.Anthropic(
            api_key=world.admin, base_url="http://testserver", max_retries=0, http_client=app_client
        )
        with pytest.raises(anthropic.BadRequestError) as over:
            get(client, route, q=EXPENSIVE)
        assert over.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
        message = over.value.body["error"]["message"]  # type: ignore[index]
        assert message.startswith("this search was stopped after 1e-09 s, the most one search may take here;")
        assert [hit["memory"]["path"] for hit in get(client, route, q="7")["data"]] == ["/budget/007.md"]  # cheap
        browser = TestClient(app_client.app, base_url="http://testserver")
        assert ui_sign_in(browser, world.admin).status_code == 303
        for query, shown in ((EXPENSIVE, message), ("s*", short)):
            page = browser.get(f"/ui/stores/{store_id}", params={"q": query})
            assert page.status_code == 400 and html.escape(shown, quote=False) in page.text, query
