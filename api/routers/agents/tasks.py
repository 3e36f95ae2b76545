"""``/v1/tasks``: create (with its token, shown once), list, retrieve, end, delete, the memory view, events.

A task's stores are frozen when it is made. Its token reads its own task, its memory view and its
events, and may append events; it cannot create, list or delete tasks, and another task is 404 to it.
It may end its own task (its token then stops working).
"""

from __future__ import annotations

from fastapi import APIRouter, Query

from gitmem.agents.tasks.values import MAX_CONTEXT_PATHS, MAX_INT, MAX_PAGE
from gitmem.api.deps import Caller, HomeParts, not_a_task
from gitmem.api.schemas.agents.tasks import (
    DeletedTask,
    Task,
    TaskCreate,
    TaskEvent,
    TaskEventCreate,
    TaskEventList,
    TaskList,
    TaskMemory,
)
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.engine.catalog.catalog import Principal, principal_task_id
from gitmem.errors import NotFound
from gitmem.parts import Parts

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], responses=ERROR_RESPONSES)


def _own_task(parts: Parts, principal: Principal, task_id: str) -> str:
    """The task named in the path, in the caller's workspace; a task's token sees only its own."""
    own = principal_task_id(principal)
    if own is not None and own != task_id:
        raise NotFound(f"task {task_id} not found")
    parts.tasks.get_task(principal.workspace_id, task_id)  # NotFound for another workspace's task
    return task_id


@router.post(
    "",
    response_model=Task,
    summary="Create a task; its token is in this response only",
    dependencies=[not_a_task("create tasks")],
)
def create_task(body: TaskCreate, principal: Caller, parts: HomeParts) -> Task:
    resources = [r.model_dump(exclude_none=True) for r in body.resources] if body.resources else None
    task, token = parts.tasks.create_task(principal.workspace_id, body.worker_id, resources, created_by=principal.actor)
    return Task.of(task, token)


@router.get("", response_model=TaskList, summary="List tasks, newest first", dependencies=[not_a_task("list tasks")])
def list_tasks(
    principal: Caller,
    parts: HomeParts,
    worker_id: str | None = Query(None),
    limit: int = Query(20, ge=1, le=MAX_PAGE),
    page: str | None = Query(None),
) -> TaskList:
    result = parts.tasks.list_tasks(principal.workspace_id, worker_id=worker_id or None, limit=limit, page=page or None)
    return TaskList(data=[Task.of(t) for t in result.items], next_page=result.next_page)


@router.get("/{task_id}", response_model=Task, summary="Retrieve a task")
def retrieve_task(task_id: str, principal: Caller, parts: HomeParts) -> Task:
    _own_task(parts, principal, task_id)
    return Task.of(parts.tasks.get_task(principal.workspace_id, task_id))


@router.post("/{task_id}/end", response_model=Task, summary="End a task: its token stops working at once")
def end_task(task_id: str, principal: Caller, parts: HomeParts) -> Task:
    _own_task(parts, principal, task_id)
    return Task.of(parts.tasks.end_task(principal.workspace_id, task_id))


@router.delete(
    "/{task_id}",
    response_model=DeletedTask,
    summary="Delete a task and its events",
    dependencies=[not_a_task("delete tasks")],
)
def delete_task(task_id: str, principal: Caller, parts: HomeParts) -> DeletedTask:
    parts.tasks.delete_task(principal.workspace_id, task_id)
    return DeletedTask(id=task_id)


@router.get("/{task_id}/memory", response_model=TaskMemory, summary="The task's store folders and memory section")
def task_memory(
    task_id: str,
    principal: Caller,
    parts: HomeParts,
    max_paths: int = Query(MAX_CONTEXT_PATHS, ge=1, le=1000, description="Note paths listed a store"),
) -> TaskMemory:
    _own_task(parts, principal, task_id)
    return TaskMemory.of(parts.tasks.memory_view(principal.workspace_id, task_id, max_paths=max_paths))


@router.post("/{task_id}/events", response_model=TaskEvent, summary="Append an event to the task's log")
def append_event(task_id: str, body: TaskEventCreate, principal: Caller, parts: HomeParts) -> TaskEvent:
    _own_task(parts, principal, task_id)
    event = parts.tasks.append_event(task_id, body.type, body.payload or {}, actor=principal.actor)
    return TaskEvent.of(event)


@router.get("/{task_id}/events", response_model=TaskEventList, summary="List the task's events, oldest first")
def list_events(
    task_id: str,
    principal: Caller,
    parts: HomeParts,
    after_seq: int | None = Query(None, ge=0, le=MAX_INT, description="Only events after this sequence number"),
    types: list[str] | None = Query(None, description="Only events of these types"),
    limit: int = Query(20, ge=1, le=MAX_PAGE),
    page: str | None = Query(None),
) -> TaskEventList:
    _own_task(parts, principal, task_id)
    result = parts.tasks.list_events(task_id, after_seq=after_seq, limit=limit, page=page or None, types=types or None)
    return TaskEventList(data=[TaskEvent.of(e) for e in result.items], next_page=result.next_page)
