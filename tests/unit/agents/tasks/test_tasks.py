"""Workers and tasks in the engine (gitmem/agents/tasks/tasks.py) and the CLI: which stores a task reads,
the frozen list, the access check, the memory section, and the append-only event log."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitmem.agents.tasks.scope import check_task_access, refuse_task, store_access, visible_store_ids
from gitmem.agents.tasks.tasks import Tasks, tasks_for
from gitmem.agents.tasks.values import MOUNT_ROOT, slugify, unique_slugs
from gitmem.db import integrity_errors
from gitmem.engine import gitmem as home_module
from gitmem.engine.catalog.catalog import Workspace
from gitmem.engine.gitmem import Gitmem
from gitmem.errors import (
    ArchivedStore,
    AuthenticationFailed,
    Conflict,
    InvalidRequest,
    LimitExceeded,
    NotFound,
    PermissionDenied,
    TooLarge,
)
from gitmem.model import Actor
from tests.checks import commit


@pytest.fixture
def tasks(gm: Gitmem) -> Tasks:
    return tasks_for(gm)


def shared(gm: Gitmem, ws: Workspace, name: str, description: str = "") -> str:
    return gm.create_store(ws.id, name, description=description).id


# -- workers ---------------------------------------------------------------------------------------


def test_worker_has_its_own_store(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    attached = shared(gm, workspace, "team")
    worker = tasks.create_worker(workspace.id, "researcher", [attached])
    assert worker.id.startswith("worker_")
    assert worker.attached_store_ids == (attached,)
    own = gm.get_store(workspace.id, worker.own_store_id)
    assert own.kind == "worker"
    assert own.name == "researcher"
    assert tasks.get_worker(workspace.id, worker.id) == worker
    assert tasks.worker_of_store(own.id) == worker.id

    with pytest.raises(Conflict) as deleting:
        gm.delete_store(workspace.id, own.id)
    assert deleting.value.status == 409
    with pytest.raises(Conflict):
        gm.archive_store(workspace.id, own.id)
    assert gm.get_store(workspace.id, own.id).archived_at is None


def test_own_stores_do_not_count_toward_the_shared_limit(
    gm: Gitmem, workspace: Workspace, tasks: Tasks, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(home_module, "MAX_SHARED_STORES", 2)
    shared(gm, workspace, "one")
    shared(gm, workspace, "two")
    with pytest.raises(LimitExceeded):
        shared(gm, workspace, "three")
    workers = [tasks.create_worker(workspace.id, f"w{i}") for i in range(3)]  # not refused: not shared stores
    assert len({w.own_store_id for w in workers}) == 3
    with pytest.raises(LimitExceeded):
        shared(gm, workspace, "still three")


def test_worker_validation(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    other = gm.catalog.create_workspace("other")
    foreign = shared(gm, other, "theirs")
    archived = shared(gm, workspace, "old")
    gm.archive_store(workspace.id, archived)
    store = shared(gm, workspace, "team")
    with pytest.raises(InvalidRequest):
        tasks.create_worker(workspace.id, "")
    with pytest.raises(NotFound):
        tasks.create_worker(workspace.id, "w", [foreign])
    with pytest.raises(ArchivedStore):
        tasks.create_worker(workspace.id, "w", [archived])
    with pytest.raises(InvalidRequest):
        tasks.create_worker(workspace.id, "w", [store, store])
    with pytest.raises(LimitExceeded):
        tasks.create_worker(workspace.id, "w", [shared(gm, workspace, f"s{i}") for i in range(9)])
    # Refusals leave no worker and no orphaned own store behind.
    assert tasks.list_workers(workspace.id).items == []
    assert [s for s in gm.all_stores() if s.kind == "worker"] == []
    with pytest.raises(NotFound):
        tasks.get_worker(other.id, tasks.create_worker(workspace.id, "mine").id)


def test_attach_and_detach(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    a, b = shared(gm, workspace, "a"), shared(gm, workspace, "b")
    worker = tasks.create_worker(workspace.id, "w")
    assert tasks.attach_store(workspace.id, worker.id, a).attached_store_ids == (a,)
    assert tasks.attach_store(workspace.id, worker.id, a).attached_store_ids == (a,)  # already so
    assert tasks.attach_store(workspace.id, worker.id, b).attached_store_ids == (a, b)
    assert tasks.detach_store(workspace.id, worker.id, a).attached_store_ids == (b,)
    with pytest.raises(NotFound):
        tasks.detach_store(workspace.id, worker.id, a)
    with pytest.raises(InvalidRequest):
        tasks.attach_store(workspace.id, worker.id, worker.own_store_id)
    gm.delete_store(workspace.id, b)
    assert tasks.get_worker(workspace.id, worker.id).attached_store_ids == ()


def test_list_workers_pages(workspace: Workspace, tasks: Tasks) -> None:
    made = [tasks.create_worker(workspace.id, f"w{i}").id for i in range(5)]
    seen, page = [], None
    while True:
        result = tasks.list_workers(workspace.id, limit=2, page=page)
        seen += [w.id for w in result.items]
        if not (page := result.next_page):
            break
    assert seen == made[::-1]


# -- tasks -----------------------------------------------------------------------------------------


def test_task_with_a_read_only_and_a_read_write_store(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    ro = shared(gm, workspace, "Team handbook", "how we work")
    rw = shared(gm, workspace, "Scratch")
    unrelated = shared(gm, workspace, "Unrelated")
    worker = tasks.create_worker(workspace.id, "researcher")
    task, token = tasks.create_task(
        workspace.id,
        worker.id,
        [
            {"type": "memory_store", "memory_store_id": ro, "access": "read_only", "instructions": "Read only."},
            {"type": "memory_store", "memory_store_id": rw},
        ],
    )
    assert task.id.startswith("task_")
    assert [(s.store_id, s.access, s.own) for s in task.stores] == [
        (worker.own_store_id, "read_write", True),
        (ro, "read_only", False),
        (rw, "read_write", False),
    ]
    assert task.stores[1].instructions == "Read only."
    assert task.stores[1].description == "how we work"
    assert [task.mount_path(s) for s in task.stores] == [
        f"/.little-worker/tasks/{task.id}/memory/{slug}/" for slug in ("researcher", "team-handbook", "scratch")
    ]
    assert tasks.task_access(task.id, ro) == "read_only"
    assert tasks.task_access(task.id, rw) == "read_write"
    assert tasks.task_access(task.id, worker.own_store_id) == "read_write"
    assert tasks.task_access(task.id, unrelated) is None

    principal = gm.catalog.authenticate(token)
    assert principal.actor == Actor("task_actor", task.id)
    assert principal.task_id == task.id
    assert visible_store_ids(gm, principal) == frozenset({worker.own_store_id, ro, rw})


def test_writes_are_attributed_to_the_task_and_read_only_refuses(
    gm: Gitmem, workspace: Workspace, tasks: Tasks
) -> None:
    ro, rw, unrelated = (shared(gm, workspace, n) for n in ("ro", "rw", "unrelated"))
    gm.store(workspace.id, ro).create("/facts.md", "the sky is blue")
    worker = tasks.create_worker(workspace.id, "w")
    task, token = tasks.create_task(
        workspace.id,
        worker.id,
        [
            {"type": "memory_store", "memory_store_id": ro, "access": "read_only"},
            {"type": "memory_store", "memory_store_id": rw, "access": "read_write"},
        ],
    )
    principal = gm.catalog.authenticate(token)

    # What the memories router does for a write: check, then write as the caller's actor.
    for store_id in (rw, worker.own_store_id):
        check_task_access(gm, principal, store_id, write=True)
        gm.store(workspace.id, store_id).create("/learned.md", "a fact", actor=principal.actor)
        versions = gm.store(workspace.id, store_id).versions(task_id=task.id).items
        assert [(v.operation, v.created_by) for v in versions] == [("created", Actor("task_actor", task.id))]
        head = commit(gm.store(workspace.id, store_id).repo.revparse_single("main"))
        assert head.author.name == task.id
        assert f"Created-By: task_actor task_id={task.id}" in head.message

    check_task_access(gm, principal, ro, write=False)  # reading is fine
    with pytest.raises(PermissionDenied) as refused:
        check_task_access(gm, principal, ro, write=True)
    assert refused.value.status == 403 and refused.value.api_type == "permission_error"
    for write in (False, True):
        with pytest.raises(NotFound):
            check_task_access(gm, principal, unrelated, write=write)
    with pytest.raises(PermissionDenied):
        refuse_task(principal, "create stores")
    # Per-call handlers (the memory tool) ask for the access itself.
    assert [store_access(gm, principal, s) for s in (ro, rw, worker.own_store_id)] == [
        "read_only",
        "read_write",
        "read_write",
    ]
    with pytest.raises(NotFound):
        store_access(gm, principal, unrelated)

    # Keys and users are not confined.
    _key, secret = gm.catalog.create_api_key(workspace.id, "admin")
    admin = gm.catalog.authenticate(secret)
    check_task_access(gm, admin, unrelated, write=True)
    refuse_task(admin, "create stores")
    assert visible_store_ids(gm, admin) is None
    assert store_access(gm, admin, unrelated) == "read_write"
    _, reader_secret = gm.catalog.create_api_key(workspace.id, "reader", role="read-only")
    assert store_access(gm, gm.catalog.authenticate(reader_secret), unrelated) == "read_only"


def test_the_list_is_frozen_when_the_task_is_made(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    store = shared(gm, workspace, "People", "who is who")
    worker = tasks.create_worker(workspace.id, "w", [store])
    task, _ = tasks.create_task(
        workspace.id,
        worker.id,
        [{"type": "memory_store", "memory_store_id": store, "instructions": "Check names here."}],
    )
    gm.update_store(workspace.id, store, name="Renamed", description="something else")
    tasks.set_attached_stores(workspace.id, worker.id, [])

    again = tasks.get_task(workspace.id, task.id)
    assert again == task
    assert (again.stores[1].name, again.stores[1].description) == ("People", "who is who")
    assert again.mount_path(again.stores[1]).endswith("/memory/people/")
    context = tasks.memory_view(workspace.id, task.id).context
    assert "### People" in context and "Renamed" not in context and "who is who" in context

    # The catalog itself refuses to change a frozen list.
    with pytest.raises(integrity_errors()):
        gm.catalog.db.execute("UPDATE task_stores SET name='x' WHERE task_id=?", (task.id,))
    with pytest.raises(integrity_errors()):
        gm.catalog.db.execute("DELETE FROM task_stores WHERE task_id=?", (task.id,))

    # A task made now reads the worker's new list.
    later, _ = tasks.create_task(workspace.id, worker.id)
    assert [s.store_id for s in later.stores] == [worker.own_store_id]


def test_at_most_eight_named_stores(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    stores = [shared(gm, workspace, f"s{i}") for i in range(9)]
    worker = tasks.create_worker(workspace.id, "w")
    with pytest.raises(LimitExceeded) as refused:
        tasks.create_task(workspace.id, worker.id, [{"type": "memory_store", "memory_store_id": s} for s in stores])
    assert refused.value.status == 400
    assert "at most 8" in refused.value.message
    assert tasks.list_tasks(workspace.id).items == []
    task, _ = tasks.create_task(
        workspace.id, worker.id, [{"type": "memory_store", "memory_store_id": s} for s in stores[:8]]
    )
    assert len(task.stores) == 9  # its own and 8 named


def test_task_validation(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    other = gm.catalog.create_workspace("other")
    foreign = shared(gm, other, "theirs")
    store = shared(gm, workspace, "mine")
    archived = shared(gm, workspace, "old")
    gm.archive_store(workspace.id, archived)
    worker = tasks.create_worker(workspace.id, "w")

    def make(*resources: dict[str, Any]) -> None:
        tasks.create_task(workspace.id, worker.id, list(resources))

    def ref(store_id: str, **extra: object) -> dict[str, object]:
        return {"type": "memory_store", "memory_store_id": store_id, **extra}

    with pytest.raises(NotFound):
        make(ref("memstore_01NOSUCHSTORE0000000000000"))
    with pytest.raises(NotFound):
        make(ref(foreign))
    with pytest.raises(ArchivedStore):
        make(ref(archived))
    with pytest.raises(InvalidRequest, match="twice"):
        make(ref(store), ref(store, access="read_only"))
    with pytest.raises(InvalidRequest, match="own store"):
        make(ref(worker.own_store_id))
    with pytest.raises(InvalidRequest, match="access"):
        make(ref(store, access="write"))
    with pytest.raises(InvalidRequest, match="4096"):
        make(ref(store, instructions="x" * 4097))
    with pytest.raises(InvalidRequest, match="type"):
        make({"type": "file", "memory_store_id": store})
    with pytest.raises(NotFound):
        tasks.create_task(other.id, worker.id)  # another workspace's worker
    with pytest.raises(NotFound):
        tasks.create_task(workspace.id, "worker_01NOSUCHWORKER000000000000")
    assert tasks.list_tasks(workspace.id).items == []
    make(ref(store, instructions="x" * 4096))


def test_none_named_reads_the_workers_attached_stores(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    a, b, gone = shared(gm, workspace, "Alpha"), shared(gm, workspace, "Beta"), shared(gm, workspace, "Gone")
    worker = tasks.create_worker(workspace.id, "w", [a, b, gone])
    gm.archive_store(workspace.id, b)
    gm.delete_store(workspace.id, gone)
    nothing: list[dict[str, Any]] = []
    for resources in (None, nothing):
        task, _ = tasks.create_task(workspace.id, worker.id, resources)
        assert [(s.store_id, s.access, s.instructions, s.own) for s in task.stores] == [
            (worker.own_store_id, "read_write", "", True),
            (a, "read_write", "", False),
            (b, "read_only", "", False),  # archived since it was attached: it can only be read
        ]
    # Naming any store means only those are read.
    task, _ = tasks.create_task(workspace.id, worker.id, [{"type": "memory_store", "memory_store_id": a}])
    assert [s.store_id for s in task.stores] == [worker.own_store_id, a]


def test_another_workspace_cannot_see_tasks(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    other = gm.catalog.create_workspace("other")
    worker = tasks.create_worker(workspace.id, "w")
    task, _ = tasks.create_task(workspace.id, worker.id)
    with pytest.raises(NotFound):
        tasks.get_task(other.id, task.id)
    with pytest.raises(NotFound):
        tasks.memory_view(other.id, task.id)
    assert tasks.list_tasks(other.id).items == []


def test_list_tasks_pages_and_filters_by_worker(workspace: Workspace, tasks: Tasks) -> None:
    w1, w2 = tasks.create_worker(workspace.id, "one"), tasks.create_worker(workspace.id, "two")
    made = [tasks.create_task(workspace.id, w.id)[0].id for w in (w1, w2, w1, w1)]
    seen, page = [], None
    while True:
        result = tasks.list_tasks(workspace.id, worker_id=w1.id, limit=2, page=page)
        seen += [t.id for t in result.items]
        if not (page := result.next_page):
            break
    assert seen == [made[3], made[2], made[0]]
    with pytest.raises(InvalidRequest):
        tasks.list_tasks(workspace.id, page="not a token")


# -- mount names and the memory section ------------------------------------------------------------


def test_slugs() -> None:
    assert slugify("Team Notes (2026)") == "team-notes-2026"
    assert slugify("  --Café / Résumé--  ") == "cafe-resume"
    assert slugify("日本語") == "store"
    assert slugify("a" * 300) == "a" * 80
    assert unique_slugs(["Notes", "notes", "NOTES!", "notes-2", "Other"]) == [
        "notes",
        "notes-2",
        "notes-3",
        "notes-2-2",
        "other",
    ]


def test_duplicate_names_get_distinct_folders(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    stores = [shared(gm, workspace, name) for name in ("Notes", "notes", "w")]
    worker = tasks.create_worker(workspace.id, "w")
    task, _ = tasks.create_task(
        workspace.id, worker.id, [{"type": "memory_store", "memory_store_id": s} for s in stores]
    )
    assert [s.mount_name for s in task.stores] == ["w", "notes", "notes-2", "w-2"]
    assert task.memory_root == f"{MOUNT_ROOT}/{task.id}/memory/"


def test_memory_context_for_empty_and_non_empty_stores(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    full = shared(gm, workspace, "Handbook", "How the team works")
    empty_ro = shared(gm, workspace, "Reference")
    store = gm.store(workspace.id, full)
    for name in ("alpha", "beta", "gamma", "delta", "epsilon"):
        store.create(f"/topics/{name}.md", f"about {name}")
    worker = tasks.create_worker(workspace.id, "researcher")
    task, _ = tasks.create_task(
        workspace.id,
        worker.id,
        [
            {
                "type": "memory_store",
                "memory_store_id": full,
                "access": "read_only",
                "instructions": "Follow it.\nAsk when unsure.",
            },
            {"type": "memory_store", "memory_store_id": empty_ro, "access": "read_only"},
        ],
    )
    view = tasks.memory_view(workspace.id, task.id, max_paths=3)
    own, handbook, reference = view.stores
    assert (own.total, handbook.total, reference.total) == (0, 5, 0)
    assert handbook.paths == ("/topics/alpha.md", "/topics/beta.md", "/topics/delta.md")
    assert handbook.mount_path == f"/.little-worker/tasks/{task.id}/memory/handbook/"

    context = view.context
    assert context.startswith("## Memory\n")
    assert "You have 3 memory stores" in context
    section = context.split("### ")
    own_text, handbook_text, reference_text = section[1], section[2], section[3]
    # The worker's own store is empty and writable: the model is told to create the first note.
    assert own_text.startswith("researcher (this worker's own memory)")
    assert "Access: read-write" in own_text
    assert "This store is empty. Create its first note" in own_text
    assert f"`/.little-worker/tasks/{task.id}/memory/researcher/notes.md`" in own_text
    # A store with notes lists their paths, capped, and says how many more there are.
    assert "Access: read-only" in handbook_text
    assert "Description: How the team works" in handbook_text
    assert "  > Follow it.\n  > Ask when unsure." in handbook_text
    assert "Notes (5):\n- `topics/alpha.md`\n- `topics/beta.md`\n- `topics/delta.md`\n- ... and 2 more" in handbook_text
    assert "empty" not in handbook_text
    # An empty read-only store does not ask for a note it cannot hold.
    assert "empty and read-only" in reference_text and "Create" not in reference_text

    # The paths are live; a deleted store says so.
    gm.store(workspace.id, empty_ro).create("/first.md", "x")
    gm.delete_store(workspace.id, full)
    view = tasks.memory_view(workspace.id, task.id)
    assert view.stores[2].paths == ("/first.md",)
    assert not view.stores[1].available
    assert "no longer available" in view.context


def test_memory_context_caps_at_fifty_by_default(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    worker = tasks.create_worker(workspace.id, "w")
    own = gm.store(workspace.id, worker.own_store_id)
    for i in range(53):
        own.create(f"/n{i:02d}.md", "x")
    task, _ = tasks.create_task(workspace.id, worker.id)
    view = tasks.memory_view(workspace.id, task.id)
    assert len(view.stores[0].paths) == 50
    assert "- ... and 3 more" in view.context


# -- events ----------------------------------------------------------------------------------------


def test_events_are_append_only_and_paged(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    worker = tasks.create_worker(workspace.id, "w")
    task, token = tasks.create_task(workspace.id, worker.id)
    other, _ = tasks.create_task(workspace.id, worker.id)
    actor = gm.catalog.authenticate(token).actor
    made = [
        tasks.append_event(task.id, "agent.message" if i % 2 else "user.message", {"n": i}, actor=actor)
        for i in range(7)
    ]
    tasks.append_event(other.id, "agent.message", {})
    assert [e.seq for e in made] == [1, 2, 3, 4, 5, 6, 7]
    assert made[0].created_by == actor and made[0].payload == {"n": 0}

    seen, page = [], None
    while True:
        result = tasks.list_events(task.id, limit=3, page=page)
        seen += result.items
        if not (page := result.next_page):
            break
    assert seen == made
    assert [e.seq for e in tasks.list_events(task.id, after_seq=5).items] == [6, 7]
    assert tasks.list_events(task.id, after_seq=7).items == []
    assert [e.seq for e in tasks.list_events(task.id, types=["agent.message"]).items] == [2, 4, 6]
    assert [e.seq for e in tasks.list_events(other.id).items] == [1]

    with pytest.raises(integrity_errors()):
        gm.catalog.db.execute("UPDATE task_events SET payload='{}' WHERE task_id=?", (task.id,))
    with pytest.raises(integrity_errors()):
        gm.catalog.db.execute("DELETE FROM task_events WHERE task_id=?", (task.id,))
    assert not hasattr(tasks, "update_event") and not hasattr(tasks, "delete_event")
    assert tasks.list_events(task.id, limit=100).items == made


def test_event_validation(workspace: Workspace, tasks: Tasks) -> None:
    worker = tasks.create_worker(workspace.id, "w")
    task, _ = tasks.create_task(workspace.id, worker.id)
    for bad in ("", "has space", "x" * 65, ".dot-first"):
        with pytest.raises(InvalidRequest):
            tasks.append_event(task.id, bad, {})
    with pytest.raises(InvalidRequest):
        tasks.append_event(task.id, "t", {"x": float("nan")})
    with pytest.raises(InvalidRequest):
        tasks.append_event(task.id, "t", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(TooLarge) as too_large:
        tasks.append_event(task.id, "t", {"x": "y" * 102_400})
    assert too_large.value.status == 413
    with pytest.raises(NotFound):
        tasks.append_event("task_01NOSUCHTASK00000000000000", "t", {})
    with pytest.raises(InvalidRequest):
        tasks.list_events(task.id, limit=0)
    for forged in ([10**30], ["1"], [1, 2], {"seq": 1}):
        token = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode()
        with pytest.raises(InvalidRequest):
            tasks.list_events(task.id, page=token)
    with pytest.raises(InvalidRequest):
        tasks.list_events(task.id, after_seq=2**64)
    assert tasks.list_events(task.id).items == []


def test_tasks_survive_reopening_the_home(gm: Gitmem, workspace: Workspace, tasks: Tasks) -> None:
    worker = tasks.create_worker(workspace.id, "w")
    task, _token = tasks.create_task(workspace.id, worker.id)
    tasks.append_event(task.id, "x", {})
    again = Tasks(Gitmem.open(gm.home))
    assert again.get_task(workspace.id, task.id) == task
    assert [e.seq for e in again.list_events(task.id).items] == [1]
    assert again.append_event(task.id, "x", {}).seq == 2


# -- CLI -------------------------------------------------------------------------------------------


def test_cli_workers_and_tasks(tmp_path: Path) -> None:
    from gitmem.cli import main

    home = tmp_path / "cli-home"
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(main, ["--home", str(home), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    gm = Gitmem.open(home)
    ws = gm.catalog.create_workspace("default")
    ro = gm.create_store(ws.id, "Handbook").id
    gm.store(ws.id, ro).create("/rules.md", "be kind")

    worker_id = run("workers", "create", "researcher", "--store", ro).strip()
    worker = json.loads(run("workers", "show", worker_id))
    assert worker["memory_store_ids"] == [ro] and worker["own_memory_store_id"].startswith("memstore_")

    token = run(
        "tasks",
        "create",
        "--worker",
        worker_id,
        "--store",
        f"{ro}:read_only",
        "--instructions",
        f"{ro}=Follow the rules.",
    ).strip()
    task_id = gm.catalog.authenticate(token).task_id
    assert task_id is not None
    task = json.loads(run("tasks", "show", task_id))
    assert [(r["name"], r["access"], r["instructions"]) for r in task["resources"]] == [
        ("researcher", "read_write", None),
        ("Handbook", "read_only", "Follow the rules."),
    ]

    created = json.loads(run("tasks", "create", "--worker", worker_id, "--json"))
    assert created["token"].startswith("gm_tsk_")
    assert [r["memory_store_id"] for r in created["resources"]] == [worker["own_memory_store_id"], ro]

    context = run("tasks", "memory", task_id)
    assert context.startswith("## Memory") and "- `rules.md`" in context and "Follow the rules." in context

    tasks_for(gm).append_event(task_id, "agent.message", {"text": "hello"})
    tasks_for(gm).append_event(task_id, "agent.message", {"text": "again"})
    lines = run("tasks", "events", task_id, "--json").splitlines()
    assert [json.loads(line)["payload"]["text"] for line in lines] == ["hello", "again"]
    assert "again" in run("tasks", "events", task_id, "--after", "1")
    assert "hello" not in run("tasks", "events", task_id, "--after", "1")

    refused = runner.invoke(main, ["--home", str(home), "tasks", "show", "task_01NOSUCHTASK00000000000000"])
    assert refused.exit_code == 1 and "not found" in refused.stderr
    refused = runner.invoke(
        main, ["--home", str(home), "tasks", "create", "--worker", worker_id, "--store", f"{ro}:write"]
    )
    assert refused.exit_code == 1

    # End: the token is refused, the task and its events stay; delete: both gone, the stores stay.
    assert json.loads(run("tasks", "end", task_id))["ended_at"]
    with pytest.raises(AuthenticationFailed):
        gm.catalog.authenticate(token)
    assert len(tasks_for(gm).list_events(task_id).items) == 2
    assert run("tasks", "delete", task_id).strip() == f"deleted {task_id}"
    with pytest.raises(NotFound):
        tasks_for(gm).get_task(ws.id, task_id)
    assert tasks_for(gm).list_events(task_id).items == []
    assert gm.store(ws.id, ro).get_by_path("/rules.md").content == "be kind"
    gone = runner.invoke(main, ["--home", str(home), "tasks", "delete", task_id])
    assert gone.exit_code == 1 and "not found" in gone.stderr
