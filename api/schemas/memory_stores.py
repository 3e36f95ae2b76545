"""Wire shapes: pydantic models that mirror the official SDK's types, and converters from the engine's
domain values. Pydantic lives only here, at the edge."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

from gitmem.agents.review.review import ReviewSettings
from gitmem.clock import iso
from gitmem.model import Actor, MemoryPrefix, Note, StoreInfo, Version

# RFC 3339 in UTC with a ``Z``, microseconds kept when there are any.
Timestamp = Annotated[
    dt.datetime,
    PlainSerializer(iso, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
View = Literal["basic", "full"]
Operation = Literal["created", "modified", "deleted"]


def as_utc(when: dt.datetime | None) -> dt.datetime | None:
    """A time filter from a query string; one without an offset is taken as UTC."""
    if when is None or when.tzinfo is not None:
        return when
    return when.replace(tzinfo=dt.UTC)


def documented(**constraints: Any) -> Any:
    """A constraint published in the OpenAPI schema but checked by the engine, whose refusals say more
    than pydantic's (and which applies the same rules to pushes and the memory tool)."""
    return Field(json_schema_extra=constraints)


NotePath = Annotated[
    str, documented(pattern="^(/[^/]+)+$", maxLength=1024, description="Starts with '/', e.g. /people/sam.md")
]
NoteContent = Annotated[str, documented(maxLength=102_400, description="UTF-8 text, at most 102,400 bytes")]
StoreName = Annotated[str, documented(minLength=1, maxLength=255)]
StoreDescription = Annotated[str, documented(maxLength=1024)]


Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="64 lowercase hex characters")]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _In(BaseModel):
    # Unknown fields are refused (400) rather than silently ignored.
    model_config = ConfigDict(extra="forbid")


# -- errors ----------------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    message: str


class ErrorResponse(BaseModel):
    type: Literal["error"]
    error: ErrorDetail
    request_id: str


_ERROR_DESCRIPTIONS = {
    400: "invalid_request_error: a malformed or refused request",
    401: "authentication_error: a missing or unknown key",
    403: "permission_error: the key may not do this",
    404: "not_found_error: no such object in the key's workspace",
    405: "invalid_request_error: the method is not allowed on this path",
    409: "memory_path_conflict_error, memory_precondition_failed_error or conflict_error",
    413: "request_too_large: the body is over the limit",
    429: "rate_limit_error: slow down (see retry-after)",
    500: "api_error: an internal error",
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text} for status, text in _ERROR_DESCRIPTIONS.items()
}


# -- actors ----------------------------------------------------------------------------------------


class ApiActor(_Out):
    type: Literal["api_actor"] = "api_actor"
    api_key_id: str


class UserActor(_Out):
    type: Literal["user_actor"] = "user_actor"
    user_id: str


class SessionActor(_Out):
    """A task's writes. The seed's task is the SDK's session, so a ``task_actor`` goes out as this."""

    type: Literal["session_actor"] = "session_actor"
    session_id: str


class ServiceAccountActor(_Out):
    """gitmem itself, where a change must name who made it (a redaction from ``gitmem redact``)."""

    type: Literal["service_account_actor"] = "service_account_actor"
    service_account_id: str


WireActor = Annotated[ApiActor | UserActor | SessionActor | ServiceAccountActor, Field(discriminator="type")]


def actor_out(actor: Actor | None) -> ApiActor | UserActor | SessionActor | ServiceAccountActor | None:
    if actor is None:
        return None
    if actor.type == "api_actor":
        return ApiActor(api_key_id=actor.id)
    if actor.type == "user_actor":
        return UserActor(user_id=actor.id)
    if actor.type == "service_account_actor":
        return ServiceAccountActor(service_account_id=actor.id)
    return SessionActor(session_id=actor.id)


# -- memory stores ---------------------------------------------------------------------------------


class StoreReview(_Out):
    """gitmem's extension of a memory store: it is under review (the SDK ignores the extra field)."""

    enabled: bool
    read_approved_only: bool


class MemoryStore(_Out):
    id: str
    type: Literal["memory_store"] = "memory_store"
    name: str
    description: str
    metadata: dict[str, str]
    created_at: Timestamp
    updated_at: Timestamp
    archived_at: Timestamp | None = None
    review: StoreReview | None = None

    @classmethod
    def of(cls, info: StoreInfo, review: ReviewSettings | None = None) -> MemoryStore:
        return cls(
            id=info.id,
            name=info.name,
            description=info.description or "",
            metadata=dict(info.metadata or {}),
            created_at=info.created_at,
            updated_at=info.updated_at,
            archived_at=info.archived_at,
            review=StoreReview(enabled=True, read_approved_only=review.read_approved_only)
            if review is not None and review.enabled
            else None,
        )


