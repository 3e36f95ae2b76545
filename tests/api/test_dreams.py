"""``/v1/dreams`` through the official SDK (``client.beta.dreams``) against the real app (served in this
process), with real SQLite and Git: create, poll until completed, retrieve, list, the cancel and archive
rules, speed ``fast`` refused, another workspace's dream 404.

A second server, on a data home of its own, runs without a dream runner so that its dreams
stay ``pending`` for as long as a test needs (the rules for pending dreams, without racing a runner)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import pytest
from anthropic.types.beta import BetaDream, BetaDreamMemoryStoreInputParam

from gitmem.agents.tasks.tasks import tasks_for
from gitmem.api.settings import Settings
from gitmem.engine.gitmem import Gitmem
from gitmem.model import Note
from tests.apps import InProcess, in_process, make_test_home

MODEL = "claude-opus-4-7"
DEADLINE = 20.0


@dataclass(frozen=True)
class Live:
    server: InProcess
    home: Path
    workspace_id: str
    admin: str
    other: str

    def client(self, secret: str | None = None) -> anthropic.Anthropic:
        return self.server.sdk(secret or self.admin, timeout=30)


@contextlib.contextmanager
def live_server(home: Path, *, runner: bool) -> Iterator[Live]:
    made = make_test_home(home)
    settings = Settings.defaults(
        dream_runner=runner,
        dream_poll_seconds=0.2,
        rate_limit_per_second=0,
        prune_interval_seconds=0,
        webhook_delivery=False,
    )
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GITMEM_DREAMER", "offline")
        with in_process(home, settings) as server:
            yield Live(server, home, made.workspace_id, made.admin, made.other)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(tmp_path_factory.mktemp("dreams-home"), runner=True) as server:
        yield server


@pytest.fixture(scope="module")
def idle_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(tmp_path_factory.mktemp("idle-home"), runner=False) as server:
        yield server


@pytest.fixture
def client(live: Live) -> Iterator[anthropic.Anthropic]:
    with live.client() as c:
        yield c


@pytest.fixture
def idle(idle_live: Live) -> Iterator[anthropic.Anthropic]:
    with idle_live.client() as c:
        yield c


def make_store(live: Live) -> str:
    gm = Gitmem.open(live.home)
    info = gm.create_store(live.workspace_id, "team notes")
    store = gm.store(live.workspace_id, info.id)
    store.create("/people/sam.md", "# Sam\r\nlikes tea   \r\n")
    store.create("/copy/sam.md", "# Sam\nlikes tea\n")
    store.create("/blank.md", "\n\n")
    return info.id


@pytest.fixture
def store_id(live: Live) -> str:
    return make_store(live)


@pytest.fixture
def idle_store_id(idle_live: Live) -> str:
    return make_store(idle_live)


def wait_until_ended(client: anthropic.Anthropic, dream_id: str) -> BetaDream:
    deadline = time.monotonic() + DEADLINE
    while True:
        dream = client.beta.dreams.retrieve(dream_id)
        if dream.status in ("completed", "failed", "canceled"):
            return dream
        assert time.monotonic() < deadline, f"dream {dream_id} still {dream.status} after {DEADLINE}s"
        time.sleep(0.05)


def notes(live: Live, store_id: str) -> dict[str, str]:
    store = Gitmem.open(live.home).store(live.workspace_id, store_id)
    return {n.path: store.get(n.id).content or "" for n in store.list(limit=100).items if isinstance(n, Note)}


def test_create_poll_retrieve_list_archive(live: Live, client: anthropic.Anthropic, store_id: str) -> None:
    gm = Gitmem.open(live.home)
    tasks = tasks_for(gm)
    worker = tasks.create_worker(live.workspace_id, "helper")
    task, _ = tasks.create_task(live.workspace_id, worker.id)
    tasks.append_event(task.id, "agent.message", {"text": "Sam likes tea"})

    dream = client.beta.dreams.create(
        inputs=[{"type": "memory_store", "memory_store_id": store_id}, {"type": "sessions", "session_ids": [task.id]}],
        model=MODEL,
        instructions="Keep one note a person.",
    )
    assert isinstance(dream, BetaDream) and dream.type == "dream" and dream.id.startswith("drm_")
    assert dream.status in ("pending", "running", "completed")
    assert dream.model.id == MODEL and dream.output_behavior.type == "create_new"
    assert dream.inputs[0].type == "memory_store" and dream.inputs[1].type == "sessions"
    assert dream.inputs[1].session_ids == [task.id]
    assert dream.instructions == "Keep one note a person."

    done = wait_until_ended(client, dream.id)
    assert done.status == "completed", done.error
    assert done.error is None and done.ended_at is not None and done.session_id
    assert done.usage.input_tokens == 0 and done.usage.output_tokens == 0
    assert len(done.outputs) == 1 and done.outputs[0].type == "memory_store"
    out_id = done.outputs[0].memory_store_id
    assert out_id != store_id
    assert notes(live, out_id) == {
        "/INDEX.md": "# Index\n\n1 note in this store.\n\n- `/copy/sam.md`: Sam\n",
        "/copy/sam.md": "# Sam\nlikes tea\n",
    }
    # The output store is an ordinary store; its versions are the dream's task's.
    with live.server.http(live.admin) as http:
        raw = http.get(f"/v1/memory_stores/{out_id}/memory_versions").json()
        body = http.get(f"/v1/dreams/{dream.id}").json()
    assert {v["created_by"]["type"] for v in raw["data"]} == {"session_actor"}
    assert {v["created_by"]["session_id"] for v in raw["data"]} == {done.session_id}

    # The raw body validates against the SDK's model and has no field the SDK does not declare.
    BetaDream.model_validate(body)
    assert set(body) == set(BetaDream.model_fields) and "task_id" not in body

    listed = [d.id for d in client.beta.dreams.list(limit=100)]
    assert dream.id in listed
    assert dream.id in [d.id for d in client.beta.dreams.list(statuses=["completed"], limit=100)]
    assert dream.id not in [d.id for d in client.beta.dreams.list(statuses=["failed", "canceled"], limit=100)]
    with pytest.raises(anthropic.BadRequestError):
        client.beta.dreams.cancel(dream.id)
    archived = client.beta.dreams.archive(dream.id)
    assert archived.archived_at is not None and archived.status == "completed"
    assert dream.id not in [d.id for d in client.beta.dreams.list(limit=100)]
    assert dream.id in [d.id for d in client.beta.dreams.list(include_archived=True, limit=100)]


def test_update_existing(live: Live, client: anthropic.Anthropic, store_id: str) -> None:
    dream = client.beta.dreams.create(
        inputs=[{"type": "memory_store", "memory_store_id": store_id}],
        model={"id": MODEL, "speed": "standard"},
        output_behavior={"type": "update_existing", "memory_store_id": store_id},
    )
    done = wait_until_ended(client, dream.id)
    assert done.status == "completed", done.error
    assert done.output_behavior.type == "update_existing"
    assert [o.memory_store_id for o in done.outputs] == [store_id]
    assert set(notes(live, store_id)) == {"/INDEX.md", "/copy/sam.md"}


def test_pending_rules(idle: anthropic.Anthropic, idle_store_id: str) -> None:
    dream = idle.beta.dreams.create(inputs=[{"type": "memory_store", "memory_store_id": idle_store_id}], model=MODEL)
    assert dream.status == "pending" and dream.outputs == [] and dream.ended_at is None
    with pytest.raises(anthropic.BadRequestError):
        idle.beta.dreams.archive(dream.id)
    canceled = idle.beta.dreams.cancel(dream.id)
    assert canceled.status == "canceled" and canceled.ended_at is not None and canceled.error is None
    assert idle.beta.dreams.cancel(dream.id).status == "canceled"
    assert idle.beta.dreams.archive(dream.id).archived_at is not None


def test_refusals(client: anthropic.Anthropic, store_id: str) -> None:
    store: BetaDreamMemoryStoreInputParam = {"type": "memory_store", "memory_store_id": store_id}
    with pytest.raises(anthropic.BadRequestError) as fast:
        client.beta.dreams.create(inputs=[store], model={"id": MODEL, "speed": "fast"})
    assert "fast" in str(fast.value)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.dreams.create(inputs=[store, store], model=MODEL)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.dreams.create(
            inputs=[store],
            model=MODEL,
            output_behavior={"type": "update_existing", "memory_store_id": "memstore_other"},
        )
    with pytest.raises(anthropic.BadRequestError):
        client.beta.dreams.create(inputs=[store], model=MODEL, instructions="x" * 4097)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.dreams.create(inputs=[{"type": "memory_store", "memory_store_id": "memstore_nope"}], model=MODEL)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.dreams.retrieve("dream_nope")


def test_another_workspace_sees_404(idle_live: Live, idle: anthropic.Anthropic, idle_store_id: str) -> None:
    store_id = idle_store_id
    dream = idle.beta.dreams.create(inputs=[{"type": "memory_store", "memory_store_id": store_id}], model=MODEL)
    with idle_live.client(idle_live.other) as other:
        with pytest.raises(anthropic.NotFoundError):
            other.beta.dreams.retrieve(dream.id)
        with pytest.raises(anthropic.NotFoundError):
            other.beta.dreams.cancel(dream.id)
        with pytest.raises(anthropic.NotFoundError):
            other.beta.dreams.archive(dream.id)
        with pytest.raises(anthropic.NotFoundError):  # nor can it read this workspace's store
            other.beta.dreams.create(inputs=[{"type": "memory_store", "memory_store_id": store_id}], model=MODEL)
        assert dream.id not in [d.id for d in other.beta.dreams.list(include_archived=True)]
    idle.beta.dreams.cancel(dream.id)
