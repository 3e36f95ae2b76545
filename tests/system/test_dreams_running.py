"""A dream while it runs, through the API and the official SDK (``client.beta.dreams``): its input store
archived or deleted, a task it reads deleted, its time limit, ``cancel``, and its runner's process
killed. Nothing here edits a row: every change goes through the product.

The app runs in this process (starlette's TestClient behind the SDK's own HTTP client), with its dream
runner on and ``GITMEM_DREAMER=offline-hold``: the offline tidier that, once the dream has written its
first note, holds the dream open until the dream is stopped. So each test acts on a half-written dream
without racing a clock. The crash test kills (SIGKILL) another process's runner mid-dream.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import httpx2
import pytest
from anthropic.types.beta import BetaDream
from fastapi.testclient import TestClient

from gitmem.api.app import Settings, create_app
from gitmem.config.handoff import from_environment
from gitmem.config.home import dreamer
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.model import Note
from tests import REPO_ROOT
from tests.apps import Httpx2ToApp
from tests.checks import assert_fsck_clean, store_state

MODEL = "claude-opus-4-7"
DEADLINE = 20.0
FINAL = ("completed", "failed", "canceled")


@dataclass(frozen=True)
class Server:
    gm: Gitmem
    workspace: Workspace
    http: TestClient  # raw requests, with the admin key
    sdk: anthropic.Anthropic


@contextlib.contextmanager
def in_process(home: Path, admin: str | None = None, *, runner: bool = True) -> Iterator[Server]:
    gm = Gitmem.open(home)
    if admin is None:
        ws = gm.catalog.create_workspace("alpha")
        _, admin = gm.catalog.create_api_key(ws.id, "admin")
    else:
        ws = gm.catalog.workspace(gm.catalog.authenticate(admin).workspace_id)
    settings = Settings.defaults(
        dream_runner=runner,
        dream_poll_seconds=0.05,
        dreamer=dreamer(from_environment().dreams),  # GITMEM_DREAMER and GITMEM_DREAM_TIMEOUT, as a server reads them
        dream_timeout_seconds=from_environment().dreams.timeout,
        rate_limit_per_second=0,
        prune_interval_seconds=0,
    )
    app = create_app(gm, settings)
    with TestClient(app, base_url="http://gitmem.test", headers={"x-api-key": admin}) as http:
        sdk = anthropic.Anthropic(
            api_key=admin,
            base_url="http://gitmem.test",
            max_retries=0,
            http_client=httpx2.Client(transport=Httpx2ToApp(http)),
        )
        yield Server(gm, ws, http, sdk)


@pytest.fixture
def holding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITMEM_DREAMER", "offline-hold")
    monkeypatch.setenv("GITMEM_DREAM_HOLD", "30")


@pytest.fixture
def server(tmp_path: Path, holding: None) -> Iterator[Server]:  # noqa: ARG001  for its patch (a fixture takes no usefixtures mark)
    with in_process(tmp_path / "home") as s:
        yield s


def make_store(s: Server) -> str:
    store = s.sdk.beta.memory_stores.create(name="team notes")
    for path, content in (("/a.md", "# A\nalpha\n"), ("/b.md", "# B\nbeta\n"), ("/c.md", "gamma   \n")):
        s.sdk.beta.memory_stores.memories.create(store.id, path=path, content=content)
    return store.id


def wait_for(what: str, probe: Callable[[], object]) -> object:
    deadline = time.monotonic() + DEADLINE
    while not (found := probe()):
        assert time.monotonic() < deadline, f"still waiting for {what} after {DEADLINE}s"
        time.sleep(0.02)
    return found


def mid_dream(sdk: anthropic.Anthropic, dream_id: str) -> BetaDream:
    """Wait until the dream has written its first note (the holding dreamer then holds it open)."""

    def probe() -> BetaDream | None:
        dream = sdk.beta.dreams.retrieve(dream_id)
        assert dream.status not in FINAL, dream
        if dream.outputs and dream.session_id and output_notes(sdk, dream.outputs[0].memory_store_id):
            return dream
        return None

    return wait_for("the dream's first write", probe)  # type: ignore[return-value]


def ended(sdk: anthropic.Anthropic, dream_id: str) -> BetaDream:
    return wait_for("the dream to end", lambda: (d := sdk.beta.dreams.retrieve(dream_id)).status in FINAL and d)  # type: ignore[return-value]


def output_notes(sdk: anthropic.Anthropic, store_id: str) -> list[str]:
    return [m.path for m in sdk.beta.memory_stores.memories.list(store_id) if m.type == "memory"]


def task_ended(s: Server, task_id: str) -> bool:
    return s.http.get(f"/v1/tasks/{task_id}").json()["ended_at"] is not None


def assert_withdrawn(s: Server, dream: BetaDream) -> None:
    """The dream's task is ended and its token refused."""
    assert dream.session_id
    wait_for("the dream's task to end", lambda: task_ended(s, dream.session_id or ""))
    assert s.gm.catalog.credential(dream.session_id).revoked_at is not None


