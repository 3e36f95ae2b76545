"""The model-backed dreamer through the official SDK, against a local fake of the hosted Messages API
(``httpx2.MockTransport`` behind the real ``anthropic.Anthropic`` client) that returns recorded answers,
including malformed and hostile ones. The notes and the tasks' events go to the model; whatever comes
back is written under the store's own rules: a path outside the store, a secret or a 10 MB note is
refused (and said so in the dream's events), and the dream completes; an unusable answer fails the dream
cleanly, with no half-made store left."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest

from gitmem.agents.dreams.dreamers import ModelDreamer
from gitmem.agents.dreams.dreams import dreams_for
from gitmem.agents.dreams.runner import DreamRunner
from gitmem.agents.dreams.values import Dream
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.model import Note, StoreInfo

MODEL = "claude-opus-4-7"
SECRET = "AKIA" + "ABCDEFGHIJKLMNOP"  # the shape of an AWS access key id


def message(text: str) -> dict[str, Any]:
    """A Messages API response as the hosted API records it."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 900,
            "output_tokens": 80,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def notes_answer(*notes: tuple[str, str]) -> httpx2.Response:
    return httpx2.Response(200, json=message(json.dumps({"notes": [{"path": p, "content": c} for p, c in notes]})))


def model(answer: Callable[[], httpx2.Response], seen: list[dict[str, Any]]) -> ModelDreamer:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages" and "model-key" in request.headers["authorization"]
        seen.append(json.loads(request.content))
        return answer()

    client = anthropic.Anthropic(
        api_key="model-key",
        base_url="http://model.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    return ModelDreamer(client)


def notes_of(store: MemoryStore) -> dict[str, str]:
    return {n.path: store.get(n.id).content or "" for n in store.list(limit=1000).items if isinstance(n, Note)}


def dream_with(gm: Gitmem, ws: Workspace, info: StoreInfo, dreamer: ModelDreamer, **kwargs: Any) -> Dream:
    made = dreams_for(gm).create(
        ws.id, [{"type": "memory_store", "memory_store_id": info.id}, *kwargs.pop("extra", [])], MODEL, **kwargs
    )
    DreamRunner(gm, dreamer).run_pending()
    return dreams_for(gm).get(ws.id, made.id)


def skipped(gm: Gitmem, dream: Dream) -> dict[str, str]:
    events = tasks_for(gm).list_events(dream.task_id or "", limit=100).items
    return {e.payload["path"]: e.payload["reason"] for e in events if e.type == "dream.note_skipped"}


@pytest.fixture
def seeded(store: MemoryStore) -> MemoryStore:
    store.create("/people/sam.md", "# Sam\nlikes tea\n")
    store.create("/people/sam-copy.md", "Sam likes tea.\n")
    return store


@pytest.mark.usefixtures("seeded")
def test_the_notes_and_the_tasks_events_reach_the_model(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo
) -> None:
    tasks = tasks_for(gm)
    task, _ = tasks.create_task(workspace.id, tasks.create_worker(workspace.id, "helper").id)
    tasks.append_event(task.id, "agent.message", {"text": "Sam switched to coffee"})
    seen: list[dict[str, Any]] = []
    answer = lambda: notes_answer(("/people/sam.md", "# Sam\nlikes coffee (was tea)\n"))  # noqa: E731
    done = dream_with(
        gm, workspace, store_info, model(answer, seen), extra=[{"type": "sessions", "session_ids": [task.id]}]
    )
    assert done.status == "completed", done.error_message
    (body,) = seen
    sent = json.loads(body["messages"][0]["content"].split("as JSON:\n", 1)[1])
    assert sent["notes"] == [
        {"path": "/people/sam-copy.md", "content": "Sam likes tea.\n"},
        {"path": "/people/sam.md", "content": "# Sam\nlikes tea\n"},
    ]
    assert sent["task_events"] == [
        {"task_id": task.id, "type": "agent.message", "payload": {"text": "Sam switched to coffee"}}
    ]
    assert notes_of(gm.store(workspace.id, done.output_store_id or "")) == {
        "/people/sam.md": "# Sam\nlikes coffee (was tea)\n"
    }
    assert done.usage.input_tokens == 900 and done.usage.output_tokens == 80


@pytest.mark.parametrize("behavior", ["create_new", "update_existing"])
@pytest.mark.usefixtures("seeded")
def test_hostile_edits_are_refused_and_the_dream_completes(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, behavior: str
) -> None:
    hostile = [
        ("/../../etc/passwd", "root:x:0:0\n"),  # out of the store
        ("../escape.md", "x\n"),
        ("/.git/config", "[core]\n"),
        ("/creds.md", f"aws key {SECRET}\n"),  # a secret
        ("/huge.md", "y" * (10 * 1024 * 1024)),  # a 10 MB note
        ("/people/sam.md", "# Sam\nlikes tea\nhas a cat\n"),  # and one good edit
    ]
    output = {"type": behavior, "memory_store_id": store_info.id} if behavior == "update_existing" else None
    done = dream_with(gm, workspace, store_info, model(lambda: notes_answer(*hostile), []), output_behavior=output)
    assert done.status == "completed", done.error_message
    out = gm.store(workspace.id, done.output_store_id or "")
    assert notes_of(out) == {"/people/sam.md": "# Sam\nlikes tea\nhas a cat\n"}
    refused = skipped(gm, done)
    assert set(refused) == {p for p, _ in hostile[:5]}
    assert "token" in refused["/creds.md"] and SECRET not in json.dumps(refused)
    assert "bytes" in refused["/huge.md"]
    for path in ("/etc/passwd", "/escape.md"):
        assert not (out.path / path.lstrip("/")).exists()
    assert not any(SECRET in (v.path or "") for v in out.versions(limit=100).items)


@pytest.mark.parametrize(
    "answer",
    [
        lambda: httpx2.Response(200, json=message("Sure! I tidied your notes.")),  # prose, not JSON
        lambda: httpx2.Response(200, json=message('{"notes": "all of them"}')),  # the wrong shape
        lambda: httpx2.Response(200, json=message('{"notes": [{"path": 7, "content": null}]}')),
        lambda: httpx2.Response(200, json=message('{"notes": [{"path": "/a.md", "content": "unterminated')),
        lambda: httpx2.Response(200, content=b"<html>not json</html>", headers={"content-type": "text/html"}),
        lambda: httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
        lambda: httpx2.Response(500, json={"type": "error", "error": {"type": "api_error", "message": "boom"}}),
    ],
    ids=["prose", "shape", "types", "truncated", "html", "overloaded", "server-error"],
)
def test_an_unusable_answer_fails_cleanly(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, seeded: MemoryStore, answer: Callable[[], httpx2.Response]
) -> None:
    before = notes_of(seeded)
    stores_before = {s.id for s in gm.all_stores()}
    done = dream_with(gm, workspace, store_info, model(answer, []))
    assert done.status == "failed" and done.error_type == "internal_error"
    assert done.error_message and done.ended_at is not None
    assert done.output_store_id is None  # no half-made store
    dreamer_store = tasks_for(gm).get_worker(workspace.id, dreams_for(gm).dreamer_worker(workspace.id)).own_store_id
    assert {s.id for s in gm.all_stores()} - stores_before <= {dreamer_store}
    assert notes_of(seeded) == before
    assert tasks_for(gm).get_task(workspace.id, done.task_id or "").ended_at is not None
