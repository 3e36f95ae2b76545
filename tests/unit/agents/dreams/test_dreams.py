"""Dreams on the engine, with real SQLite and Git: statuses, outputs, each failure type, cancel and
archive rules, ``update_existing`` written by the dream's task, the offline tidier's exact output, and
the model dreamer through the real SDK over a fake transport."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from click.testing import CliRunner

import gitmem.agents.dreams.dreams as dreams_module
import gitmem.rules.policy as policy_module
from gitmem.agents.dreams.dreamers import (
    DreamRequest,
    DreamResult,
    InputNote,
    ModelDreamer,
    OfflineTidier,
    Usage,
    normalise,
)
from gitmem.agents.dreams.dreams import Dreams, dreams_for
from gitmem.agents.dreams.runner import DreamRunner
from gitmem.agents.dreams.values import Dream
from gitmem.agents.tasks.tasks import tasks_for
from gitmem.cli import main
from gitmem.config.handoff import from_environment
from gitmem.config.home import dreamer
from gitmem.config.settings import SettingsError
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.engine.store.store import MemoryStore
from gitmem.errors import ArchivedStore, Conflict, InvalidRequest, NotFound
from gitmem.model import Actor, Note, StoreInfo

MODEL = "claude-opus-4-7"


def mem(store_id: str) -> dict[str, str]:
    return {"type": "memory_store", "memory_store_id": store_id}


def make(gm: Gitmem, ws: Workspace, store_id: str, **kwargs: Any) -> Dream:
    inputs = [mem(store_id), *kwargs.pop("extra_inputs", [])]
    return dreams_for(gm).create(ws.id, inputs, kwargs.pop("model", MODEL), **kwargs)


def run_all(gm: Gitmem, dreamer: Any = None, **kwargs: Any) -> int:
    return DreamRunner(gm, dreamer or OfflineTidier(), **kwargs).run_pending()


def notes_of(store: MemoryStore) -> dict[str, str]:
    items = store.list(limit=1000).items
    return {n.path: store.get(n.id).content or "" for n in items if isinstance(n, Note)}


class Hook:
    """A dreamer that runs ``action`` first, then answers like the offline tidier."""

    def __init__(self, action: Callable[[], object]) -> None:
        self.action = action

    def dream(self, request: DreamRequest) -> DreamResult:
        self.action()
        return OfflineTidier().dream(request)


@pytest.fixture
def messy(store: MemoryStore) -> MemoryStore:
    store.create("/b/alpha.md", "# Alpha\r\nfirst line   \r\n\r\n\r\nsecond\r\n\r\n")
    store.create("/a/copy.md", "# Alpha\nfirst line\n\nsecond\n")  # the same once normalised
    store.create("/empty.md", "  \n\t\n")
    store.create("/zeta.md", "no heading here\n")
    return store


EXPECTED = {
    "/INDEX.md": "# Index\n\n2 notes in this store.\n\n- `/a/copy.md`: Alpha\n- `/zeta.md`: no heading here\n",
    "/a/copy.md": "# Alpha\nfirst line\n\nsecond\n",
    "/zeta.md": "no heading here\n",
}


# -- the offline tidier ----------------------------------------------------------------------------


def test_tidier_is_deterministic_and_exact() -> None:
    notes = (
        InputNote("/b.md", "x\r\n"),
        InputNote("/a.md", "x\n"),
        InputNote("/INDEX.md", "old"),
        InputNote("/c.md", ""),
        InputNote("/d.md", "\n\n## Deep   \nbody\n\n\n"),
    )
    first = OfflineTidier().dream(DreamRequest(notes))
    second = OfflineTidier().dream(DreamRequest(tuple(reversed(notes))))
    assert first == second
    assert first.usage == Usage()
    # A user's /INDEX.md is a note like any other: kept, and the tidier's index goes beside it.
    assert [(n.path, n.content) for n in first.notes] == [
        ("/INDEX.dream.md", "# Index\n\n3 notes in this store.\n\n- `/INDEX.md`: old\n- `/a.md`: x\n- `/d.md`: Deep\n"),
        ("/INDEX.md", "old\n"),
        ("/a.md", "x\n"),
        ("/d.md", "## Deep\nbody\n"),
    ]
    assert first.merged == (("/b.md", "/a.md"),)
    # Over its own output, nothing changes; without a user's index, the tidier's is at /INDEX.md.
    assert OfflineTidier().dream(DreamRequest(first.notes)).notes == first.notes
    alone = OfflineTidier().dream(DreamRequest((InputNote("/a.md", "x\n"),)))
    assert [n.path for n in alone.notes] == ["/INDEX.md", "/a.md"]
    assert OfflineTidier().dream(DreamRequest(alone.notes)).notes == alone.notes
    assert normalise("a\r\rb  \n") == "a\n\nb\n"
    assert normalise(" \n\n") == ""


def test_the_dreamer_setting_picks_the_dreamer() -> None:
    assert isinstance(dreamer(from_environment({}).dreams), OfflineTidier)
    assert isinstance(dreamer(from_environment({"GITMEM_DREAMER": "offline"}).dreams), OfflineTidier)
    with pytest.raises(SettingsError, match="GITMEM_DREAMER"):
        dreamer(from_environment({"GITMEM_DREAMER": "nope"}).dreams)


# -- create_new ------------------------------------------------------------------------------------


def test_create_new_writes_a_tidier_store_as_the_task(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, messy: MemoryStore
) -> None:
    before = notes_of(messy)
    dream = make(gm, workspace, store_info.id, instructions="keep it short")
    assert dream.status == "pending" and dream.output_store_id is None and dream.task_id is None
    assert dream.ended_at is None and dream.error_type is None and dream.usage == Usage()

    assert run_all(gm) == 1
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "completed", done.error_message
    assert done.ended_at is not None and done.started_at is not None and done.usage == Usage()
    assert done.output_store_id and done.output_store_id != store_info.id and done.task_id

    out_info = gm.get_store(workspace.id, done.output_store_id)
    assert out_info.name == "notes (dreamed)" and out_info.kind == "shared"
    out = gm.store(workspace.id, done.output_store_id)
    assert notes_of(out) == EXPECTED
    assert notes_of(messy) == before  # create_new leaves the input alone
    versions = out.versions(limit=100).items
    assert len(versions) == 3
    assert {v.created_by for v in versions} == {Actor("task_actor", done.task_id)}

    tasks = tasks_for(gm)
    task = tasks.get_task(workspace.id, done.task_id)
    assert tasks.get_worker(workspace.id, task.worker_id).name == "dreamer"
    types = [e.type for e in tasks.list_events(done.task_id, limit=100).items]
    assert types[0] == "dream.started" and types[-1] == "dream.completed"

    again = make(gm, workspace, store_info.id)
    run_all(gm)
    second = dreams_for(gm).get(workspace.id, again.id)
    assert second.status == "completed" and second.task_id is not None
    assert tasks.get_task(workspace.id, second.task_id).worker_id == task.worker_id  # one dreamer a workspace


def test_update_existing_changes_the_input_with_one_version_a_note(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, messy: MemoryStore
) -> None:
    dream = make(
        gm, workspace, store_info.id, output_behavior={"type": "update_existing", "memory_store_id": store_info.id}
    )
    with pytest.raises(Conflict):  # one update_existing dream a store at a time
        make(
            gm, workspace, store_info.id, output_behavior={"type": "update_existing", "memory_store_id": store_info.id}
        )
    before = len(messy.versions(limit=100).items)
    run_all(gm)
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "completed", done.error_message
    assert done.output_store_id == store_info.id
    assert notes_of(messy) == EXPECTED
    new = messy.versions(limit=100).items[: len(messy.versions(limit=100).items) - before]
    # /b/alpha.md and /empty.md deleted, /INDEX.md created; /a/copy.md and /zeta.md already tidy.
    assert sorted((v.operation, v.path) for v in new) == [
        ("created", "/INDEX.md"),
        ("deleted", "/b/alpha.md"),
        ("deleted", "/empty.md"),
    ]
    assert done.task_id is not None
    assert {v.created_by for v in new} == {Actor("task_actor", done.task_id)}


def test_tasks_events_reach_the_dreamer(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, store: MemoryStore
) -> None:
    tasks = tasks_for(gm)
    worker = tasks.create_worker(workspace.id, "helper")
    task, _ = tasks.create_task(workspace.id, worker.id)
    tasks.append_event(task.id, "agent.message", {"text": "Sam prefers tea"})
    store.create("/people/sam.md", "# Sam\n")
    seen: list[DreamRequest] = []

    class Recorder:
        def dream(self, request: DreamRequest) -> DreamResult:
            seen.append(request)
            return DreamResult((InputNote("/people/sam.md", "# Sam\nPrefers tea.\n"),), Usage())

    dream = make(gm, workspace, store_info.id, extra_inputs=[{"type": "tasks", "task_ids": [task.id]}])
    assert dream.tasks_kind == "tasks" and dream.task_ids == (task.id,)
    run_all(gm, Recorder())
    assert dreams_for(gm).get(workspace.id, dream.id).status == "completed"
    (request,) = seen
    assert request.model == MODEL and [log.task_id for log in request.tasks] == [task.id]
    assert request.tasks[0].events == ({"type": "agent.message", "payload": {"text": "Sam prefers tea"}},)


# -- refusals and failures as made ----------------------------------------------------------------


def test_create_refusals(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    dreams = dreams_for(gm)
    sid = store_info.id
    bad: list[tuple[Any, Any, dict[str, Any]]] = [
        ([], MODEL, {}),
        ([mem(sid), mem(sid)], MODEL, {}),
        ([mem(sid), {"type": "sessions", "session_ids": []}], MODEL, {}),
        ([mem(sid), {"type": "sessions", "session_ids": [f"task_{i}" for i in range(101)]}], MODEL, {}),
        ([mem(sid), {"type": "tasks", "task_ids": ["task_1", "task_1"]}], MODEL, {}),
        ([mem(sid), {"type": "tasks", "task_ids": ["task_1"]}, {"type": "tasks", "task_ids": ["task_2"]}], MODEL, {}),
        ([{"type": "files"}], MODEL, {}),
        ([mem(sid)], {"id": MODEL, "speed": "fast"}, {}),
        ([mem(sid)], "", {}),
        ([mem(sid)], MODEL, {"instructions": "x" * 4097}),
        ([mem(sid)], MODEL, {"output_behavior": {"type": "update_existing", "memory_store_id": "memstore_x"}}),
        ([mem(sid)], MODEL, {"output_behavior": {"type": "replace"}}),
    ]
    for inputs, model, kwargs in bad:
        with pytest.raises(InvalidRequest):
            dreams.create(workspace.id, inputs, model, **kwargs)
    with pytest.raises(NotFound):
        dreams.create(workspace.id, [mem(sid), {"type": "sessions", "session_ids": ["task_nope"]}], MODEL)
    other = gm.catalog.create_workspace("other")
    with pytest.raises(NotFound):
        dreams.create(other.id, [mem(sid)], MODEL)
    gm.archive_store(workspace.id, sid)
    with pytest.raises(ArchivedStore):
        dreams.create(workspace.id, [mem(sid)], MODEL)
    assert dreams.list(workspace.id).items == []
    ok = dreams.create(
        workspace.id, [mem(gm.create_store(workspace.id, "fine").id)], {"id": MODEL, "speed": "standard"}
    )
    assert ok.status == "pending" and ok.model_speed == "standard"
    with pytest.raises(NotFound):
        dreams.get(other.id, ok.id)


@pytest.mark.usefixtures("messy")
def test_too_large_input_fails_as_made(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dreams_module, "MAX_INPUT_BYTES", 16)
    stores_before = len(gm.all_stores())
    dream = make(gm, workspace, store_info.id)
    assert dream.status == "failed" and dream.error_type == "input_memory_store_too_large"
    assert dream.ended_at is not None and dream.task_id is None and dream.output_store_id is None
    assert run_all(gm) == 0
    assert len(gm.all_stores()) == stores_before
    assert dreams_for(gm).get(workspace.id, dream.id).status == "failed"


def test_org_limit_fails_as_made(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(policy_module, "MAX_SHARED_STORES", 1)
    dream = make(gm, workspace, store_info.id)
    assert dream.status == "failed" and dream.error_type == "memory_store_org_limit_exceeded"
    assert dream.task_id is None and dream.output_store_id is None and dream.ended_at is not None
    # update_existing makes no store: it is not limited.
    ok = make(
        gm, workspace, store_info.id, output_behavior={"type": "update_existing", "memory_store_id": store_info.id}
    )
    assert ok.status == "pending"


# -- failures while running ------------------------------------------------------------------------


@pytest.mark.usefixtures("messy")
def test_input_archived_while_running(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    stores_before = {s.id for s in gm.all_stores()}
    dream = make(gm, workspace, store_info.id)
    run_all(gm, Hook(lambda: gm.archive_store(workspace.id, store_info.id)))
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "failed" and done.error_type == "input_memory_store_unavailable"
    # No half-made output store is left behind, and the dream's task is withdrawn.
    assert done.ended_at is not None and done.output_store_id is None and done.task_id
    dreamer_store = tasks_for(gm).get_worker(workspace.id, dreams_for(gm).dreamer_worker(workspace.id)).own_store_id
    assert {s.id for s in gm.all_stores()} == stores_before | {dreamer_store}
    assert tasks_for(gm).get_task(workspace.id, done.task_id).ended_at is not None
    assert gm.catalog.credential(done.task_id).revoked_at is not None


def test_task_deleted_while_running(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    tasks = tasks_for(gm)
    worker = tasks.create_worker(workspace.id, "helper")
    task, _ = tasks.create_task(workspace.id, worker.id)
    dream = make(gm, workspace, store_info.id, extra_inputs=[{"type": "sessions", "session_ids": [task.id]}])

    run_all(gm, Hook(lambda: tasks.delete_task(workspace.id, task.id)))
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "failed" and done.error_type == "input_session_unavailable"


def test_timeout(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    release = threading.Event()
    dream = make(gm, workspace, store_info.id)
    try:
        run_all(gm, Hook(lambda: release.wait(10)), timeout_seconds=0.2)
    finally:
        release.set()
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "failed" and done.error_type == "timeout" and done.ended_at is not None


def test_dreamer_error_is_internal_error(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    def boom() -> None:
        raise RuntimeError("the dreamer broke")

    dream = make(gm, workspace, store_info.id)
    run_all(gm, Hook(boom))
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "failed" and done.error_type == "internal_error"
    assert "the dreamer broke" in (done.error_message or "")


def test_expire_fails_dreams_left_running(gm: Gitmem, workspace: Workspace, store_info: StoreInfo, clock: Any) -> None:
    dreams = dreams_for(gm)
    dream = make(gm, workspace, store_info.id)
    assert dreams.claim_next("dead-process") == dream.id
    assert dreams.claim_next("other") is None  # claimed once only
    clock.advance(hours=13)
    assert dreams.expire() == 1
    done = dreams.get(workspace.id, dream.id)
    assert done.status == "failed" and done.error_type == "timeout"


# -- cancel, archive, list -------------------------------------------------------------------------


@pytest.mark.usefixtures("messy")
def test_cancel_and_archive_rules(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    dreams = dreams_for(gm)
    pending = make(gm, workspace, store_info.id)
    with pytest.raises(InvalidRequest):
        dreams.archive(workspace.id, pending.id)
    canceled = dreams.cancel(workspace.id, pending.id)
    assert canceled.status == "canceled" and canceled.ended_at is not None
    assert dreams.cancel(workspace.id, pending.id).status == "canceled"  # again: no change
    assert run_all(gm) == 0

    completed = make(gm, workspace, store_info.id)
    run_all(gm)
    with pytest.raises(InvalidRequest):
        dreams.cancel(workspace.id, completed.id)
    monkeypatch.setattr(dreams_module, "MAX_INPUT_BYTES", 1)
    failed = make(gm, workspace, store_info.id)
    with pytest.raises(InvalidRequest):
        dreams.cancel(workspace.id, failed.id)

    listed = [d.id for d in dreams.list(workspace.id).items]
    assert listed == [failed.id, completed.id, pending.id]  # newest first
    for d in (pending, completed, failed):
        assert dreams.archive(workspace.id, d.id).archived_at is not None
    assert dreams.list(workspace.id).items == []
    assert len(dreams.list(workspace.id, include_archived=True).items) == 3
    assert [d.id for d in dreams.list(workspace.id, include_archived=True, statuses=["completed"]).items] == [
        completed.id
    ]


@pytest.mark.usefixtures("messy")
def test_cancel_while_running_stops_writing(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    holder: list[Dream] = []
    holder.append(make(gm, workspace, store_info.id))
    run_all(gm, Hook(lambda: dreams_for(gm).cancel(workspace.id, holder[0].id)))
    done = dreams_for(gm).get(workspace.id, holder[0].id)
    assert done.status == "canceled" and done.error_type is None
    assert done.output_store_id is not None
    assert notes_of(gm.store(workspace.id, done.output_store_id)) == {}


def test_list_pages(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    dreams = dreams_for(gm)
    made = [make(gm, workspace, store_info.id).id for _ in range(3)]
    first = dreams.list(workspace.id, limit=2)
    assert [d.id for d in first.items] == made[::-1][:2] and first.next_page
    second = dreams.list(workspace.id, limit=2, page=first.next_page)
    assert [d.id for d in second.items] == [made[0]] and second.next_page is None
    with pytest.raises(InvalidRequest):
        dreams.list(workspace.id, page="garbage!")
    with pytest.raises(InvalidRequest):
        dreams.list(workspace.id, statuses=["sleeping"])


# -- the model dreamer, with the real SDK over a fake transport ------------------------------------


def fake_messages(answer: str, seen: list[dict[str, Any]]) -> anthropic.Anthropic:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages"
        seen.append(json.loads(request.content))
        return httpx2.Response(
            200,
            json={
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [{"type": "text", "text": answer}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 1234,
                    "output_tokens": 56,
                    "cache_creation_input_tokens": 7,
                    "cache_read_input_tokens": 8,
                },
            },
        )

    return anthropic.Anthropic(
        api_key="x",
        base_url="http://model.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


@pytest.mark.usefixtures("messy")
def test_model_dreamer_through_the_sdk(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    seen: list[dict[str, Any]] = []
    answer = json.dumps({"notes": [{"path": "/alpha.md", "content": "# Alpha\nfirst line\nsecond\n"}]})
    client = fake_messages(f"```json\n{answer}\n```", seen)
    dream = make(gm, workspace, store_info.id, instructions="merge everything about Alpha")
    run_all(gm, ModelDreamer(client))
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "completed", done.error_message
    assert done.usage == Usage(1234, 56, 7, 8) and done.output_store_id is not None
    assert notes_of(gm.store(workspace.id, done.output_store_id)) == {"/alpha.md": "# Alpha\nfirst line\nsecond\n"}
    (body,) = seen
    assert body["model"] == MODEL
    prompt = body["messages"][0]["content"]
    assert "merge everything about Alpha" in prompt and "/b/alpha.md" in prompt


def test_model_dreamer_unusable_answer(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    dream = make(gm, workspace, store_info.id)
    run_all(gm, ModelDreamer(fake_messages("I tidied it for you!", [])))
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "failed" and done.error_type == "internal_error"
    assert done.usage.input_tokens == 1234  # the tokens were spent all the same


# -- the command line ------------------------------------------------------------------------------


def test_cli(tmp_path: Path) -> None:
    home = tmp_path / "cli-home"
    gm = Gitmem.open(home)
    ws = gm.catalog.create_workspace("default")
    info = gm.create_store(ws.id, "notes")
    gm.store(ws.id, info.id).create("/a.md", "hello  \r\n")
    runner = CliRunner()

    def cli(*args: str) -> str:
        result = runner.invoke(main, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    task, _ = tasks_for(gm).create_task(ws.id, tasks_for(gm).create_worker(ws.id, "helper").id)
    made = json.loads(cli("dreams", "create", info.id, "--task", task.id, "--run", "--json"))
    assert made["status"] == "completed" and made["outputs"][0]["type"] == "memory_store"
    # The SDK's shapes: the tasks read are "sessions", and the task it ran as is session_id only.
    assert made["inputs"] == [
        {"type": "memory_store", "memory_store_id": info.id},
        {"type": "sessions", "session_ids": [task.id]},
    ]
    assert made["id"].startswith("drm_") and made["session_id"] and "task_id" not in made
    assert json.loads(cli("dreams", "show", made["id"]))["id"] == made["id"]
    assert made["id"] in cli("dreams", "list")
    assert json.loads(cli("dreams", "archive", made["id"]))["archived_at"]
    assert made["id"] not in cli("dreams", "list")
    pending = cli("dreams", "create", info.id).strip()
    assert json.loads(cli("dreams", "cancel", pending))["status"] == "canceled"
    assert isinstance(Dreams.of(Gitmem.open(home)), Dreams)


# -- the defects: a user's index, the size limit, encryption, a failed dream's output ---------------


def test_a_users_index_is_kept_in_place(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, store: MemoryStore
) -> None:
    store.create("/INDEX.md", "# Our index\n- wiki at /docs")
    store.create("/docs/wiki.md", "# Wiki\nhello\n")
    dream = make(
        gm, workspace, store_info.id, output_behavior={"type": "update_existing", "memory_store_id": store_info.id}
    )
    run_all(gm)
    assert dreams_for(gm).get(workspace.id, dream.id).status == "completed"
    after = notes_of(store)
    assert after["/INDEX.md"] == "# Our index\n- wiki at /docs\n"  # the user's lines, tidied, not replaced
    assert after["/INDEX.dream.md"].startswith("# Index\n") and "`/INDEX.md`: Our index" in after["/INDEX.dream.md"]
    # Again: nothing changes.
    versions = len(store.versions(limit=100).items)
    make(gm, workspace, store_info.id, output_behavior={"type": "update_existing", "memory_store_id": store_info.id})
    run_all(gm)
    assert len(store.versions(limit=100).items) == versions and notes_of(store) == after


def test_a_note_at_the_size_limit_does_not_fail_the_dream(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, store: MemoryStore
) -> None:
    limit = store.policy.max_content_bytes
    big = "x" * (limit - 6) + "\nlast!"  # exactly the limit, with no final newline
    assert len(big.encode()) == limit
    store.create("/big.md", big)
    store.create("/small.md", "a  \n")
    stores_before = len(gm.all_stores())
    dream = make(gm, workspace, store_info.id)
    run_all(gm)
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "completed", done.error_message
    out = notes_of(gm.store(workspace.id, done.output_store_id or ""))
    assert out["/big.md"] == big and out["/small.md"] == "a\n"
    assert len(gm.all_stores()) == stores_before + 2  # the output and the dreamer's own store


@pytest.mark.usefixtures("messy")
def test_a_failed_dream_leaves_no_half_made_store(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    class BreaksAfterWriting:
        """Answers, then the dream's second write finds its input archived."""

        def dream(self, request: DreamRequest) -> DreamResult:
            return OfflineTidier().dream(request)

        def after_write(self, written: int, checkpoint: Callable[[], None]) -> None:  # noqa: ARG002  the Dreamer's hook signature
            if written == 2:
                gm.archive_store(workspace.id, store_info.id)

    before = {s.id for s in gm.all_stores()}
    dream = make(gm, workspace, store_info.id)
    run_all(gm, BreaksAfterWriting())
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "failed" and done.error_type == "input_memory_store_unavailable"
    assert done.output_store_id is None
    events = tasks_for(gm).list_events(done.task_id or "", limit=100).items
    made = next(e.payload["output_memory_store_id"] for e in events if e.type == "dream.started")
    assert made not in {s.id for s in gm.all_stores()} and not gm.repo_path(made).exists()
    assert {s.id for s in gm.all_stores()} - before == {
        tasks_for(gm).get_worker(workspace.id, dreams_for(gm).dreamer_worker(workspace.id)).own_store_id
    }


