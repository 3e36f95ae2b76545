"""What every wire model shares: times, the envelope of errors, actors, the base models (unknown body
fields refused) and the health answer. Pydantic lives only here, at the edge, mirroring the SDK's types."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

from gitmem.clock import iso
from gitmem.model import Actor

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


class OutModel(BaseModel):
    """An answer's model."""

    model_config = ConfigDict(extra="forbid")


class InModel(BaseModel):
    """A request body's model."""

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


class ApiActor(OutModel):
    type: Literal["api_actor"] = "api_actor"
    api_key_id: str


class UserActor(OutModel):
    type: Literal["user_actor"] = "user_actor"
    user_id: str


class SessionActor(OutModel):
    """A task's writes. The seed's task is the SDK's session, so a ``task_actor`` goes out as this."""

    type: Literal["session_actor"] = "session_actor"
    session_id: str


class ServiceAccountActor(OutModel):
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


class Health(OutModel):
    status: Literal["ok"] = "ok"
