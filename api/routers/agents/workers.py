"""``/v1/workers``: create, list, retrieve, update (POST: the attached stores).

A worker has its own memory store (``own_memory_store_id``: always read-write, cannot be deleted, not
counted among the workspace's shared stores). A task's token may read its own worker only.
"""

from __future__ import annotations

from fastapi import APIRouter, Query

from gitmem.agents.tasks.values import MAX_PAGE
from gitmem.api.deps import Caller, HomeParts, not_a_task
from gitmem.api.schemas.agents.workers import Worker, WorkerCreate, WorkerList, WorkerUpdate
from gitmem.api.schemas.common import ERROR_RESPONSES
from gitmem.engine.catalog.catalog import principal_task_id
from gitmem.errors import NotFound

router = APIRouter(prefix="/v1/workers", tags=["workers"], responses=ERROR_RESPONSES)


@router.post(
    "",
    response_model=Worker,
    summary="Create a worker (and its own memory store)",
    dependencies=[not_a_task("create workers")],
)
def create_worker(body: WorkerCreate, principal: Caller, parts: HomeParts) -> Worker:
    worker = parts.tasks.create_worker(principal.workspace_id, body.name, body.memory_store_ids or [])
    return Worker.of(worker)


@router.get(
    "", response_model=WorkerList, summary="List workers, newest first", dependencies=[not_a_task("list workers")]
)
def list_workers(
    principal: Caller,
    parts: HomeParts,
    limit: int = Query(20, ge=1, le=MAX_PAGE),
    page: str | None = Query(None),
) -> WorkerList:
    result = parts.tasks.list_workers(principal.workspace_id, limit=limit, page=page or None)
    return WorkerList(data=[Worker.of(w) for w in result.items], next_page=result.next_page)


@router.get("/{worker_id}", response_model=Worker, summary="Retrieve a worker")
def retrieve_worker(worker_id: str, principal: Caller, parts: HomeParts) -> Worker:
    tasks = parts.tasks
    task_id = principal_task_id(principal)
    if task_id is not None and tasks.get_task(principal.workspace_id, task_id).worker_id != worker_id:
        raise NotFound(f"worker {worker_id} not found")
    return Worker.of(tasks.get_worker(principal.workspace_id, worker_id))


@router.post(
    "/{worker_id}",
    response_model=Worker,
    summary="Update a worker's attached memory stores",
    dependencies=[not_a_task("change workers")],
)
def update_worker(worker_id: str, body: WorkerUpdate, principal: Caller, parts: HomeParts) -> Worker:
    tasks = parts.tasks
    if body.memory_store_ids is None:
        return Worker.of(tasks.get_worker(principal.workspace_id, worker_id))
    return Worker.of(tasks.set_attached_stores(principal.workspace_id, worker_id, body.memory_store_ids))