def test_an_encrypted_store_dreams_into_an_encrypted_store(gm: Gitmem, workspace: Workspace) -> None:
    info = gm.create_store(workspace.id, "private", encrypted=True)
    marker = "the-vault-code-is-orange-giraffe"
    gm.store(workspace.id, info.id).create("/secret-ish.md", f"# Vault\n{marker}   \n")
    dream = make(gm, workspace, info.id)
    run_all(gm)
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "completed", done.error_message
    out_info = gm.get_store(workspace.id, done.output_store_id or "")
    assert out_info.encrypted
    out = gm.store(workspace.id, out_info.id)
    assert notes_of(out)["/secret-ish.md"] == f"# Vault\n{marker}\n"  # readable through the engine
    objects = subprocess.run(
        ["git", "-C", str(out.path), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout
    assert objects and marker.encode() not in objects
    for path in out.path.rglob("*"):
        assert not path.is_file() or marker.encode() not in path.read_bytes(), path


def test_a_dreamer_that_cannot_start_fails_the_dream_not_the_runner(
    gm: Gitmem, workspace: Workspace, store_info: StoreInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITMEM_DREAMER", "anthropic")  # the SDK refuses to start without a key
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    dream = make(gm, workspace, store_info.id)
    assert DreamRunner(gm, dreamer(from_environment().dreams)).run_pending() == 1  # no dream is left "running"
    done = dreams_for(gm).get(workspace.id, dream.id)
    assert done.status == "failed" and done.error_type == "internal_error"


def test_a_runner_stopping_mid_dream_fails_it_at_once(gm: Gitmem, workspace: Workspace, store_info: StoreInfo) -> None:
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(30)

    dream = make(gm, workspace, store_info.id)
    runner = DreamRunner(gm, Hook(hold), poll_interval=0.01).start()
    assert started.wait(30)
    runner.stop(timeout=0.1)  # a stopping server's bound: the dream cannot finish within it
    stopped = dreams_for(gm).get(workspace.id, dream.id)
    assert stopped.status == "failed" and stopped.error_type == "internal_error"
    assert "the server stopped while the dream ran" in (stopped.error_message or "")
    release.set()
    runner.stop(timeout=30)
    assert dreams_for(gm).get(workspace.id, dream.id).status == "failed"  # the job did not complete it after
