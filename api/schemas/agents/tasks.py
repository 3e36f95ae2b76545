"""Wire shapes of ``/v1/tasks``, and converters from ``gitmem.agents.tasks.tasks``' values.

A task's ``resources`` item has the SDK's session memory-store resource shape
(``anthropic.types.beta.sessions.BetaManagedAgentsMemoryStoreResource``): ``type``,
``memory_store_id``, ``access``, ``instructions``, and the snapshot ``name``, ``description`` and
``mount_path``; gitmem adds ``own`` (the worker's own store).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gitmem.agents.tasks import values as engine
from gitmem.api.schemas.common import InModel, OutModel, Timestamp, WireActor, actor_out

Access = Literal["read_write", "read_only"]


class MemoryStoreResourceIn(InModel):
    type: Literal["memory_store"]
    memory_store_id: str
    access: Access | None = None  # read_write when absent or null
    instructions: str | None = Field(None, max_length=engine.MAX_INSTRUCTIONS_CHARS)


class TaskCreate(InModel):
    worker_id: str
    # The engine refuses more than 8 with a message that says so; no max_length here.
    resources: list[MemoryStoreResourceIn] | None = None


class MemoryStoreResource(OutModel):
    type: Literal["memory_store"] = "memory_store"
    memory_store_id: str
    name: str
    description: str
    access: Access
    instructions: str | None = None
    mount_path: str
    own: bool

    @classmethod
    def of(cls, task: engine.Task, store: engine.TaskStore, access: Access | None = None) -> MemoryStoreResource:
        return cls(
            memory_store_id=store.store_id,
            name=store.name,
            description=store.description,
            access=access or store.access,
            instructions=store.instructions or None,
            mount_path=task.mount_path(store),
            own=store.own,
        )


class Task(OutModel):
    id: str
    type: Literal["task"] = "task"
    worker_id: str
    resources: list[MemoryStoreResource]
    created_at: Timestamp
    created_by: WireActor | None = None
    ended_at: Timestamp | None = Field(None, description="When the task was ended: its token no longer works")
    token: str | None = Field(None, description="The task's token: in the create response only, shown once")

    @classmethod
    def of(cls, task: engine.Task, token: str | None = None) -> Task:
        return cls(
            id=task.id,
            worker_id=task.worker_id,
            resources=[MemoryStoreResource.of(task, s) for s in task.stores],
            created_at=task.created_at,
            created_by=actor_out(task.created_by),
            ended_at=task.ended_at,
            token=token,
        )


class DeletedTask(OutModel):
    id: str
    type: Literal["task_deleted"] = "task_deleted"


class TaskList(OutModel):
    data: list[Task]
    next_page: str | None = None


class TaskMemoryStore(OutModel):
    type: Literal["memory_store"] = "memory_store"
    memory_store_id: str
    name: str
    description: str
    access: Access
    instructions: str | None = None
    mount_path: str
    own: bool
    available: bool
    archived: bool
    memory_count: int
    paths: list[str]


class TaskMemory(OutModel):
    type: Literal["task_memory"] = "task_memory"
    task_id: str
    root: str
    stores: list[TaskMemoryStore]
    context: str

    @classmethod
    def of(cls, view: engine.MemoryView) -> TaskMemory:
        return cls(
            task_id=view.task_id,
            root=view.root,
            stores=[
                TaskMemoryStore(
                    memory_store_id=v.store.store_id,
                    name=v.store.name,
                    description=v.store.description,
                    access=v.access,
                    instructions=v.store.instructions or None,
                    mount_path=v.mount_path,
                    own=v.store.own,
                    available=v.available,
                    archived=v.archived,
                    memory_count=v.total,
                    paths=list(v.paths),
                )
                for v in view.stores
            ],
            context=view.context,
        )


# -- events ----------------------------------------------------------------------------------------


class TaskEventCreate(InModel):
    type: str = Field(description="e.g. 'agent.message'; letters, digits and _ . : - (at most 64)")
    payload: dict[str, Any] | None = None


class TaskEvent(OutModel):
    id: str
    type: str
    task_id: str
    seq: int
    payload: dict[str, Any]
    created_at: Timestamp
    created_by: WireActor | None = None

    @classmethod
    def of(cls, event: engine.Event) -> TaskEvent:
        return cls(
            id=event.id,
            type=event.type,
            task_id=event.task_id,
            seq=event.seq,
            payload=event.payload,
            created_at=event.created_at,
            created_by=actor_out(event.created_by),
        )


class TaskEventList(OutModel):
    data: list[TaskEvent]
    next_page: str | None = None
