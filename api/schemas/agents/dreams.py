"""Wire shapes of ``/v1/dreams``, mirroring the SDK's ``BetaDream`` family
(``anthropic.types.beta.beta_dream*``), and the converter from ``gitmem.agents.dreams.values.Dream``.

gitmem calls the tasks a dream reads ``tasks``; the SDK calls them ``sessions``. Both are accepted on
input (``{"type": "tasks", "task_ids"}`` is an alias), but a dream always answers in the SDK's shapes:
its inputs are ``memory_store`` and ``sessions``, and ``session_id`` names the task it runs as.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from gitmem.agents.dreams import values as engine
from gitmem.api.schemas.common import InModel, OutModel, Timestamp, documented

Status = Literal["pending", "running", "completed", "failed", "canceled"]


# -- the request -----------------------------------------------------------------------------------


class MemoryStoreInputIn(InModel):
    type: Literal["memory_store"]
    memory_store_id: str


class SessionsInputIn(InModel):
    type: Literal["sessions"]
    session_ids: Annotated[list[str], documented(minItems=1, maxItems=engine.MAX_TASKS)]


class TasksInputIn(InModel):
    type: Literal["tasks"]
    task_ids: Annotated[list[str], documented(minItems=1, maxItems=engine.MAX_TASKS)]


DreamInputIn = Annotated[MemoryStoreInputIn | SessionsInputIn | TasksInputIn, Field(discriminator="type")]

ModelId = Annotated[str, documented(minLength=1, maxLength=engine.MAX_MODEL_ID_CHARS)]


class ModelConfigIn(InModel):
    id: ModelId
    speed: Literal["standard", "fast"] | None = Field(None, description="Only 'standard': 'fast' is 400")


class CreateNew(InModel):
    type: Literal["create_new"]


class UpdateExisting(InModel):
    type: Literal["update_existing"]
    memory_store_id: str


OutputBehaviorIn = Annotated[CreateNew | UpdateExisting, Field(discriminator="type")]


class DreamCreate(InModel):
    inputs: Annotated[list[DreamInputIn], documented(minItems=1, maxItems=2)]
    model: ModelId | ModelConfigIn
    instructions: Annotated[str, documented(maxLength=engine.MAX_INSTRUCTIONS_CHARS)] | None = None
    output_behavior: OutputBehaviorIn | None = None


# -- the dream -------------------------------------------------------------------------------------


class MemoryStoreInput(OutModel):
    type: Literal["memory_store"] = "memory_store"
    memory_store_id: str


class SessionsInput(OutModel):
    type: Literal["sessions"] = "sessions"
    session_ids: list[str]


DreamInput = Annotated[MemoryStoreInput | SessionsInput, Field(discriminator="type")]


class ModelConfig(OutModel):
    id: str
    speed: Literal["standard", "fast"] = "standard"


class CreateNewOut(OutModel):
    type: Literal["create_new"] = "create_new"


class UpdateExistingOut(OutModel):
    type: Literal["update_existing"] = "update_existing"
    memory_store_id: str


OutputBehavior = Annotated[CreateNewOut | UpdateExistingOut, Field(discriminator="type")]


class DreamOutput(OutModel):
    type: Literal["memory_store"] = "memory_store"
    memory_store_id: str


class DreamUsage(OutModel):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


class DreamError(OutModel):
    type: str
    message: str


class Dream(OutModel):
    id: str
    type: Literal["dream"] = "dream"
    status: Status
    inputs: list[DreamInput]
    model: ModelConfig
    instructions: str | None = None
    output_behavior: OutputBehavior
    outputs: list[DreamOutput]
    usage: DreamUsage
    error: DreamError | None = None
    session_id: str | None = Field(None, description="The task the dream runs as (the SDK's session)")
    created_at: Timestamp
    ended_at: Timestamp | None = None
    archived_at: Timestamp | None = None

    @classmethod
    def of(cls, dream: engine.Dream) -> Dream:
        inputs: list[MemoryStoreInput | SessionsInput] = [MemoryStoreInput(memory_store_id=dream.input_store_id)]
        if dream.task_ids:
            inputs.append(SessionsInput(session_ids=list(dream.task_ids)))
        behavior: CreateNewOut | UpdateExistingOut = (
            UpdateExistingOut(memory_store_id=dream.input_store_id)
            if dream.output_behavior == "update_existing"
            else CreateNewOut()
        )
        return cls(
            id=dream.id,
            status=dream.status,
            inputs=inputs,
            model=ModelConfig(id=dream.model_id, speed="standard"),
            instructions=dream.instructions,
            output_behavior=behavior,
            outputs=[DreamOutput(memory_store_id=dream.output_store_id)] if dream.output_store_id else [],
            usage=DreamUsage(**dream.usage.as_dict()),
            error=DreamError(type=dream.error_type, message=dream.error_message or "")
            if dream.status == "failed" and dream.error_type
            else None,
            session_id=dream.task_id,
            created_at=dream.created_at,
            ended_at=dream.ended_at,
            archived_at=dream.archived_at,
        )


class DreamList(OutModel):
    data: list[Dream]
    next_page: str | None = None
