"""The steward's review over HTTP and the CLI, as the story goes: a task writes a wrong fact, the review
lists it with its author, the steward reverts it, a new task never sees it, and the audit shows it all."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from gitmem.agents.tasks.tasks import tasks_for
from gitmem.api.app import create_app
from gitmem.api.mcp import tools as mcp_tools
from gitmem.cli import main
from gitmem.engine.gitmem import Gitmem
from gitmem.parts import Parts


@dataclass(frozen=True)
class World:
    gm: Gitmem
    http: TestClient
    workspace_id: str
    admin: str
    steward: str
    steward_id: str
    reader: str
    other: str

    def sdk(self, secret: str) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key=secret, base_url="http://testserver", max_retries=0, http_client=self.http)


@pytest.fixture
def world(fast_gm: Gitmem) -> Iterator[World]:
    gm = fast_gm
    ws = gm.catalog.create_workspace("default")
    _, admin = gm.catalog.create_api_key(ws.id, "admin")
    steward, steward_secret = gm.catalog.create_user(ws.id, "dana the steward")
    _, reader = gm.catalog.create_api_key(ws.id, "reader", role="read-only")
    other = gm.catalog.create_workspace("beta")
    _, other_secret = gm.catalog.create_api_key(other.id, "admin")
    with TestClient(create_app(gm)) as http:
        yield World(gm, http, ws.id, admin, steward_secret, steward.id, reader, other_secret)


def call(client: anthropic.Anthropic, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    if method == "GET":
        return client.get(path, cast_to=object)
    return client.post(path, cast_to=object, body=body or {})


def _task(world: World, store_id: str) -> tuple[str, str]:
    tasks = tasks_for(world.gm)
    worker = tasks.create_worker(world.workspace_id, f"analyst-{len(tasks.list_tasks(world.workspace_id).items)}")
    task, token = tasks.create_task(
        world.workspace_id, worker.id, [{"type": "memory_store", "memory_store_id": store_id, "access": "read_write"}]
    )
    return task.id, token


def test_the_steward_story(world: World) -> None:
    admin = world.sdk(world.admin)
    created = call(
        admin, "POST", "/v1/memory_stores", {"name": "analytics", "review": True, "read_approved_only": True}
    )
    assert created["gitmem"] == {"review": {"enabled": True, "read_approved_only": True}}
    store_id = created["id"]
    # The SDK still parses a store with the extra field.
    assert admin.beta.memory_stores.retrieve(store_id).name == "analytics"
    fact = admin.beta.memory_stores.memories.create(
        store_id, path="/metrics/churn.md", content="Churn is measured monthly."
    )
    call(
        world.sdk(world.steward),
        "POST",
        f"/v1/memory_stores/{store_id}/review/approve",
        {"through_version_id": fact.memory_version_id},
    )

    # A task writes a wrong fact; it reads only what was approved, so not even its own write.
    task_id, token = _task(world, store_id)
    agent = world.sdk(token)
    wrong = agent.beta.memory_stores.memories.create(
        store_id, path="/metrics/revenue.md", content="Revenue is booked when the invoice is drafted."
    )
    listed = [m.path for m in agent.beta.memory_stores.memories.list(store_id)]
    assert listed == ["/metrics/churn.md"]
    with pytest.raises(anthropic.NotFoundError):
        agent.beta.memory_stores.memories.retrieve(wrong.id, memory_store_id=store_id)
    with pytest.raises(anthropic.NotFoundError):  # nor its version's content
        call(agent, "GET", f"/v1/memory_stores/{store_id}/memory_versions/{wrong.memory_version_id}")
    over_mcp = mcp_tools.memory_command(
        Parts(world.gm), world.gm.catalog.authenticate(token), store_id, {"command": "view", "path": "/memories"}
    )
    assert "revenue" not in over_mcp.content and "churn.md" in over_mcp.content

    # Nor can it clone the store: Git would hand over the unreviewed history.
    refused = world.http.get(
        f"/v1/memory_stores/{store_id}.git/info/refs?service=git-upload-pack", auth=("task", token)
    )
    assert refused.status_code == 403 and "approved state" in refused.text

    # The review lists it, with its author and its diff.
    steward = world.sdk(world.steward)
    review = call(steward, "GET", f"/v1/memory_stores/{store_id}/review")
    assert review["pending_count"] == 1
    pending = review["data"][0]
    assert pending["version"]["id"] == wrong.memory_version_id
    assert pending["version"]["created_by"] == {"type": "session_actor", "session_id": task_id}
    assert "+Revenue is booked when the invoice is drafted." in pending["diff"]["diff"]

    # The steward reverts it (a new version; the change stays in history) and approves the revert.
    reverted = call(
        steward, "POST", f"/v1/memory_stores/{store_id}/review/revert", {"version_id": wrong.memory_version_id}
    )
    assert reverted["operation"] == "deleted"
    assert reverted["created_by"] == {"type": "user_actor", "user_id": world.steward_id}
    mark = call(steward, "POST", f"/v1/memory_stores/{store_id}/review/approve", {"through_version_id": reverted["id"]})
    assert mark["version_id"] == reverted["id"] and mark["reviewed_by"]["user_id"] == world.steward_id
    assert call(steward, "GET", f"/v1/memory_stores/{store_id}/review")["pending_count"] == 0

    # A new task never sees the wrong fact; its memory section says the store is reviewed.
    new_task_id, new_token = _task(world, store_id)
    new_agent = world.sdk(new_token)
    assert [m.path for m in new_agent.beta.memory_stores.memories.list(store_id)] == ["/metrics/churn.md"]
    tool = call(
        new_agent, "POST", f"/v1/memory_stores/{store_id}/memory_tool", {"command": "view", "path": "/memories"}
    )
    assert "revenue" not in tool["content"] and "churn.md" in tool["content"]
    section = tasks_for(world.gm).memory_view(world.workspace_id, new_task_id).context
    assert "- Review: reviewed by people (last reviewed" in section and "revenue" not in section

    # The audit shows the write, the revert and the review.
    result = CliRunner().invoke(main, ["--home", str(world.gm.home), "log", store_id])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(task_id in line and "created" in line and "/metrics/revenue.md" in line for line in lines)
    assert any(world.steward_id in line and "deleted" in line for line in lines)
    assert any(world.steward_id in line and "reviewed" in line and reverted["id"] in line for line in lines)


def test_who_may_review(world: World) -> None:
    admin = world.sdk(world.admin)
    store_id = call(admin, "POST", "/v1/memory_stores", {"name": "s", "review": True})["id"]
    route = f"/v1/memory_stores/{store_id}/review"
    assert call(admin, "GET", route)["pending_count"] == 0  # an admin key may review
    with pytest.raises(anthropic.PermissionDeniedError):
        call(world.sdk(world.reader), "GET", route)
    _, agent_key = world.gm.catalog.create_api_key(world.workspace_id, "agent", role="read-write")
    with pytest.raises(anthropic.PermissionDeniedError):  # a read-write key is what agents get
        call(world.sdk(agent_key), "GET", route)
    _, token = _task(world, store_id)
    with pytest.raises(anthropic.PermissionDeniedError):
        call(world.sdk(token), "GET", route)
    with pytest.raises(anthropic.NotFoundError):
        call(world.sdk(world.other), "GET", route)
    with pytest.raises(anthropic.BadRequestError):  # an unknown field is refused, nothing changes
        call(admin, "POST", f"{route}/approve", {"through": "x"})


def test_review_is_switched_on_and_off_by_update_and_the_cli(world: World) -> None:
    admin = world.sdk(world.admin)
    store = admin.beta.memory_stores.create(name="plain")
    assert call(admin, "GET", f"/v1/memory_stores/{store.id}").get("gitmem") is None
    with pytest.raises(anthropic.BadRequestError):  # not under review
        call(admin, "GET", f"/v1/memory_stores/{store.id}/review")
    updated = call(admin, "POST", f"/v1/memory_stores/{store.id}", {"review": True})
    assert updated["gitmem"]["review"] == {"enabled": True, "read_approved_only": False}
    note = admin.beta.memory_stores.memories.create(store.id, path="/a.md", content="pending one")

    runner, home = CliRunner(), ["--home", str(world.gm.home)]
    shown = runner.invoke(main, [*home, "review", store.id])
    assert shown.exit_code == 0, shown.output
    assert "1 pending" in shown.output and "+pending one" in shown.output and note.memory_version_id in shown.output
    approved = runner.invoke(
        main, [*home, "review", "approve", store.id, note.memory_version_id, "--as", world.steward_id]
    )
    assert approved.exit_code == 0 and f"reviewed through {note.memory_version_id}" in approved.output
    assert runner.invoke(main, [*home, "review", "disable", store.id]).exit_code == 0
    assert call(admin, "GET", f"/v1/memory_stores/{store.id}").get("gitmem") is None
    refused = runner.invoke(main, [*home, "review", "approve", store.id, "memver_nope"])
    assert refused.exit_code == 1 and "not under review" in refused.output


def test_only_a_reviewer_changes_the_review_settings(world: World) -> None:
    """A read-write key (what agents get) may not switch review or read_approved_only off, nor on; the
    refused request changes nothing, not even the name sent beside it. Resending what is set is fine."""
    admin = world.sdk(world.admin)
    store_id = call(admin, "POST", "/v1/memory_stores", {"name": "s", "review": True, "read_approved_only": True})["id"]
    _, agent_key = world.gm.catalog.create_api_key(world.workspace_id, "agent", role="read-write")
    agent = world.sdk(agent_key)
    route = f"/v1/memory_stores/{store_id}"
    for body in ({"review": False}, {"read_approved_only": False}, {"name": "renamed", "review": False}):
        with pytest.raises(anthropic.PermissionDeniedError):
            call(agent, "POST", route, body)
    after = call(admin, "GET", route)
    assert after["gitmem"]["review"] == {"enabled": True, "read_approved_only": True} and after["name"] == "s"
    assert call(agent, "POST", route, {"name": "kept", "review": True})["name"] == "kept"  # no change asked
    with pytest.raises(anthropic.PermissionDeniedError):  # nor at creation: and no store is made
        call(agent, "POST", "/v1/memory_stores", {"name": "mine", "review": True})
    assert [s.name for s in admin.beta.memory_stores.list()] == ["kept"]
    # A person with write access may, as may an admin key.
    steward = world.sdk(world.steward)
    assert (
        call(steward, "POST", route, {"read_approved_only": False})["gitmem"]["review"]["read_approved_only"] is False
    )
    assert call(admin, "POST", route, {"review": False}).get("gitmem") is None


def test_a_task_writes_only_what_it_may_read(world: World) -> None:
    """Over REST and the memory tool: a pending note's path is taken without naming the note, its id is
    not found, and a note with a pending change is refused without its pending hash."""
    admin = world.sdk(world.admin)
    store_id = call(admin, "POST", "/v1/memory_stores", {"name": "s", "review": True, "read_approved_only": True})["id"]
    seen = admin.beta.memory_stores.memories.create(store_id, path="/seen.md", content="approved")
    call(admin, "POST", f"/v1/memory_stores/{store_id}/review/approve", {"through_version_id": seen.memory_version_id})
    hidden = admin.beta.memory_stores.memories.create(store_id, path="/hidden.md", content="pending")
    changed = admin.beta.memory_stores.memories.update(seen.id, memory_store_id=store_id, content="pending edit")
    _, token = _task(world, store_id)
    agent, memories = world.sdk(token), world.sdk(token).beta.memory_stores.memories

    with pytest.raises(anthropic.ConflictError) as taken:
        memories.create(store_id, path="/hidden.md", content="mine")
    assert hidden.id not in taken.value.response.text and "conflicting_memory_id" not in taken.value.response.text
    with pytest.raises(anthropic.NotFoundError):
        memories.update(hidden.id, memory_store_id=store_id, path="/moved.md")
    with pytest.raises(anthropic.NotFoundError):
        memories.delete(hidden.id, memory_store_id=store_id)
    with pytest.raises(anthropic.NotFoundError):
        call(
            agent,
            "POST",
            f"/v1/memory_stores/{store_id}/memories/{hidden.id}/restore",
            {"version_id": hidden.memory_version_id},
        )
    with pytest.raises(anthropic.ConflictError) as waiting:
        memories.update(
            seen.id,
            memory_store_id=store_id,
            content="mine",
            precondition={"type": "content_sha256", "content_sha256": seen.content_sha256},
        )
    assert changed.content_sha256 not in waiting.value.response.text
    over_tool = mcp_tools.memory_command(
        Parts(world.gm),
        world.gm.catalog.authenticate(token),
        store_id,
        {"command": "str_replace", "path": "/memories/seen.md", "old_str": "approved", "new_str": "mine"},
    )
    assert "waiting for review" in over_tool.content and changed.content_sha256 not in over_tool.content
    assert admin.beta.memory_stores.memories.retrieve(seen.id, memory_store_id=store_id).content == "pending edit"