def store_ids(s: Server) -> set[str]:
    return {m.id for m in s.sdk.beta.memory_stores.list(include_archived=True)}


# -- the input store or a task goes away -----------------------------------------------------------


@pytest.mark.parametrize("how", ["archive", "delete"])
def test_input_store_gone_while_running(server: Server, how: str) -> None:
    s = server
    store_id = make_store(s)
    dream = s.sdk.beta.dreams.create(inputs=[{"type": "memory_store", "memory_store_id": store_id}], model=MODEL)
    assert dream.id.startswith("drm_")
    running = mid_dream(s.sdk, dream.id)
    half_made = running.outputs[0].memory_store_id
    getattr(s.sdk.beta.memory_stores, how)(store_id)

    done = ended(s.sdk, dream.id)
    assert done.status == "failed" and done.error is not None
    assert done.error.type == "input_memory_store_unavailable"
    # No half-made output store is left, and outputs say so.
    assert done.outputs == [] and done.ended_at is not None
    assert half_made not in store_ids(s)
    with pytest.raises(anthropic.NotFoundError):
        s.sdk.beta.memory_stores.retrieve(half_made)
    assert_withdrawn(s, done)
    events = s.http.get(f"/v1/tasks/{done.session_id}/events", params={"limit": 100}).json()["data"]
    assert events[-1]["type"] == "dream.failed"
    assert events[-1]["payload"]["type"] == "input_memory_store_unavailable"


def test_task_deleted_while_running(server: Server) -> None:
    s = server
    store_id = make_store(s)
    worker = s.http.post("/v1/workers", json={"name": "helper"}).json()
    task = s.http.post("/v1/tasks", json={"worker_id": worker["id"]}).json()
    s.http.post(f"/v1/tasks/{task['id']}/events", json={"type": "agent.message", "payload": {"text": "hi"}})
    dream = s.sdk.beta.dreams.create(
        model=MODEL,
        inputs=[
            {"type": "memory_store", "memory_store_id": store_id},
            {"type": "sessions", "session_ids": [task["id"]]},
        ],
    )
    mid_dream(s.sdk, dream.id)
    assert s.http.delete(f"/v1/tasks/{task['id']}").status_code == 200

    done = ended(s.sdk, dream.id)
    assert done.status == "failed" and done.error is not None and done.error.type == "input_session_unavailable"
    assert done.outputs == []
    assert [i.type for i in done.inputs] == ["memory_store", "sessions"]
    assert_withdrawn(s, done)
    assert [m.path for m in s.sdk.beta.memory_stores.memories.list(store_id)] == ["/a.md", "/b.md", "/c.md"]


@pytest.mark.usefixtures("holding")
def test_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITMEM_DREAM_TIMEOUT", "0.5")
    with in_process(tmp_path / "home") as s:
        store_id = make_store(s)
        dream = s.sdk.beta.dreams.create(inputs=[{"type": "memory_store", "memory_store_id": store_id}], model=MODEL)
        done = ended(s.sdk, dream.id)
        assert done.status == "failed" and done.error is not None and done.error.type == "timeout"
        assert done.outputs == []
        assert_withdrawn(s, done)


# -- cancel ----------------------------------------------------------------------------------------


