"""Wire shapes of ``/v1/workers``, and the converter from ``gitmem.agents.tasks.values.Worker``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gitmem.agents.tasks import values as engine
from gitmem.api.schemas.common import InModel, OutModel, Timestamp


class WorkerCreate(InModel):
    name: str
    memory_store_ids: list[str] | None = Field(
        None, description="Stores attached to the worker: what its tasks read when they name none"
    )


class WorkerUpdate(InModel):
    memory_store_ids: list[str] | None = Field(
        None, description="Replaces the attached stores; tasks already made keep theirs"
    )


class Worker(OutModel):
    id: str
    type: Literal["worker"] = "worker"
    name: str
    own_memory_store_id: str
    memory_store_ids: list[str]
    created_at: Timestamp

    @classmethod
    def of(cls, worker: engine.Worker) -> Worker:
        return cls(
            id=worker.id,
            name=worker.name,
            own_memory_store_id=worker.own_store_id,
            memory_store_ids=list(worker.attached_store_ids),
            created_at=worker.created_at,
        )


class WorkerList(OutModel):
    data: list[Worker]
    next_page: str | None = None