class DeletedMemoryStore(_Out):
    id: str
    type: Literal["memory_store_deleted"] = "memory_store_deleted"


class MemoryStoreList(_Out):
    data: list[MemoryStore]
    next_page: str | None = None


class MemoryStoreCreate(_In):
    name: StoreName
    description: StoreDescription | None = None
    metadata: Annotated[dict[str, str], documented(maxProperties=16)] | None = None
    # gitmem's extension: encrypt note content at rest with the store's own AES-SIV key.
    encrypted: bool | None = None
    # gitmem's extensions: put the store under a steward's review; tasks read only what was approved.
    review: bool | None = None
    read_approved_only: bool | None = None


class MemoryStoreUpdate(_In):
    name: StoreName | None = None
    description: StoreDescription | None = None
    # A key set to null is removed; keys left out keep their values.
    metadata: dict[str, str | None] | None = None
    review: bool | None = None
    read_approved_only: bool | None = None


# -- memories --------------------------------------------------------------------------------------


class Memory(_Out):
    id: str
    type: Literal["memory"] = "memory"
    memory_store_id: str
    path: str
    content: str | None = None
    content_sha256: str
    content_size_bytes: int
    memory_version_id: str
    created_at: Timestamp
    updated_at: Timestamp

    @classmethod
    def of(cls, note: Note, view: View) -> Memory:
        return cls(
            id=note.id,
            memory_store_id=note.store_id,
            path=note.path,
            content=note.content if view == "full" else None,
            content_sha256=note.content_sha256,
            content_size_bytes=note.content_size_bytes,
            memory_version_id=note.version_id,
            created_at=note.created_at,
            updated_at=note.updated_at,
        )


class MemoryPrefixOut(_Out):
    type: Literal["memory_prefix"] = "memory_prefix"
    path: str


MemoryListItem = Annotated[Memory | MemoryPrefixOut, Field(discriminator="type")]


def memory_item(item: Note | MemoryPrefix, view: View) -> Memory | MemoryPrefixOut:
    if isinstance(item, MemoryPrefix):
        return MemoryPrefixOut(path=item.path)
    return Memory.of(item, view)


class MemoryList(_Out):
    data: list[MemoryListItem]
    next_page: str | None = None


class DeletedMemory(_Out):
    id: str
    type: Literal["memory_deleted"] = "memory_deleted"


class Precondition(_In):
    type: Literal["content_sha256"]
    content_sha256: Sha256Hex


class MemoryCreate(_In):
    path: NotePath
    # The SDK sends ``content`` always and types it nullable: ``null`` makes an empty note, like "".
    content: NoteContent | None


class MemoryUpdate(_In):
    # ``null`` or absent: leave as is.
    content: NoteContent | None = None
    path: NotePath | None = None
    precondition: Precondition | None = None


# -- memory versions -------------------------------------------------------------------------------


class MemoryVersion(_Out):
    id: str
    type: Literal["memory_version"] = "memory_version"
    memory_store_id: str
    memory_id: str
    operation: Operation
    path: str | None = None
    content: str | None = None
    content_sha256: str | None = None
    content_size_bytes: int | None = None
    created_at: Timestamp
    created_by: WireActor | None = None
    redacted_at: Timestamp | None = None
    redacted_by: WireActor | None = None

    @classmethod
    def of(cls, version: Version, view: View) -> MemoryVersion:
        redacted = version.redacted_at is not None
        return cls(
            id=version.id,
            memory_store_id=version.store_id,
            memory_id=version.memory_id,
            operation=version.operation,
            path=None if redacted else version.path,
            content=version.content if view == "full" and not redacted else None,
            content_sha256=None if redacted else version.content_sha256,
            content_size_bytes=None if redacted else version.content_size_bytes,
            created_at=version.created_at,
            created_by=actor_out(version.created_by),
            redacted_at=version.redacted_at,
            redacted_by=actor_out(version.redacted_by),
        )


class MemoryVersionList(_Out):
    data: list[MemoryVersion]
    next_page: str | None = None


# -- health ----------------------------------------------------------------------------------------


class Health(_Out):
    status: Literal["ok"] = "ok"