def test_cancel_stops_a_running_dream(server: Server) -> None:
    s = server
    store_id = make_store(s)
    before = store_state(s.gm.store(s.workspace.id, store_id))
    dream = s.sdk.beta.dreams.create(inputs=[{"type": "memory_store", "memory_store_id": store_id}], model=MODEL)
    running = mid_dream(s.sdk, dream.id)
    out_id = running.outputs[0].memory_store_id

    started = time.monotonic()
    canceled = s.sdk.beta.dreams.cancel(dream.id)
    assert canceled.status == "canceled" and canceled.error is None and canceled.ended_at is not None
    assert_withdrawn(s, canceled)  # the job has stopped: it ends its task last
    assert time.monotonic() - started < 5
    assert s.sdk.beta.dreams.retrieve(dream.id).status == "canceled"

    # The input store is untouched; the output store holds what was written before the cancel, whole.
    assert store_state(s.gm.store(s.workspace.id, store_id)) == before
    assert [o.memory_store_id for o in s.sdk.beta.dreams.retrieve(dream.id).outputs] == [out_id]
    out = s.gm.store(s.workspace.id, out_id)
    notes = [n for n in out.list(limit=100).items if isinstance(n, Note)]
    assert [n.path for n in notes] == ["/INDEX.md"]  # the first of its writes, then the hold
    for note in notes:
        full = out.get(note.id)
        assert full.content is not None and len(full.content.encode()) == full.content_size_bytes
    assert len(out.versions(limit=100).items) == 1
    assert_fsck_clean(out.path)
    time.sleep(0.2)  # nothing more is written after the cancel
    assert len(out.versions(limit=100).items) == 1


# -- the runner's process dies ---------------------------------------------------------------------


RUNNER = (  # a runner process started with the settings of its environment (the holding dreamer)
    "import sys; from gitmem.engine.gitmem import Gitmem; from gitmem.agents.dreams.runner import DreamRunner;"
    " from gitmem.config.home import dreamer; from gitmem.config.handoff import from_environment;"
    " DreamRunner(Gitmem.open(sys.argv[1]), dreamer(from_environment().dreams)).run_pending()"
)


@pytest.mark.slow
@pytest.mark.usefixtures("holding")
def test_a_killed_runner_fails_its_dream_internal_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with in_process(home, runner=False) as s:  # this process serves; another one runs the dream
        store_id = make_store(s)
        dream = s.sdk.beta.dreams.create(inputs=[{"type": "memory_store", "memory_store_id": store_id}], model=MODEL)
        admin = s.http.headers["x-api-key"]
        runner = subprocess.Popen(
            [sys.executable, "-c", RUNNER, str(home)], cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        )
        try:
            half_made = mid_dream(s.sdk, dream.id).outputs[0].memory_store_id
        finally:
            runner.kill()  # SIGKILL: the process dies mid-dream, with no cleanup of its own
            runner.wait(timeout=30)
        assert s.sdk.beta.dreams.retrieve(dream.id).status == "running"  # as the dead process left it

    # A runner in another process finds the dream its dead claimant left running.
    with in_process(home, admin) as s:
        done = ended(s.sdk, dream.id)
        assert done.status == "failed" and done.error is not None and done.error.type == "internal_error"
        assert "stopped" in done.error.message
        assert done.outputs == [] and half_made not in store_ids(s)
        assert_withdrawn(s, done)
        assert output_notes(s.sdk, store_id) == ["/a.md", "/b.md", "/c.md"]


# -- wire shapes -----------------------------------------------------------------------------------


def test_a_tasks_input_is_echoed_as_sessions(tmp_path: Path) -> None:
    with in_process(tmp_path / "home") as s:
        store_id = make_store(s)
        worker = s.http.post("/v1/workers", json={"name": "helper"}).json()
        task = s.http.post("/v1/tasks", json={"worker_id": worker["id"]}).json()
        # gitmem's alias {"type": "tasks"} is accepted on input; the answer is in the SDK's shapes only.
        raw = s.http.post(
            "/v1/dreams",
            json={
                "model": MODEL,
                "inputs": [
                    {"type": "memory_store", "memory_store_id": store_id},
                    {"type": "tasks", "task_ids": [task["id"]]},
                ],
            },
        )
        assert raw.status_code == 200, raw.text
        body = raw.json()
        assert body["inputs"][1] == {"type": "sessions", "session_ids": [task["id"]]}
        assert set(body) == set(BetaDream.model_fields) and body["id"].startswith("drm_")
        dream = ended(s.sdk, body["id"])
        assert dream.status == "completed", dream.error
        assert dream.inputs[1].type == "sessions" and dream.inputs[1].session_ids == [task["id"]]
        assert set(s.http.get(f"/v1/dreams/{dream.id}").json()) == set(BetaDream.model_fields)
